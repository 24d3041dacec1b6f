"""An exercise through the NumPy core, as production code runs it: the batched layer, or a decoder's step.

:func:`run_exercise` runs an exercise of format v1 through
:class:`tutor.numeric.MultiHeadAttention` (batched, fused, as
``nn.MultiheadAttention`` does), and one of format v2 as a decoder LLM's
attention does one step (:func:`run_decoder`), keeping every intermediate
array (:class:`tutor.numeric.layer.LayerRun`); with ``backward`` its
gradients too (:mod:`tutor.production.backward`).  This is what checks the
exact engine (:func:`tutor.production.verify`).

What a decoder does (and what PyTorch 2.13 offers for it): project the new
tokens with ``num_heads`` query heads and ``num_kv_heads`` K/V heads; append
the new keys and values to the KV cache (``past_key_values``); call
``scaled_dot_product_attention(q, k, v, attn_mask=..., enable_gqa=True)``
with one float ``attn_mask`` holding the additive bias (ALiBi's or the
file's) and ``-inf`` where the causal mask (bottom-right aligned for a
decode step) or the key padding blocks; merge the heads and apply ``W_O``.
Grouped K/V heads are repeated to the query heads inside
:func:`tutor.numeric.functional.attention_with_weights` in
``repeat_interleave`` order (query head ``h`` reads K/V head ``h // (H/G)``).

Source: Vaswani et al. 2017, eq. 1 and §3.2.2; Ainslie et al. 2023 (GQA);
Press et al. 2022 (ALiBi); PyTorch's ``scaled_dot_product_attention`` docs
(``enable_gqa``, float ``attn_mask``) and
``torch.nn.attention.bias.causal_lower_right``.  Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from numpy.typing import DTypeLike, NDArray

from ..base.errors import ShapeError, TutorError
from ..base.messages import Msg
from ..exercise.record import Exercise
from ..numeric.functional import attention_with_weights, causal_mask
from ..numeric.layer import LayerRun, MultiHeadAttention
from ..numeric.masks import sliding_window_mask
from ..numeric.norm import layer_norm, rms_norm
from ..numeric.rotary import apply_rope
from .backward import layer_backward


def layer_of(ex: Exercise, dtype: DTypeLike = np.float64, *, batch_first: bool = False) -> MultiHeadAttention:
    """The layer of a :class:`tutor.exercise.Exercise` (Fractions → ``dtype``); ``batch_first`` as PyTorch's.

    Per-head ``w_q [d_model, d_k]`` etc. are laid side by side in head
    order (``w_q = [W_q¹ | W_q² | …]``).  A head without a bias gets
    zeros when another head has one.  ``d_k`` need not be
    ``d_model / num_heads``.

    Raises :class:`ShapeError` when the heads differ in ``d_k`` or ``d_v``:
    a batched layer splits one projection into equal heads, so such an
    exercise is for the exact engine only.  Source: Vaswani et al. 2017,
    section 3.2.2 (heads concatenated, then ``W^O``).
    """
    heads = ex.heads
    d_ks = sorted({h.d_k for h in heads})
    d_vs = sorted({h.d_v for h in heads})
    if len(d_ks) > 1 or len(d_vs) > 1:
        raise ShapeError(
            f"exercise {ex.id!r}: the heads differ in size (d_k in {d_ks}, d_v in {d_vs}); "
            "the batched layer splits one projection into equal heads, so only the "
            "exact engine computes this exercise"
        )
    dt = np.dtype(dtype)

    def side_by_side(mats: list) -> NDArray:
        return np.concatenate([np.array(m, dtype=object).astype(dt) for m in mats], axis=1)

    def biases(vecs: list, n: int) -> NDArray | None:
        if all(b is None for b in vecs):
            return None
        return np.concatenate(
            [np.array(b if b is not None else [0] * n, dtype=object).astype(dt) for b in vecs]
        )

    to = (lambda m: None if m is None else np.array(m, dtype=object).astype(dt))
    return MultiHeadAttention(
        side_by_side([h.w_q for h in heads]),  # [D, H·d_k]
        side_by_side([h.w_k for h in heads]),  # [D_kv, H·d_k]
        side_by_side([h.w_v for h in heads]),  # [D_kv, H·d_v]
        len(heads),
        b_q=biases([h.b_q for h in heads], d_ks[0]),
        b_k=biases([h.b_k for h in heads], d_ks[0]),
        b_v=biases([h.b_v for h in heads], d_vs[0]),
        w_o=to(ex.w_o),
        b_o=to(ex.b_o),
        batch_first=batch_first,
        dtype=dt,
    )


def run_exercise(ex: Exercise, dtype: DTypeLike = np.float64, *, backward: bool = False) -> LayerRun:
    """Run an exercise through the batched layer (``B = 1``, ``batch_first``), keeping the intermediate arrays.

    Uses ``ex.mask`` (or a causal mask when ``mask_kind == "causal"`` and no
    matrix is given) AND ``ex.key_padding`` (False = padding) as one
    True = may attend mask, and ``x_kv`` for cross-attention.  This is what
    checks the exact engine.  The masks go in below the PyTorch-style
    :meth:`MultiHeadAttention.forward`, so an exercise may block what it
    likes (every key of a row, every key of the sequence): the polarity
    checks of ``forward`` are for callers who may have flipped a mask.
    Raises :class:`ShapeError` as :func:`layer_of`.  An exercise with grouped
    K/V heads, a KV cache or a bias (format v2) runs the decoder path instead
    (:func:`run_decoder`, float64), and one with multi-head latent attention
    (format v3, ``mla``) the latent's (:func:`run_latent`, float64).  With ``backward`` the run also holds the
    gradients of the exercise's upstream gradient (:func:`layer_backward`).
    """
    if ex.has_norm or ex.residual:
        if backward:  # not built: refused, never a run without its gradients
            raise TutorError(Msg("block.backward", id=ex.id))
        return _run_block(ex, dtype)
    run = run_latent(ex) if ex.mla is not None else run_decoder(ex) if ex.is_v2 or ex.rope is not None else _run_layer(ex, dtype)
    return replace(run, grads=layer_backward(ex)) if backward else run


def _run_block(ex: Exercise, dtype: DTypeLike) -> LayerRun:
    """The pre-norm block (issue 23): ``X_norm = norm(X)`` over each row, the layer on ``X_norm``, then
    ``X + output`` with a residual, as a pre-norm transformer block's attention half computes it (LLaMA:
    ``h = x + attention(norm(x))``, Touvron et al. 2023, §2.2; Xiong et al. 2020, Figure 1(b)).
    ``x_norm [L, d_model]``, ``residual [L, d_model]``; the rest as :func:`_run_layer`."""
    x = np.array(ex.x, dtype=object).astype(np.dtype(dtype))  # [L, d_model]
    x_norm = _norm(ex, x) if ex.has_norm else None  # [L, d_model]
    run = _run_layer(ex, dtype, x_in=x_norm)
    residual = x + run.output if ex.residual else None  # [L, d_model]
    # post-norm (Vaswani et al. 2017, §3.1: LayerNorm(x + Sublayer(x))): the projections read x, the sum is normalized
    out_norm = _norm(ex, residual) if ex.post_norm and residual is not None else None  # [L, d_model]
    return replace(run, x_norm=x_norm, residual=residual, out_norm=out_norm)


def _norm(ex: Exercise, a: NDArray) -> NDArray:
    """``a`` ``[L, d_model]`` normalized over each row as the exercise's ``norm`` (``rms_norm``, ``layer_norm``
    with PyTorch's arguments, eps the exercise's)."""
    eps = float(ex.norm_eps)
    if ex.norm == "rmsnorm":
        return rms_norm(a, a.shape[-1], eps=eps)
    return layer_norm(a, a.shape[-1], eps=eps)


def _run_layer(ex: Exercise, dtype: DTypeLike, x_in: NDArray | None = None) -> LayerRun:
    """A v1 exercise through the batched layer (:func:`run_exercise`); ``x_in`` ``[L, d_model]`` in place of
    ``ex.x`` (the normalized X of the pre-norm block)."""
    layer = layer_of(ex, dtype=dtype, batch_first=True)
    dt = layer.dtype
    x = (np.array(ex.x, dtype=object).astype(dt) if x_in is None else x_in.astype(dt))[None]  # [1, L, D]
    kv = x if ex.x_kv is None else np.array(ex.x_kv, dtype=object).astype(dt)[None]  # [1, L_k, D_kv]
    allowed = None
    if ex.mask_kind == "sliding_window":  # issue 23: the mirror's own window, checked against the exact one by verify
        assert ex.window is not None
        allowed = sliding_window_mask(ex.L, ex.L_k, ex.window, ex.sinks)  # [L, L_k]
    elif ex.mask is not None:
        allowed = np.array(ex.mask, dtype=bool)  # [L, L_k]
    elif ex.mask_kind == "causal":
        allowed = causal_mask(ex.L, ex.L_k)  # [L, L_k]
    if ex.key_padding is not None:
        real = np.array(ex.key_padding, dtype=bool)[None, :]  # [1, L_k]  True = a real key
        allowed = real if allowed is None else allowed & real  # [L|1, L_k]
    seen: dict[str, NDArray] = {}
    out, weights = layer.forward_traced(x, kv, None if allowed is None else allowed[None, None],
                                        lambda name, a: seen.setdefault(name, a.copy()))
    if "permute" in seen:
        q, k, v = seen["permute"][:, 0]  # 3 × [H, L, d_h]
    else:
        q, k, v = seen["q_heads"][0], seen["k_heads"][0], seen["v_heads"][0]  # [H, L, d]
    return LayerRun(
        q=q,
        k=k,
        v=v,
        scores=seen["scores"][0],  # [H, L, L_k]
        weights=weights[0],  # [H, L, L_k]
        context=seen["merge"][0],  # [L, H·d_v]
        output=out[0],  # [L, d_out]
    )


def _f(m: object) -> NDArray:
    return np.array(m, dtype=object).astype(np.float64)


def run_decoder(ex: Exercise) -> LayerRun:
    """Run a v2 exercise (grouped K/V heads, a KV cache, a bias) as a decoder does, keeping the intermediate arrays.

    Shapes (batch axis dropped): ``q [H, L, d_k]``; ``k_new [H, L, d_k]``, ``v_new [H, L, d_v]`` (the new
    tokens' keys and values, each query head's K/V head); ``k [H, L_k, d_k]``, ``v [H, L_k, d_v]`` (the cache
    with the new rows appended); ``scores [H, L, L_k]`` (``q kᵀ / √d_k``); ``biased [H, L, L_k]`` (plus the
    bias); ``weights [H, L, L_k]``; ``context [L, H·d_v]``; ``output [L, d_out]``.  SDPA receives the K/V heads
    once each (``[G, L_k, d]``) with ``enable_gqa=True``.  Raises ``ValueError`` (``ShapeError``) when the heads
    differ in ``d_k`` or ``d_v`` (a batched layer splits one projection into equal heads).
    """
    H, G = ex.num_heads, ex.num_kv_heads
    if len({h.d_k for h in ex.heads}) > 1 or len({h.d_v for h in ex.heads}) > 1:
        raise ShapeError(f"exercise {ex.id!r}: the heads differ in size; only the exact engine computes it")
    first = [ex.sharing(g)[0] for g in range(G)]  # the first query head of each group holds its K/V weights
    x = _f(ex.x)  # [L, d_model]
    kv_in = _f(ex.kv)  # [L_new, d_kv]

    def proj(a: NDArray, w: object, b: object) -> NDArray:
        out = a @ _f(w)  # [n, d_in]·[d_in, d] -> [n, d]
        return out if b is None else out + _f(b)

    q = np.stack([proj(x, h.w_q, h.b_q) for h in ex.heads])  # [H, L, d_k]
    k_new = np.stack([proj(kv_in, ex.heads[h].w_k, ex.heads[h].b_k) for h in first])  # [G, L_new, d_k]
    v_new = np.stack([proj(kv_in, ex.heads[h].w_v, ex.heads[h].b_v) for h in first])  # [G, L_new, d_v]
    if ex.cache is not None:  # past_key_values: the cached rows, then the new ones (torch.cat(dim=-2))
        k = np.concatenate([np.stack([_f(c.k) for c in ex.cache]), k_new], axis=-2)  # [G, L_k, d_k]
        v = np.concatenate([np.stack([_f(c.v) for c in ex.cache]), v_new], axis=-2)  # [G, L_k, d_v]
    else:
        k, v = k_new, v_new  # [G, L_k, d]
    q_rot = k_rot = None
    q_in, k_in = q, k  # what the scores read: [H, L, d_k], [G, L_k, d_k]
    if ex.rope is not None:  # RoPE (format v3): Q and K turned by position, then attended
        q_in = q_rot = apply_rope(q, ex.query_positions, base=ex.rope.base, pairing=ex.rope.pairing)  # [H, L, d_k]
        new_rot = apply_rope(k_new, ex.key_positions[ex.L_past:], base=ex.rope.base, pairing=ex.rope.pairing)  # [G, L, d_k]
        # a cache holds its keys already rotated (each at its own position): they are not turned again
        k_in = k_rot = new_rot if ex.cache is None else np.concatenate([k[:, :ex.L_past], new_rot], axis=-2)  # [G, L_k, d_k]
    d_k = q.shape[-1]
    L, L_k = q.shape[1], k.shape[1]
    mask = np.zeros((H, L, L_k))  # [H, L, L_k]  one float attn_mask: the bias, and -inf where blocked
    if ex.bias is not None:
        mask += np.stack([_f(b) for b in ex.bias])  # [H, L, L_k]
    allowed = _allowed(ex)
    if allowed is not None:
        mask = np.where(allowed[None], mask, -np.inf)  # [H, L, L_k]
    out, weights = attention_with_weights(q_in, k_in, v, attn_mask=mask, enable_gqa=True)  # [H, L, d_v], [H, L, L_k]
    rep = H // G
    k_h, v_h = np.repeat(k, rep, axis=0), np.repeat(v, rep, axis=0)  # [H, L_k, d]  what each query head read
    k_read = np.repeat(k_in, rep, axis=0)  # [H, L_k, d_k]  the keys each query head's scores read (rotated with RoPE)
    scores = (q_in * (1.0 / math.sqrt(d_k))) @ k_read.swapaxes(-1, -2)  # [H, L, L_k]  (q/√d_k)·kᵀ, as the core computes it
    biased = scores + (np.stack([_f(b) for b in ex.bias]) if ex.bias is not None else 0.0)  # [H, L, L_k]
    context = out.transpose(1, 0, 2).reshape(L, -1)  # [L, H·d_v]  heads merged
    output = context
    if ex.w_o is not None:
        output = context @ _f(ex.w_o) + (_f(ex.b_o) if ex.b_o is not None else 0.0)  # [L, d_out]
    return LayerRun(q=q, k=k_h, v=v_h, scores=scores, weights=weights, context=context, output=output,
                       k_new=np.repeat(k_new, rep, axis=0), v_new=np.repeat(v_new, rep, axis=0), biased=biased,
                       q_rot=q_rot, k_rot=None if k_rot is None else np.repeat(k_rot, rep, axis=0))  # [H, L|L_k, d_k]


def _allowed(ex: Exercise) -> NDArray[np.bool_] | None:
    """``[L, L_k]`` True = may attend, for the decoder path: a sliding window built by the mirror
    (:func:`tutor.numeric.masks.sliding_window_mask`, issue 23), else the record's mask; AND the key padding."""
    if ex.mask_kind != "sliding_window":
        allowed = ex.allowed()
        return None if allowed is None else np.array(allowed, dtype=bool)  # [L, L_k]
    assert ex.window is not None
    window = sliding_window_mask(ex.L, ex.L_k, ex.window, ex.sinks)  # [L, L_k]
    return window if ex.key_padding is None else window & np.array(ex.key_padding, dtype=bool)[None, :]


def run_latent(ex: Exercise) -> LayerRun:
    """Run an exercise with multi-head latent attention (format v3, ``mla``) as an MLA layer does, keeping the
    intermediate arrays; float64.

    DeepSeek-AI 2024, "DeepSeek-V2", §2.1.2: the latent ``c_kv = x_kv @ W_DKV`` ``[L_k, d_c]`` (what the cache
    holds), each head's ``k = c_kv @ W_UK``, ``v = c_kv @ W_UV`` ``[H, L_k, d]``, then
    ``scaled_dot_product_attention`` with one float ``attn_mask`` (the bias, ``-inf`` where blocked); and the
    absorbed route beside it, ``q_absorbed = q @ W_UKᵀ`` ``[H, L, d_c]`` and
    ``scores_absorbed = q_absorbed @ c_kvᵀ`` ``[H, L, L_k]`` (unscaled).  Other shapes as :func:`run_decoder`.
    Raises ``ValueError`` (``ShapeError``) when the heads differ in ``d_k`` or ``d_v``.
    """
    assert ex.mla is not None
    if len({h.d_k for h in ex.heads}) > 1 or len({h.d_v for h in ex.heads}) > 1:
        raise ShapeError(f"exercise {ex.id!r}: the heads differ in size; only the exact engine computes it")
    x, kv_in = _f(ex.x), _f(ex.kv)  # [L, d_model], [L_k, d_kv]
    c_kv = kv_in @ _f(ex.mla.w_dkv)  # [L_k, d_kv]·[d_kv, d_c] -> [L_k, d_c]
    w_uk = np.stack([_f(w) for w in ex.mla.w_uk])  # [H, d_c, d_k]
    w_uv = np.stack([_f(w) for w in ex.mla.w_uv])  # [H, d_c, d_v]
    q = np.stack([x @ _f(h.w_q) + (_f(h.b_q) if h.b_q is not None else 0.0) for h in ex.heads])  # [H, L, d_k]
    k, v = c_kv @ w_uk, c_kv @ w_uv  # [L_k, d_c]·[H, d_c, d] -> [H, L_k, d]
    H, L, d_k = q.shape
    L_k = k.shape[1]
    mask = np.zeros((H, L, L_k))  # [H, L, L_k]  one float attn_mask: the bias, and -inf where blocked
    if ex.bias is not None:
        mask += np.stack([_f(b) for b in ex.bias])
    allowed = ex.allowed()
    if allowed is not None:
        mask = np.where(np.array(allowed, dtype=bool)[None], mask, -np.inf)
    out, weights = attention_with_weights(q, k, v, attn_mask=mask)  # [H, L, d_v], [H, L, L_k]
    scores = (q * (1.0 / math.sqrt(d_k))) @ k.swapaxes(-1, -2)  # [H, L, L_k]  (q/√d_k)·kᵀ, as the core computes it
    biased = scores + (np.stack([_f(b) for b in ex.bias]) if ex.bias is not None else 0.0)  # [H, L, L_k]
    q_absorbed = q @ w_uk.swapaxes(-1, -2)  # [H, L, d_k]·[H, d_k, d_c] -> [H, L, d_c]
    scores_absorbed = q_absorbed @ c_kv.T  # [H, L, d_c]·[d_c, L_k] -> [H, L, L_k]
    context = out.transpose(1, 0, 2).reshape(L, -1)  # [L, H·d_v]  heads merged
    output = context
    if ex.w_o is not None:
        output = context @ _f(ex.w_o) + (_f(ex.b_o) if ex.b_o is not None else 0.0)  # [L, d_out]
    return LayerRun(q=q, k=k, v=v, scores=scores, weights=weights, context=context, output=output,
                    biased=biased if ex.bias is not None else None, c_kv=c_kv, q_absorbed=q_absorbed,
                    scores_absorbed=scores_absorbed)

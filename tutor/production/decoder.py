"""An exercise of format v2 through the production path of a decoder LLM's attention.

What Llama-style code does in one decode step (and what PyTorch 2.13 offers
for it): project the new tokens with ``num_heads`` query heads and
``num_kv_heads`` K/V heads; append the new keys and values to the KV cache
(``past_key_values``); call ``scaled_dot_product_attention(q, k, v,
attn_mask=..., enable_gqa=True)`` with one float ``attn_mask`` holding the
additive bias (ALiBi's or the file's) and ``-inf`` where the causal mask
(bottom-right aligned for a decode step) or the key padding blocks; merge the
heads and apply ``W_O``.  Grouped K/V heads are repeated to the query heads
inside :func:`.functional.attention_with_weights` in ``repeat_interleave``
order (query head ``h`` reads K/V head ``h // (H/G)``).

Source: Vaswani et al. 2017, eq. 1; Ainslie et al. 2023 (GQA); Press et al.
2022 (ALiBi); PyTorch's ``scaled_dot_product_attention`` docs (``enable_gqa``,
float ``attn_mask``) and ``torch.nn.attention.bias.causal_lower_right``.
Pure: no I/O.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from ..numeric.functional import attention_with_weights
from ..numeric.layer import ExerciseRun

if TYPE_CHECKING:  # pragma: no cover
    from tutor.exercise.record import Exercise


def _f(m: object) -> NDArray:
    return np.array(m, dtype=object).astype(np.float64)


def run_decoder(ex: Exercise) -> ExerciseRun:
    """Run a v2 exercise (grouped K/V heads, a KV cache, a bias) as a decoder does, keeping the intermediate arrays.

    Shapes (batch axis dropped): ``q [H, L, d_k]``; ``k_new [H, L, d_k]``, ``v_new [H, L, d_v]`` (the new
    tokens' keys and values, each query head's K/V head); ``k [H, L_k, d_k]``, ``v [H, L_k, d_v]`` (the cache
    with the new rows appended); ``scores [H, L, L_k]`` (``q kᵀ / √d_k``); ``biased [H, L, L_k]`` (plus the
    bias); ``weights [H, L, L_k]``; ``context [L, H·d_v]``; ``output [L, d_out]``.  SDPA receives the K/V heads
    once each (``[G, L_k, d]``) with ``enable_gqa=True``.  Raises ``ValueError`` (``ShapeError``) when the heads
    differ in ``d_k`` or ``d_v`` (a batched layer splits one projection into equal heads).
    """
    from tutor.base.errors import ShapeError

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
    d_k = q.shape[-1]
    L, L_k = q.shape[1], k.shape[1]
    mask = np.zeros((H, L, L_k))  # [H, L, L_k]  one float attn_mask: the bias, and -inf where blocked
    if ex.bias is not None:
        mask += np.stack([_f(b) for b in ex.bias])  # [H, L, L_k]
    allowed = ex.allowed()
    if allowed is not None:
        mask = np.where(np.array(allowed, dtype=bool)[None], mask, -np.inf)  # [H, L, L_k]
    out, weights = attention_with_weights(q, k, v, attn_mask=mask, enable_gqa=True)  # [H, L, d_v], [H, L, L_k]
    rep = H // G
    k_h, v_h = np.repeat(k, rep, axis=0), np.repeat(v, rep, axis=0)  # [H, L_k, d]  what each query head read
    scores = (q * (1.0 / math.sqrt(d_k))) @ k_h.swapaxes(-1, -2)  # [H, L, L_k]  (q/√d_k)·kᵀ, as the core computes it
    biased = scores + (np.stack([_f(b) for b in ex.bias]) if ex.bias is not None else 0.0)  # [H, L, L_k]
    context = out.transpose(1, 0, 2).reshape(L, -1)  # [L, H·d_v]  heads merged
    output = context
    if ex.w_o is not None:
        output = context @ _f(ex.w_o) + (_f(ex.b_o) if ex.b_o is not None else 0.0)  # [L, d_out]
    return ExerciseRun(q=q, k=k_h, v=v_h, scores=scores, weights=weights, context=context, output=output,
                       k_new=np.repeat(k_new, rep, axis=0), v_new=np.repeat(v_new, rep, axis=0), biased=biased)


def decoder_trace(ex: Exercise, B: int = 1) -> tuple:
    """The decoder's forward of a v2 exercise as shapes (:class:`tutor.numeric.trace.TraceStep`), ``B`` sequences.

    ``x [B, L, D]`` → ``q_proj [B, L, H·d_k]``, ``k_proj [B, L, G·d_k]``, ``v_proj [B, L, G·d_v]`` → heads
    ``[B, H|G, L, d]`` (``view`` + ``transpose(1, 2)``) → with a cache ``torch.cat`` with the cached
    ``[B, G, L_past, d]`` → SDPA with ``enable_gqa=True`` (the K/V heads repeated to ``[B, H, L_k, d]``
    inside) → ``scores``, the bias and the mask, ``weights`` ``[B, H, L, L_k]`` → ``context`` → merged →
    ``out_proj``.  The concrete shapes are those :func:`run_decoder` makes (a test checks them).
    """
    from ..numeric.trace import _TraceBuilder, merge_copies

    hd = ex.heads[0]
    sizes = {"B": B, "L": ex.L, "L_past": ex.L_past, "L_k": ex.L_k, "D": ex.d_model, "H": ex.num_heads,
             "G": ex.num_kv_heads, "d_k": hd.d_k, "d_v": hd.d_v, "d_out": ex.d_out}
    tb = _TraceBuilder(sizes)
    G = "G" if ex.grouped else "H"
    tb.add("x", ("B", "L", "D"), "trace.decoder.x" if ex.has_cache else "trace.decoder.x_all")
    tb.add("q_proj", ("B", "L", "H·d_k"), "trace.decoder.q_proj")
    tb.add("k_proj", ("B", "L", f"{G}·d_k"), "trace.decoder.k_proj", G=G)
    tb.add("v_proj", ("B", "L", f"{G}·d_v"), "trace.decoder.v_proj", G=G)
    tb.add("q_heads", ("B", "H", "L", "d_k"), "trace.decoder.heads")
    tb.add("k_heads", ("B", G, "L", "d_k"), "trace.decoder.heads")
    tb.add("v_heads", ("B", G, "L", "d_v"), "trace.decoder.heads")
    if ex.has_cache:
        tb.add("k_cache", ("B", G, "L_past", "d_k"), "trace.decoder.cache")
        tb.add("k", ("B", G, "L_k", "d_k"), "trace.decoder.cat", what="k")
        tb.add("v", ("B", G, "L_k", "d_v"), "trace.decoder.cat", what="v")
    if ex.grouped:
        tb.add("k_repeated", ("B", "H", "L_k", "d_k"), "trace.decoder.repeat", ratio=ex.num_heads // ex.num_kv_heads)
    tb.add("scores", ("B", "H", "L", "L_k"), "trace.decoder.scores.cache" if ex.has_cache else "trace.decoder.scores")
    if ex.has_bias or ex.has_mask:
        tb.add("attn_mask", ("L", "L_k"), "trace.decoder.attn_mask.float" if ex.has_bias else "trace.decoder.attn_mask")
    tb.add("weights", ("B", "H", "L", "L_k"), "trace.decoder.weights")
    tb.add("context", ("B", "H", "L", "d_v"), "trace.decoder.context" if ex.grouped else "trace.decoder.context.plain")
    # transpose(1, 2).reshape(B, L, H·d_v): a view or a copy as for the v1 layer (merge_copies, checked against torch)
    tb.add("merge", ("B", "L", "H·d_v"), "trace.merge.copy" if merge_copies(ex.num_heads, ex.L, hd.d_v) else "trace.merge.view")
    if ex.w_o is not None:
        tb.add("out_proj", ("B", "L", "d_out"), "trace.decoder.out_proj")
    return tuple(tb.steps)


def decoder_masks(ex: Exercise) -> tuple:
    """The PyTorch spelling of a v2 exercise's attention call (:class:`tutor.numeric.masks.TorchMask` rows, ``B = 1``).

    ``F.scaled_dot_product_attention``: ``enable_gqa=True`` with grouped K/V heads; the mask as
    ``attn_mask=causal_lower_right(L_q, L_k)`` (``torch.nn.attention.bias``), ``is_causal=True`` (top-left),
    a boolean ``attn_mask`` (True = may attend), or, with a bias, one float ``attn_mask`` added to the scaled
    scores (the bias, ``-inf`` where blocked).  With a cache, the ``torch.cat`` that appends the new rows.
    A test runs every spelling through torch.
    """
    from ..numeric.masks import TorchMask

    out: list[TorchMask] = []
    if ex.has_cache:
        out.append(TorchMask("cache", "cat", True, call="k = torch.cat([k_cache, k_new], dim=-2); "
                                                        "v = torch.cat([v_cache, v_new], dim=-2)"))
    allowed = ex.allowed()
    if ex.bias is not None:
        rows = []
        for h in range(ex.num_heads):
            rows.append(tuple(tuple("-inf" if allowed is not None and not allowed[i][j] else str(b)
                                    for j, b in enumerate(row)) for i, row in enumerate(ex.bias[h])))
        value = tuple(rows) if len(set(rows)) > 1 else rows[0]
        out.append(TorchMask("sdpa", "attn_mask", value, call="attn_mask=torch.tensor(" + _floats(value) +
                             ", dtype=torch.float64)", float_mask=True))
    elif ex.mask_kind == "causal_lower_right" and ex.key_padding is None:
        out.append(TorchMask("sdpa", "attn_mask", allowed or (), call=f"attn_mask=causal_lower_right({ex.L}, {ex.L_k})",
                             lower_right=True))
    elif ex.mask_kind == "causal" and ex.key_padding is None:
        out.append(TorchMask("sdpa", "is_causal", True))
    elif allowed is not None:
        out.append(TorchMask("sdpa", "attn_mask", allowed, combined=ex.key_padding is not None and ex.mask is not None))
    if ex.grouped:
        out.append(TorchMask("sdpa", "enable_gqa", True))
    return tuple(out)


def _floats(value: tuple) -> str:
    """Nested tuples of exact texts (``"1/16"``, ``"-inf"``) as a Python literal of floats torch.tensor takes."""
    from fractions import Fraction

    if isinstance(value, str):
        return "float('-inf')" if value == "-inf" else repr(float(Fraction(value)))
    return "[" + ", ".join(_floats(v) for v in value) + "]"

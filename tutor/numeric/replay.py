"""One exercise, step by step, in float64: the float pipeline that diagnosis replays and ``check`` carries.

The step catalogue (:mod:`tutor.steps`) walks an exercise's steps in order
and calls one function of this module per step with a :class:`Replay`: the
exercise, a :class:`Variant` (the knobs a misconception turns; the defaults
compute the right answer) and the values of the steps before.  Each function
returns the step's ``[rows, cols]`` float64 matrix (``-inf`` marks a masked
score), or ``None`` when the variant makes the step impossible (shapes that
no longer chain): the walk then leaves it, and everything after it, out.

``check`` walks the same functions over the author's own values (a step the
author wrote replaces the computed one), and with :attr:`Replay.slack` set
each ``*_slack`` function says how far the inputs' rounding can move the
result (first-order bounds: a product adds ``|A|·δB + δA·|B| + δA·δB``; a
softmax row moves by at most ``w·(exp(2·max δ) - 1)``).

Formulas: Vaswani et al. 2017, eq. 1 (``softmax(Q Kᵀ / √d_k) V``) and §3.2.2
(``Concat(head_0, …) W_O``), row-vector convention ``Q = X W_Q + b_Q``.
Pure: no I/O.  The softmax is :func:`tutor.numeric.softmax`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from .functional import softmax

if TYPE_CHECKING:  # pragma: no cover
    from tutor.exercise.record import Exercise

Array = NDArray[np.float64]
Key = tuple[str, "int | None"]


@dataclass(frozen=True)
class Variant:
    """The knobs a misconception turns; the defaults compute the right answer.

    ``scale``: what the scores are divided by ("sqrt_dk", "none", "sqrt_dmodel",
    "dk") or multiplied by ("times_dk", "times_sqrt_dk").  ``kq``: ``K·Qᵀ``
    instead of ``Q·Kᵀ``.  ``mask``: "right", "none" (forgotten), "inverted",
    "zero" (blocked scores set to 0), "after_softmax" (weights zeroed after
    the softmax, not renormalised), "padding_rows" (key padding applied to
    query rows).  ``softmax``: False = no softmax at all, the (masked) scaled
    scores are the weights, a blocked score counting 0 (``-inf`` times a
    value has no value; a learner who skips the softmax drops the blocked
    keys).  ``softmax_axis``: -1 rows (right) or 0 columns.  ``normalise``:
    False = exp without dividing by the row sum.  ``empty_rows``: the
    weights of a row whose every score is blocked, "zero" (right) or
    "uniform" (1/L_k each: what a softmax gives when the blocked scores are
    filled with a large negative number instead of -inf).
    ``round_scaled``/``round_weights``: decimals kept when the step is used
    by the next one (None = full precision).  ``values``: "v" or "k"
    (weights·K).  ``heads_reversed``: concatenated last head first.
    ``w_o_transposed``: the output projection uses W_Oᵀ (nn.Linear's ``x @
    weight.T`` with the weight read as [d_out, d_in]; square W_O only).
    ``drop``: biases left out (``b_q``, ``b_k``, ``b_v``, ``b_o``).

    Format v2: ``kv_order``: "repeat" (right: query head h reads K/V head
    ``h // (H/G)``, repeat_interleave) or "tile" (K/V head ``h % G``, the
    ``[A, B, A, B]`` of ``repeat``/``tile``).  ``cache``: "right", or
    "reprojected" (the cached rows multiplied by W_K, W_V again, as if the
    cache held inputs; chains only when W is square).  ``bias``: "right",
    "after_softmax" (added to the weights, not to the scores) or "negated"
    (``-B``: ALiBi's distance with the wrong sign, ``i - j``).  ``mask``
    "top_left" builds a causal_lower_right exercise's mask top-left instead.

    Issue 10 (mistakes from published tutorials and notebooks):
    ``divisor``: the scores divided by this number instead of ``√d_k``
    (a wrong constant, ``√L``, ``num_heads`` ...; overrides ``scale``).
    ``mask="added"``: a boolean keep-mask added to the scores as numbers
    (``scaled + 1`` where the query may attend, ``scaled + 0`` where not:
    what a bool mask cast to float does as SDPA's float ``attn_mask``).
    ``average_heads``: every head's weights replaced by their average over
    the heads (what ``nn.MultiheadAttention`` returns by default,
    ``average_attn_weights=True``), and used as such.
    ``split_reshape``: the heads split by reshaping ``[L, H·d_k]`` straight
    to ``[H, L, d_k]``, without the transpose (``q.view(B, H, L, d_k)``
    instead of ``q.view(B, L, H, d_k).transpose(1, 2)``): tokens and heads
    mixed.  ``merge_reshape``: the inverse when merging, ``[H, L, d_v]``
    reshaped straight to ``[L, H·d_v]`` (concat rows mixed).
    ``truncate``: ``round_scaled``/``round_weights`` cut the decimals off
    instead of rounding them.
    """

    scale: str = "sqrt_dk"
    kq: bool = False
    mask: str = "right"
    softmax: bool = True
    softmax_axis: int = -1
    normalise: bool = True
    empty_rows: str = "zero"
    round_scaled: int | None = None
    round_weights: int | None = None
    values: str = "v"
    heads_reversed: bool = False
    w_o_transposed: bool = False
    drop: frozenset[str] = field(default_factory=frozenset)
    kv_order: str = "repeat"  # format v2
    cache: str = "right"
    bias: str = "right"
    divisor: float | None = None
    average_heads: bool = False
    split_reshape: bool = False
    merge_reshape: bool = False
    truncate: bool = False
    # the backward pass (issue 13): the softmax's gradient "jacobian" (right) or "elementwise" (no −rowsum);
    # grad_scale False = d_Q, d_K without 1/√d_k; d_k_transposed False = d_K from d_scaled·Q;
    # masked_grad "leak" = a blocked d_scaled entry left as d_weights − rowsum; bias_grad "mean" = rows averaged
    softmax_grad: str = "jacobian"
    grad_scale: bool = True
    d_k_transposed: bool = True
    masked_grad: str = "zero"
    bias_grad: str = "sum"
    kv_grad: str = "sum"  # grouped K/V heads: "own" = d_K, d_V from this query head only (not summed over the group)

    def turned(self) -> frozenset[str]:
        """The names of the knobs this variant sets away from the right answer."""
        right = Variant()
        return frozenset(name for name in self.__dataclass_fields__ if getattr(self, name) != getattr(right, name))


RIGHT = Variant()

#: When a step is read as the input of the next one, the knob that rounds it.
_ROUNDED = {"scaled": "round_scaled", "weights": "round_weights"}


def floats(m: Sequence[Sequence[Fraction]]) -> Array:
    """Exact rationals ``[r][c]`` as float64 ``[r, c]``."""
    return np.array([[float(x) for x in row] for row in m], dtype=np.float64)


def _vector(v: Sequence[Fraction] | None) -> Array | None:
    return None if v is None else np.array([float(x) for x in v], dtype=np.float64)


@dataclass
class Replay:
    """The state of one walk: the exercise, the variant, and every step computed so far.

    ``values[(id, head)]`` is a step's ``[rows, cols]`` float64 value as the
    next steps read it (for ``check``: the author's where given); ``slack``,
    when not ``None``, the half-widths those values may be off by;
    ``computed``, when carrying an author's values, each step as computed
    from the carried inputs and its slack.
    """

    ex: Exercise
    variant: Variant = RIGHT
    values: dict[Key, Array] = field(default_factory=dict)
    slack: dict[Key, Array] | None = None
    computed: dict[Key, tuple[Array, Array]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.x = floats(self.ex.x)  # [L, d_model]
        self.kv = floats(self.ex.kv)  # [L_k, d_kv]
        allowed = self.ex.allowed()
        self.allowed = None if allowed is None else np.array(allowed, dtype=bool)  # [L, L_k], True = may attend

    def input(self, id: str, head: int | None) -> Array | None:
        """Step ``(id, head)`` as the next step reads it (rounded where the variant says so), or ``None``."""
        value = self.values.get((id, head))
        knob = _ROUNDED.get(id)
        if value is None or knob is None or getattr(self.variant, knob) is None:
            return value
        places = getattr(self.variant, knob)
        if self.variant.truncate:  # the decimals cut off: 0.4458 -> 0.44
            with np.errstate(invalid="ignore"):
                return np.where(np.isinf(value), value, np.trunc(value * 10.0**places) / 10.0**places)
        return np.round(value, places)

    def delta(self, id: str, head: int | None) -> Array:
        """The slack of step ``(id, head)`` (zeros when the walk carries none)."""
        assert self.slack is not None
        return self.slack[id, head]

    def bias(self, name: str, b: Sequence[Fraction] | None) -> Array | float:
        """A bias as floats, or 0 when there is none or the variant drops it."""
        return 0.0 if b is None or name in self.variant.drop else _vector(b)  # type: ignore[return-value]


def _mul_slack(A: Array, dA: Array, B: Array, dB: Array) -> Array:
    """How far ``A @ B`` moves when ``A`` and ``B`` move by up to ``dA`` and ``dB``: ``[n, m]·[m, p] -> [n, p]``."""
    return np.abs(A) @ dB + dA @ np.abs(B) + dA @ dB


# --- q, k, v ------------------------------------------------------------------------------


def _kv_weights(r: Replay, id: str, head: int | None) -> tuple[Sequence[Sequence[Fraction]], Sequence[Fraction] | None]:
    """``(W, b)`` of K or V (``id``) for query head ``head``: its K/V head's (``h // (H/G)``; ``h % G`` under ``kv_order="tile"``)."""
    ex = r.ex
    owner: object = ex.heads[head or 0]  # a query head holds its K/V head's weights (repeat_interleave order)
    if ex.kv_heads is not None and r.variant.kv_order == "tile":
        owner = ex.kv_heads[(head or 0) % ex.num_kv_heads]
    return getattr(owner, f"w_{id}"), getattr(owner, f"b_{id}")


def project(r: Replay, id: str, head: int | None) -> Array:
    """``Q = X·W_Q + b_Q``, ``K = X_kv·W_K + b_K``, ``V = X_kv·W_V + b_V``: ``[n, d]``.

    K and V of query head ``h`` are its K/V head's (:func:`_kv_weights`).
    Under ``split_reshape`` every head is projected at once (``[n, H·d]``,
    head ``h`` in columns ``h·d:(h+1)·d``; for K and V with grouped K/V
    heads, the ``G`` K/V heads, ``[n, G·d]``) and the result reshaped
    straight to ``[H, n, d]`` (``[G, n, d]``): head ``h`` gets rows of the
    flat buffer, not its columns.
    """
    x = r.x if id == "q" else r.kv  # [n, d_in]; step id: Q is projected from X, K and V from X_kv

    def one(h: int) -> Array:
        hd = r.ex.heads[h]
        w, b = {"q": (hd.w_q, hd.b_q)}.get(id) or _kv_weights(r, id, h)
        return x @ floats(w) + r.bias(f"b_{id}", b)  # [n, d_in]·[d_in, d] -> [n, d]

    if not r.variant.split_reshape:
        return one(head or 0)
    ex = r.ex
    if id != "q" and ex.grouped:  # one query head per K/V head stands for it: [n, G·d]
        owners = [ex.sharing(g)[0] for g in range(ex.num_kv_heads)]
        part = ex.kv_head(head or 0)
    else:
        owners, part = list(range(ex.num_heads)), head or 0
    fused = np.hstack([one(h) for h in owners])  # [n, H·d]: the heads side by side
    n, width = fused.shape
    return fused.reshape(len(owners), n, width // len(owners))[part]  # [H, n, d] without the transpose: tokens and heads mixed


def q(r: Replay, head: int | None) -> Array:
    return project(r, "q", head)


def _with_cache(r: Replay, id: str, head: int | None) -> Array | None:
    """``[cache; new rows]`` ``[L_past + L, d]`` (format v2); the cache multiplied by W again under ``cache="reprojected"``."""
    new = r.input(f"{id}_new", head)
    if new is None:
        return None
    assert r.ex.cache is not None
    entry = r.ex.cache[r.ex.kv_head(head or 0)]
    past = floats(getattr(entry, id))  # [L_past, d]  cache entries have fields k and v
    if r.variant.cache == "reprojected":
        w, b = _kv_weights(r, id, head)
        W = floats(w)  # [d_model, d]
        if W.shape[0] != past.shape[1]:
            return None  # the cache's rows are not inputs of W: the mistake cannot be made here
        past = past @ W + r.bias(f"b_{id}", b)  # [L_past, d]
    return np.vstack([past, new])  # [L_past + L, d]


def k(r: Replay, head: int | None) -> Array | None:
    return _with_cache(r, "k", head) if r.ex.has_cache else project(r, "k", head)


def v(r: Replay, head: int | None) -> Array | None:
    return _with_cache(r, "v", head) if r.ex.has_cache else project(r, "v", head)


def k_new(r: Replay, head: int | None) -> Array:
    """The new tokens' keys ``X·W_K + b_K`` ``[L, d_k]`` (a decode step, format v2)."""
    return project(r, "k", head)


def v_new(r: Replay, head: int | None) -> Array:
    """The new tokens' values ``X·W_V + b_V`` ``[L, d_v]``."""
    return project(r, "v", head)


def k_new_slack(r: Replay, head: int | None) -> Array:
    return np.zeros_like(r.values["k_new", head])


def v_new_slack(r: Replay, head: int | None) -> Array:
    return np.zeros_like(r.values["v_new", head])


def q_slack(r: Replay, head: int | None) -> Array:
    """Q, K, V come from the exercise: no slack."""
    return np.zeros_like(r.values["q", head])


def _kv_slack(r: Replay, id: str, head: int | None) -> Array:
    """Projected from the exercise: none; with a cache, the cached rows are exact and the new ones carry their slack."""
    if not r.ex.has_cache:
        return np.zeros_like(r.values[id, head])
    new = r.delta(f"{id}_new", head)
    return np.vstack([np.zeros((r.ex.L_past, new.shape[1])), new])  # [L_past + L, d]


def k_slack(r: Replay, head: int | None) -> Array:
    return _kv_slack(r, "k", head)


def v_slack(r: Replay, head: int | None) -> Array:
    return _kv_slack(r, "v", head)


# --- scores, scaled, masked ---------------------------------------------------------------


def scores(r: Replay, head: int | None) -> Array | None:
    """``Q·Kᵀ`` ``[L, L_k]`` (``K·Qᵀ`` ``[L_k, L]`` under ``kq``)."""
    Q, K = r.input("q", head), r.input("k", head)
    if Q is None or K is None:
        return None
    return K @ Q.T if r.variant.kq else Q @ K.T  # [L_k, L] or [L, d_k]·[d_k, L_k] -> [L, L_k]


def scores_slack(r: Replay, head: int | None) -> Array:
    return _mul_slack(r.values["q", head], r.delta("q", head), r.values["k", head].T, r.delta("k", head).T)


def _scale_factor(r: Replay, head: int | None) -> float:
    d_k = r.ex.heads[head or 0].d_k
    if r.variant.divisor is not None:
        return 1.0 / r.variant.divisor
    return {
        "sqrt_dk": 1 / math.sqrt(d_k), "none": 1.0, "sqrt_dmodel": 1 / math.sqrt(r.ex.d_model),
        "dk": 1 / d_k, "times_dk": float(d_k), "times_sqrt_dk": math.sqrt(d_k),
    }[r.variant.scale]


def scaled(r: Replay, head: int | None) -> Array | None:
    """``scores / √d_k`` (or the variant's constant): ``[L, L_k]``."""
    S = r.input("scores", head)
    return None if S is None else S * _scale_factor(r, head)


def scaled_slack(r: Replay, head: int | None) -> Array:
    return r.delta("scores", head) * abs(_scale_factor(r, head))


# --- biased (format v2): scaled + B, before the mask -----------------------------------------------------


def _bias_matrix(r: Replay, head: int | None) -> Array:
    assert r.ex.bias is not None
    B = floats(r.ex.bias[head or 0])  # [L, L_k]
    return -B if r.variant.bias == "negated" else B


def biased(r: Replay, head: int | None) -> Array | None:
    """``scaled + B`` ``[L, L_k]``; ``None`` under ``bias="after_softmax"`` (the bias is then added to the weights)."""
    A = r.input("scaled", head)
    if A is None or r.variant.bias == "after_softmax" or A.shape != _bias_matrix(r, head).shape:
        return None
    return A + _bias_matrix(r, head)  # [L, L_k]


def biased_slack(r: Replay, head: int | None) -> Array:
    return r.delta("scaled", head)


def _pre_mask(r: Replay, head: int | None) -> Key:
    """What the mask is added to: the biased scores when computed (format v2), else the scaled ones."""
    return ("biased", head) if r.ex.has_bias and ("biased", head) in r.values else ("scaled", head)


def _keep(r: Replay, A: Array) -> Array | None:
    """The ``[L, L_k]`` booleans the variant applies (True = may attend), or ``None`` if it cannot apply."""
    ex, v = r.ex, r.variant
    assert r.allowed is not None
    if A.shape != r.allowed.shape:
        return None
    if v.mask == "inverted":
        return ~r.allowed
    if v.mask == "top_left":  # a decode step's mask aligned top-left (format v2)
        if ex.mask_kind != "causal_lower_right" or ex.L == ex.L_k:
            return None
        top_left = np.tri(ex.L, ex.L_k, dtype=bool)  # [L, L_k]  j <= i
        return top_left if ex.key_padding is None else top_left & np.array(ex.key_padding, dtype=bool)[None, :]
    if v.mask == "padding_rows":
        if ex.key_padding is None or ex.L != ex.L_k:
            return None
        mask = np.ones(A.shape, bool) if ex.mask is None else np.array(ex.mask, dtype=bool)  # [L, L_k]
        return mask & np.array(ex.key_padding, dtype=bool)[:, None]  # padding on rows: [L, 1]
    return r.allowed


def masked(r: Replay, head: int | None) -> Array | None:
    """``scaled + M`` (``biased + M`` with a bias): ``-inf`` where the mask blocks (``[L, L_k]``); ``None`` under "after_softmax"."""
    if r.ex.has_bias and r.variant.bias == "right" and ("biased", head) not in r.values:
        return None  # the bias could not be added
    A = r.input(*_pre_mask(r, head))
    if A is None or r.variant.mask == "after_softmax":
        return None
    keep = _keep(r, A)
    if keep is None:
        return None
    if r.variant.mask == "none":
        return A
    if r.variant.mask == "added":  # the booleans added as numbers: +1 where the query may attend, +0 where not
        return A + keep.astype(np.float64)  # [L, L_k]
    return np.where(keep, A, 0.0 if r.variant.mask == "zero" else -np.inf)  # [L, L_k]


def masked_slack(r: Replay, head: int | None) -> Array:
    assert r.allowed is not None
    return np.where(r.allowed, r.delta(*_pre_mask(r, head)), 0.0)  # [L, L_k]


# --- weights, head output ---------------------------------------------------------------------


def _weights_source(r: Replay, head: int | None) -> Key:
    """What the softmax reads: the masked scores when they were computed, else the biased or scaled ones."""
    return ("masked", head) if r.ex.has_mask and ("masked", head) in r.values else _pre_mask(r, head)


def weights(r: Replay, head: int | None) -> Array | None:
    """``softmax`` of each row of the masked (or scaled) scores: ``[L, L_k]``; a fully masked row is 0."""
    v = r.variant
    src = _weights_source(r, head)
    A = r.input(*src)
    if A is None:
        return None
    if r.ex.has_mask and src[0] != "masked" and v.mask != "after_softmax":  # step id: the mask could not be applied
        return None
    if r.ex.has_bias and v.bias != "after_softmax" and ("biased", head) not in r.values:  # the bias could not be added
        return None
    if not v.softmax:
        W = np.where(np.isinf(A), 0.0, A)  # [L, L_k], the scores themselves, a blocked one counting 0
    elif not v.normalise:
        W = np.exp(A)  # [L, L_k], the numerators only
    else:
        W = softmax(A, axis=v.softmax_axis)  # [L, L_k]
    if v.mask == "after_softmax" and r.allowed is not None:
        keep = _keep(r, A)
        if keep is None:
            return None
        W = np.where(keep, W, 0.0)  # [L, L_k], not renormalised
    if v.empty_rows == "uniform":
        empty = np.all(np.isneginf(A), axis=-1)  # [L], rows whose every score is blocked
        W = np.where(empty[:, None], 1.0 / W.shape[1], W)  # [L, L_k]
    if v.bias == "after_softmax" and r.ex.has_bias:
        W = W + np.where(np.isneginf(A), 0.0, _bias_matrix(r, head))  # [L, L_k], added to the weights (blocked stay 0)
    if v.average_heads:
        W = np.mean(_right_weights(r.ex), axis=0)  # [L, L_k]: the mean over the heads, the same for each
    return W


def _right_weights(ex: Exercise) -> Array:
    """Every head's right weights, ``[H, L, L_k]`` (walked here: the step catalogue is above this module)."""
    r = Replay(ex)
    out = []
    for h in range(ex.num_heads):
        walk: list[tuple[Callable[[Replay, int | None], Array | None], str]] = []
        if ex.has_cache:  # format v2: the new rows first
            walk += [(k_new, "k_new"), (v_new, "v_new")]
        walk += [(q, "q"), (k, "k"), (v, "v"), (scores, "scores"), (scaled, "scaled")]
        if ex.has_bias:
            walk.append((biased, "biased"))
        for fn, id in walk:
            r.values[id, h] = fn(r, h)  # type: ignore[assignment]
        if ex.has_mask:
            r.values["masked", h] = masked(r, h)  # type: ignore[assignment]
        out.append(weights(r, h))
    return np.stack(out)  # type: ignore[arg-type]


def weights_slack(r: Replay, head: int | None) -> Array:
    src = _weights_source(r, head)
    A, dA, W = r.values[src], r.delta(*src), r.values["weights", head]
    live = np.where(np.isinf(A), 0.0, dA)  # [L, L_k]
    spread = np.max(live, axis=-1, keepdims=True)  # [L, 1]
    return W * np.expm1(2 * spread)  # [L, L_k]


def head_output(r: Replay, head: int | None) -> Array | None:
    """``weights·V`` (``weights·K`` under ``values="k"``): ``[L, L_k]·[L_k, d_v]`` -> ``[L, d_v]``."""
    W = r.input("weights", head)
    Vs = r.input("k" if r.variant.values == "k" else "v", head)
    if W is None or Vs is None or W.shape[1] != Vs.shape[0]:
        return None
    return W @ Vs


def head_output_slack(r: Replay, head: int | None) -> Array:
    return _mul_slack(r.values["weights", head], r.delta("weights", head), r.values["v", head], r.delta("v", head))


# --- concat, output --------------------------------------------------------------------------------


def concat(r: Replay, head: int | None = None) -> Array | None:
    """The head outputs side by side (last head first under ``heads_reversed``): ``[L, H·d_v]``."""
    outs = [r.input("head_output", h) for h in range(r.ex.num_heads)]
    if any(o is None for o in outs):
        return None
    order = outs[::-1] if r.variant.heads_reversed else outs
    if r.variant.merge_reshape:  # [H, L, d_v] reshaped straight to [L, H·d_v]: the heads' rows mixed
        stacked = np.stack(order)  # type: ignore[arg-type]
        H, L, d_v = stacked.shape
        return stacked.reshape(L, H * d_v)
    return np.hstack(order)  # type: ignore[arg-type]


def concat_slack(r: Replay, head: int | None = None) -> Array:
    return np.hstack([r.delta("head_output", h) for h in range(r.ex.num_heads)])


def _heads(r: Replay) -> Array | None:
    return r.input("concat", None) if r.ex.num_heads > 1 else r.input("head_output", 0)


def _w_o(r: Replay) -> Array | None:
    assert r.ex.w_o is not None
    W_O = floats(r.ex.w_o)  # [H·d_v, d_out]
    if r.variant.w_o_transposed:
        return W_O.T if W_O.shape[0] == W_O.shape[1] else None  # [d_out, H·d_v]: chains only when square
    return W_O


def output(r: Replay, head: int | None = None) -> Array | None:
    """``concat·W_O + b_O``: ``[L, H·d_v]·[H·d_v, d_out]`` -> ``[L, d_out]``."""
    C, W_O = _heads(r), _w_o(r)
    if C is None or W_O is None or C.shape[1] != W_O.shape[0]:
        return None
    return C @ W_O + r.bias("b_o", r.ex.b_o)


def output_slack(r: Replay, head: int | None = None) -> Array:
    src = ("concat", None) if r.ex.num_heads > 1 else ("head_output", 0)
    return r.delta(*src) @ np.abs(floats(r.ex.w_o))  # type: ignore[arg-type]



# --- the backward steps (issue 13): found here by name, like the forward ones ---------------------------
from .replay_backward import *  # noqa: E402, F403, I001

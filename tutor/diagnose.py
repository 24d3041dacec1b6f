"""Which misconception produced a wrong matrix: the catalogue, and the matcher.

A misconception is data (a key, the steps it can show up in, a message key)
plus ONE function ``(sol, step_id, head) -> matrix | None`` that recomputes
the step in floats the way a learner holding that misconception would.  Most
of them run the whole float pipeline with one knob turned (:class:`Variant`),
so a mistake made early is recognised at every later step too: the weights a
learner gets from unscaled scores are "no scaling" as much as the unscaled
scores are.  :func:`diagnose` recomputes the step under every misconception
and keeps those whose result matches the learner's answer and differs from
the right one.  When none does and exactly one entry is off, the answer is a
slip in that entry, and the message works it out: ``scores[t1, t2] should be
q_t1 · k_t2 = 1·2 + 1·2 = 4; you wrote 5.``

Adding a misconception: write its function (usually ``_varied(Variant(...))``),
a message under ``diagnose.<key>`` in :mod:`tutor.messages`, a
:class:`Misconception` row in :data:`MISCONCEPTIONS`, and a test with a
hand-made wrong answer.

Pure: no printing, no I/O.  Arrays are float64 NumPy; ``-inf`` marks a masked
score.  Formulas: Vaswani et al. 2017, eq. 1 (``softmax(Q Kᵀ / √d_k) V``) and
§3.2.2 (``Concat(head_0, …) W_O``), row-vector convention ``Q = X W_Q + b_Q``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from .messages import t
from .steps import Solution, Step, StepId
from .worked import entry_work, fixed

__all__ = [
    "MISCONCEPTIONS",
    "Claim",
    "Diagnosis",
    "Misconception",
    "Variant",
    "diagnose",
    "diagnose_claim",
    "matches",
    "num_text",
    "off_cells",
    "recompute",
    "right_value",
    "wrong_cells",
]

Array = NDArray[np.float64]
Recompute = Callable[[Solution, str, "int | None"], "Array | None"]

#: Relative slack for float round-off when comparing a value with a claim.
EPS = 1e-9


# --- records -------------------------------------------------------------------


@dataclass(frozen=True)
class Diagnosis:
    """One explanation of a wrong answer.

    ``key`` is the misconception id (``"no_scaling"``, ``"single_entry"``...);
    ``message`` one sentence naming the mistake and the fix (from
    :func:`tutor.messages.t`); ``cells`` the 0-based ``(row, col)`` entries it
    points at (where the misconception changes the value, or the one slipped
    entry), empty when the answer's shape differs from the right one.
    """

    key: str
    message: str
    cells: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Misconception:
    """A catalogue row: ``recompute(sol, step_id, head)`` gives the step as the
    learner holding this misconception computes it (floats, ``[rows, cols]``),
    or ``None`` where it does not apply (e.g. no bias to forget).
    ``message`` is the key of its sentence in :mod:`tutor.messages`."""

    key: str
    applies_to: tuple[StepId, ...]
    message: str
    recompute: Recompute


@dataclass(frozen=True)
class Claim:
    """What an answer claims, entry by entry: the true value lies in ``[lo, hi]``.

    Shapes: ``lo``, ``hi`` ``[rows, cols]`` float64 (``-inf`` for a masked
    score, then ``lo == hi == -inf``); ``texts`` how each entry was written
    (for "you wrote ..."), or ``None`` to print the midpoint.  ``NaN``
    bounds mark an entry that is not given (it matches anything).
    """

    lo: Array
    hi: Array
    texts: tuple[tuple[str, ...], ...] | None = None

    @classmethod
    def around(cls, answer: Sequence[Sequence[float]], tolerance: float) -> Claim:
        """``answer ± tolerance`` elementwise (an infinite entry claims itself).

        Raises ``ValueError`` for a ragged or empty ``answer``, or a NaN entry.
        """
        a = _array(answer)  # [r, c]
        if np.isnan(a).any():
            raise ValueError("an answer entry is NaN")
        inf = np.isinf(a)
        lo = np.where(inf, a, a - tolerance)  # [r, c]
        hi = np.where(inf, a, a + tolerance)  # [r, c]
        return cls(lo, hi)

    @property
    def shape(self) -> tuple[int, int]:
        return self.lo.shape  # type: ignore[return-value]

    def text(self, i: int, j: int) -> str:
        if self.texts is not None:
            return self.texts[i][j]
        lo, hi = self.lo[i, j], self.hi[i, j]
        return num_text(lo if lo == hi else (lo + hi) / 2)


def _array(m: Sequence[Sequence[float]] | Array) -> Array:
    a = np.array(m, dtype=np.float64)  # [r, c]
    if a.ndim != 2 or a.size == 0:
        raise ValueError("expected a non-empty rectangular matrix")
    return a


def matches(value: Array, claim: Claim) -> bool:
    """Whether ``value`` (``[r, c]``) lies in ``claim`` entry by entry.

    Same shape required; ``-inf`` matches only ``-inf``; a finite value may
    miss an interval by a relative :data:`EPS` (float round-off); an entry
    the claim leaves out (``NaN`` bounds) matches anything.
    """
    if value.shape != claim.shape:
        return False
    with np.errstate(invalid="ignore"):
        given = ~(np.isnan(claim.lo) | np.isnan(claim.hi))  # [r, c], False = entry not given
        inf = given & (np.isinf(value) | np.isinf(claim.lo) | np.isinf(claim.hi))  # [r, c]
        if not np.array_equal(value[inf], claim.lo[inf]) or not np.array_equal(value[inf], claim.hi[inf]):
            return False
        live = given & ~inf  # [r, c]
        v, lo, hi = value[live], claim.lo[live], claim.hi[live]  # [n]
        slack = EPS * np.maximum(1.0, np.abs(v))  # [n]
        return bool(np.all((lo - slack <= v) & (v <= hi + slack)))


def _same(a: Array, b: Array) -> bool:
    """Equal shapes and values to float round-off (``-inf`` equal to ``-inf``)."""
    if a.shape != b.shape:
        return False
    inf = np.isinf(a) | np.isinf(b)
    if not np.array_equal(a[inf], b[inf]):
        return False
    return bool(np.allclose(a[~inf], b[~inf], rtol=EPS, atol=1e-12))


def num_text(v: float, places: int = 4) -> str:
    """``5``, ``0.4458``, ``-inf``: a float as a learner would write it (at most ``places`` decimals)."""
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    text = fixed(v, places)
    if places > 0:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


# --- the float pipeline ----------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """The knobs a misconception turns; the defaults compute the right answer.

    ``scale``: what the scores are divided by ("sqrt_dk", "none", "sqrt_dmodel",
    "dk") or multiplied by ("times_dk", "times_sqrt_dk").  ``mask``: "right",
    "none" (forgotten), "inverted", "zero" (blocked scores set to 0),
    "after_softmax" (weights zeroed after the softmax, not renormalised),
    "padding_rows" (key padding applied to query rows).  ``softmax``: False =
    no softmax at all, the (masked) scaled scores are the weights, a blocked
    score counting 0 (``-inf`` times a value has no value; a learner who
    skips the softmax drops the blocked keys).  ``softmax_axis``: -1 rows
    (right) or 0 columns.  ``normalise``: False = exp without dividing by the
    row sum.  ``empty_rows``: the weights of a row whose every score is
    blocked, "zero" (right) or "uniform" (1/L_k each: what a softmax gives
    when the blocked scores are filled with a large negative number instead
    of -inf).  ``round_scaled``/``round_weights``: decimals kept before the
    next step (None = full precision).  ``values``: "v" or "k" (weights·K).
    ``w_o_transposed``: the output projection uses W_Oᵀ (nn.Linear's
    ``x @ weight.T`` with the weight read as [d_out, d_in]; square W_O only).
    ``drop``: biases left out (``b_q``, ``b_k``, ``b_v``, ``b_o``).
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


def _f(m: Sequence[Sequence[Fraction]]) -> Array:
    return np.array([[float(x) for x in row] for row in m], dtype=np.float64)


def _fv(v: Sequence[Fraction] | None) -> Array | None:
    return None if v is None else np.array([float(x) for x in v], dtype=np.float64)


def softmax(s: Array, axis: int = -1, *, normalise: bool = True) -> Array:
    """Softmax of ``s`` (``[r, c]``, ``-inf`` = masked) along ``axis``, max-shifted.

    A line that is all ``-inf`` gives zeros (the contract: a fully masked
    row has zero weights).  ``normalise=False`` gives ``exp(s)`` (no shift, no
    division): the un-normalised numerators.
    """
    if not normalise:
        return np.exp(s)  # [r, c]
    top = np.max(s, axis=axis, keepdims=True)  # [r, 1] or [1, c]
    top = np.where(np.isinf(top), 0.0, top)  # all -inf line: shift by 0
    e = np.exp(s - top)  # [r, c]
    z = e.sum(axis=axis, keepdims=True)  # [r, 1] or [1, c]
    return e / np.where(z == 0, 1.0, z)  # [r, c]


def _round(a: Array, places: int | None) -> Array:
    return a if places is None else np.round(a, places)


def trace(sol: Solution, v: Variant = Variant()) -> dict[tuple[str, int | None], Array]:
    """Every step of ``sol``'s exercise in float64, as computed under ``v``.

    Keys are ``(step_id, head)`` as in :class:`tutor.steps.Solution`; a step
    the variant makes impossible (shapes that no longer chain) is absent,
    and so is everything after it.  Shapes as in :func:`tutor.exact.solve`.
    """
    ex = sol.exercise
    X, KV = _f(ex.x), _f(ex.kv)  # [L, d_model], [L_k, d_kv]
    L, L_k = ex.L, ex.L_k
    allowed = ex.allowed()
    out: dict[tuple[str, int | None], Array] = {}
    heads: list[Array | None] = []

    def bias(name: str, b: Sequence[Fraction] | None) -> Array | float:
        return 0.0 if b is None or name in v.drop else np.array([float(x) for x in b])  # [d]

    for h, hd in enumerate(ex.heads):
        d_k = hd.d_k
        Q = X @ _f(hd.w_q) + bias("b_q", hd.b_q)  # [L, d_model]·[d_model, d_k] -> [L, d_k]
        K = KV @ _f(hd.w_k) + bias("b_k", hd.b_k)  # [L_k, d_kv]·[d_kv, d_k] -> [L_k, d_k]
        V = KV @ _f(hd.w_v) + bias("b_v", hd.b_v)  # [L_k, d_kv]·[d_kv, d_v] -> [L_k, d_v]
        out["q", h], out["k", h], out["v", h] = Q, K, V
        S = K @ Q.T if v.kq else Q @ K.T  # [L_k, L] or [L, L_k]
        out["scores", h] = S
        factor = {
            "sqrt_dk": 1 / math.sqrt(d_k), "none": 1.0, "sqrt_dmodel": 1 / math.sqrt(ex.d_model),
            "dk": 1 / d_k, "times_dk": float(d_k), "times_sqrt_dk": math.sqrt(d_k),
        }[v.scale]
        A = S * factor  # [L, L_k]
        out["scaled", h] = A
        A = _round(A, v.round_scaled)  # [L, L_k]
        if allowed is not None:
            if A.shape != (L, L_k):
                heads.append(None)
                continue
            ok = np.array(allowed, dtype=bool)  # [L, L_k], True = may attend
            if v.mask == "inverted":
                ok = ~ok
            elif v.mask == "padding_rows":
                if ex.key_padding is None or L != L_k:
                    heads.append(None)
                    continue
                mask = np.ones((L, L_k), bool) if ex.mask is None else np.array(ex.mask, dtype=bool)  # [L, L_k]
                ok = mask & np.array(ex.key_padding, dtype=bool)[:, None]  # padding on rows: [L, 1]
            if v.mask == "zero":
                A = np.where(ok, A, 0.0)  # [L, L_k]
            elif v.mask not in ("after_softmax", "none"):
                A = np.where(ok, A, -np.inf)  # [L, L_k]
            if v.mask != "after_softmax":
                out["masked", h] = A
        if v.softmax:
            W = softmax(A, v.softmax_axis, normalise=v.normalise)  # [L, L_k]
        else:
            W = np.where(np.isinf(A), 0.0, A)  # [L, L_k], the scores themselves, a blocked one counting 0
        if allowed is not None and v.mask == "after_softmax":
            W = np.where(ok, W, 0.0)  # [L, L_k], not renormalised
        if v.empty_rows == "uniform":
            empty = np.all(np.isneginf(A), axis=-1)  # [L], rows whose every score is blocked
            W = np.where(empty[:, None], 1.0 / W.shape[1], W)  # [L, L_k]
        out["weights", h] = W
        W = _round(W, v.round_weights)  # [L, L_k]
        Vs = K if v.values == "k" else V  # [L_k, d_k] or [L_k, d_v]
        if W.shape[1] != Vs.shape[0]:
            heads.append(None)
            continue
        out["head_output", h] = W @ Vs  # [L, L_k]·[L_k, d_v] -> [L, d_v]
        heads.append(out["head_output", h])

    if any(o is None for o in heads):
        return out
    order = heads[::-1] if v.heads_reversed else heads
    C = np.hstack(order)  # type: ignore[arg-type]  # [L, H·d_v]
    if ex.num_heads > 1:
        out["concat", None] = C
    W_O = None if ex.w_o is None else _f(ex.w_o)  # [H·d_v, d_out]
    if W_O is not None and v.w_o_transposed:
        W_O = W_O.T if W_O.shape[0] == W_O.shape[1] else None  # [d_out, H·d_v]: chains only when square
    if W_O is not None and C.shape[1] == W_O.shape[0]:
        b_o = bias("b_o", ex.b_o)
        out["output", None] = C @ W_O + b_o  # [L, H·d_v]·[H·d_v, d_out] -> [L, d_out]
    return out


def right_value(sol: Solution, step_id: str, head: int | None) -> Array:
    """The step's right value as float64 ``[rows, cols]`` (from the exact engine).

    Raises ``KeyError`` when the exercise has no such step.
    """
    return np.array(sol.step(step_id, head).value, dtype=np.float64)  # type: ignore[arg-type]


def recompute(sol: Solution, step_id: str, head: int | None, v: Variant) -> Array | None:
    """The step under variant ``v`` (``None`` when the variant cannot reach it)."""
    return trace(sol, v).get((step_id, head))


def _varied(v: Variant, *needs: str) -> Recompute:
    """A misconception function: the pipeline with ``v``'s knobs turned.

    ``needs`` names what must exist for it to apply: ``"mask"``, ``"padding"``,
    ``"heads"`` (more than one), ``"empty_row"`` (a query row that may attend
    to no key), ``"square_w_o"`` (a W_O with as many rows as columns), or a
    bias field (``"b_q"``...).
    """

    def run(sol: Solution, step_id: str, head: int | None) -> Array | None:
        ex = sol.exercise
        for need in needs:
            if need == "mask" and not ex.has_mask:
                return None
            if need == "padding" and ex.key_padding is None:
                return None
            if need == "heads" and ex.num_heads < 2:
                return None
            if need == "empty_row" and not _empty_rows(sol):
                return None
            if need == "square_w_o" and (ex.w_o is None or len(ex.w_o) != len(ex.w_o[0])):
                return None
            if need == "b_o" and ex.b_o is None:
                return None
            if need in ("b_q", "b_k", "b_v") and all(getattr(hd, need) is None for hd in ex.heads):
                return None
        return recompute(sol, step_id, head, v)

    return run


def _transposed(sol: Solution, step_id: str, head: int | None) -> Array | None:
    return right_value(sol, step_id, head).T  # [cols, rows]


def _mask_in_scaled(sol: Solution, step_id: str, head: int | None) -> Array | None:
    """``scaled`` with the mask already applied: the right ``masked`` step, written one step early."""
    if step_id != "scaled" or not sol.exercise.has_mask:
        return None
    return right_value(sol, "masked", head)  # [L, L_k], -inf where blocked


def _empty_rows(sol: Solution) -> list[int]:
    """The 0-based query rows that may attend to no key at all."""
    allowed = sol.exercise.allowed()
    return [] if allowed is None else [i for i, row in enumerate(allowed) if not any(row)]


# --- the catalogue ------------------------------------------------------------------

_QS: tuple[StepId, ...] = ("q", "scores")
_KS: tuple[StepId, ...] = ("k", "scores")
_VS: tuple[StepId, ...] = ("v",)
_SCORES: tuple[StepId, ...] = ("scores",)
_AFTER_SCALED: tuple[StepId, ...] = ("scaled", "masked", "weights", "head_output", "concat", "output")
_AFTER_MASKED: tuple[StepId, ...] = ("masked", "weights", "head_output", "concat", "output")
_AFTER_WEIGHTS: tuple[StepId, ...] = ("weights", "head_output", "concat", "output")
_AFTER_OUTPUT: tuple[StepId, ...] = ("head_output", "concat", "output")
_ALL: tuple[StepId, ...] = ("q", "k", "v", "scores", "scaled", "masked", "weights", "head_output", "concat", "output")


def _m(key: str, applies_to: tuple[StepId, ...], fn: Recompute) -> Misconception:
    return Misconception(key, applies_to, f"diagnose.{key}", fn)


#: The catalogue, most specific first: :func:`diagnose` reports matches in this order.
MISCONCEPTIONS: tuple[Misconception, ...] = (
    _m("no_b_q", _QS + _AFTER_SCALED, _varied(Variant(drop=frozenset({"b_q"})), "b_q")),
    _m("no_b_k", _KS + _AFTER_SCALED, _varied(Variant(drop=frozenset({"b_k"})), "b_k")),
    _m("no_b_v", _VS + _AFTER_OUTPUT, _varied(Variant(drop=frozenset({"b_v"})), "b_v")),
    _m("kq_transposed", _SCORES + _AFTER_SCALED, _varied(Variant(kq=True))),
    _m("no_scaling", _AFTER_SCALED, _varied(Variant(scale="none"))),
    _m("scale_sqrt_d_model", _AFTER_SCALED, _varied(Variant(scale="sqrt_dmodel"))),
    _m("scale_d_k", _AFTER_SCALED, _varied(Variant(scale="dk"))),
    _m("scale_times_d_k", _AFTER_SCALED, _varied(Variant(scale="times_dk"))),
    _m("scale_times_sqrt_d_k", _AFTER_SCALED, _varied(Variant(scale="times_sqrt_dk"))),
    _m("mask_inverted", _AFTER_MASKED, _varied(Variant(mask="inverted"), "mask")),
    _m("mask_zero", _AFTER_MASKED, _varied(Variant(mask="zero"), "mask")),
    _m("mask_in_scaled", ("scaled",), _mask_in_scaled),
    _m("padding_rows", _AFTER_MASKED, _varied(Variant(mask="padding_rows"), "padding")),
    _m("no_mask", _AFTER_MASKED, _varied(Variant(mask="none"), "mask")),
    _m("mask_after_softmax", _AFTER_WEIGHTS, _varied(Variant(mask="after_softmax"), "mask")),
    _m("empty_row_uniform", _AFTER_WEIGHTS, _varied(Variant(empty_rows="uniform"), "empty_row")),
    _m("softmax_columns", _AFTER_WEIGHTS, _varied(Variant(softmax_axis=0))),
    _m("not_normalised", _AFTER_WEIGHTS, _varied(Variant(normalise=False))),
    _m("no_softmax", _AFTER_WEIGHTS, _varied(Variant(softmax=False))),
    _m("rounded_scaled", _AFTER_WEIGHTS, _varied(Variant(round_scaled=2))),
    _m("rounded_weights", _AFTER_OUTPUT, _varied(Variant(round_weights=2))),
    _m("times_k", _AFTER_OUTPUT, _varied(Variant(values="k"))),
    _m("heads_order", ("concat", "output"), _varied(Variant(heads_reversed=True), "heads")),
    _m("w_o_transposed", ("output",), _varied(Variant(w_o_transposed=True), "square_w_o")),
    _m("no_b_o", ("output",), _varied(Variant(drop=frozenset({"b_o"})), "b_o")),
    _m("transposed", _ALL, _transposed),
)


# --- messages ---------------------------------------------------------------------------

_NAMES = {"q": "Q", "k": "K", "v": "V", "head_output": "head_{head}"}


def _name(step: Step) -> str:
    return _NAMES.get(step.id, step.id).format(head=step.head)


def _fields(sol: Solution, step_id: str, head: int | None) -> dict[str, object]:
    ex = sol.exercise
    h = ex.heads[head or 0]
    step = sol.step(step_id, head)  # type: ignore[arg-type]
    rows, cols = step.shape
    empty = ", ".join(ex.query_labels[i] for i in _empty_rows(sol))
    return {"d_k": h.d_k, "d_model": ex.d_model, "step": _name(step), "head": head,
            "rows": rows, "cols": cols, "places": 2, "L_k": ex.L_k, "empty_rows": empty,
            "src": "concat" if ex.num_heads > 1 else "head_0", "b_o": " + b_O" if ex.b_o is not None else ""}


# --- a single slipped entry ---------------------------------------------------------------


def _single_entry(sol: Solution, step_id: str, head: int | None, claim: Claim, right: Array) -> Diagnosis | None:
    """The diagnosis for an answer with exactly one entry off, else ``None``."""
    cells = off_cells(right, claim)
    if cells is None or len(cells) != 1:
        return None
    (i, j), = cells
    step = sol.step(step_id, head)  # type: ignore[arg-type]
    message = t("diagnose.single_entry", name=_name(step), row=step.row_labels[i], col=step.col_labels[j],
                formula=entry_work(sol, step, i, j), found=claim.text(i, j))
    return Diagnosis("single_entry", message, ((i, j),))


def off_cells(right: Array, claim: Claim) -> list[tuple[int, int]] | None:
    """The 0-based cells where ``right`` (``[r, c]``) lies outside ``claim``,
    row by row; ``None`` when the shapes differ."""
    if right.shape != claim.shape:
        return None
    r, c = right.shape
    return [(i, j) for i in range(r) for j in range(c)
            if not matches(right[i:i + 1, j:j + 1], Claim(claim.lo[i:i + 1, j:j + 1], claim.hi[i:i + 1, j:j + 1]))]


# --- the API ---------------------------------------------------------------------------------


def diagnose_claim(sol: Solution, step_id: str, head: int | None, claim: Claim) -> list[Diagnosis]:
    """:func:`diagnose` for a :class:`Claim` (per-entry intervals, e.g. a
    solution file's entries, each rounded at the places written).

    Returns ``[]`` when the right value satisfies the claim (nothing to
    explain).  Raises ``KeyError`` when the exercise has no such step.
    """
    right = right_value(sol, step_id, head)  # [rows, cols]
    if matches(right, claim):
        return []
    found: list[Diagnosis] = []
    fields = _fields(sol, step_id, head)
    for m in MISCONCEPTIONS:
        if step_id not in m.applies_to:
            continue
        got = m.recompute(sol, step_id, head)
        if got is None or _same(got, right) or not matches(got, claim):
            continue
        cells: tuple[tuple[int, int], ...] = ()
        if got.shape == right.shape:
            differ = ~np.isclose(got, right, rtol=EPS, atol=1e-12) & ~(np.isinf(got) & (got == right))  # [r, c]
            cells = tuple((int(i), int(j)) for i, j in zip(*np.nonzero(differ)))
        found.append(Diagnosis(m.key, t(m.message, **fields), cells))
    if not found and (slip := _single_entry(sol, step_id, head, claim, right)) is not None:
        found.append(slip)
    return found


def diagnose(sol: Solution, step_id: str, head: int | None, answer: Sequence[Sequence[float]], *,
             tolerance: float) -> list[Diagnosis]:
    """The misconceptions that explain a wrong answer, most specific first.

    ``answer``: the learner's matrix as floats (``-inf`` allowed for masked
    scores), any shape.  A misconception counts when its recomputed step
    matches ``answer`` within ``tolerance`` elementwise (``-inf`` matches
    ``-inf``) and differs from the right value.  When none does and exactly
    one entry is off, the result is one ``single_entry`` diagnosis that
    works the entry out.  ``[]`` when the answer is right, or nothing
    explains it.

    Raises ``KeyError`` when the exercise has no step ``(step_id, head)``,
    ``ValueError`` for a ragged or empty answer.

    >>> from tutor.catalog import resolve; from tutor.exact import solve
    >>> sol = solve(resolve("single-head-3x4"))
    >>> [d.key for d in diagnose(sol, "scaled", 0, [[2, 4, 4], [4, 8, 8], [4, 8, 8]], tolerance=0.005)]
    ['no_scaling']
    """
    return diagnose_claim(sol, step_id, head, Claim.around(answer, tolerance))


def wrong_cells(sol: Solution, step_id: str, head: int | None, answer: Sequence[Sequence[float]], *,
                tolerance: float) -> list[tuple[int, int]]:
    """The 0-based ``(row, col)`` entries of ``answer`` more than ``tolerance``
    from the right value (``-inf`` right only where the right value is ``-inf``).

    An answer of another shape than the step has every one of its cells
    wrong.  Raises ``KeyError`` for an unknown step, ``ValueError`` for a
    ragged or empty answer.
    """
    claim = Claim.around(answer, tolerance)
    off = off_cells(right_value(sol, step_id, head), claim)
    if off is None:
        r, c = claim.shape
        return [(i, j) for i in range(r) for j in range(c)]
    return off


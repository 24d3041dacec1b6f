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

Adding a misconception: usually a new knob on
:class:`tutor.numeric.replay.Variant` read by the step functions it changes
(and named in those kinds' ``varies``), a message under ``diagnose.<key>`` in
:mod:`tutor.messages`, a row ``_m(key, Variant(...))`` in
:data:`MISCONCEPTIONS`, and a test with a hand-made wrong answer.

Pure: no printing, no I/O.  Arrays are float64 NumPy; ``-inf`` marks a masked
score.  Formulas: Vaswani et al. 2017, eq. 1 (``softmax(Q Kᵀ / √d_k) V``) and
§3.2.2 (``Concat(head_1, …, head_h) W_O``), row-vector convention ``Q = X W_Q + b_Q``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .decimals import trimmed
from .exercise.record import Exercise
from .messages import t
from .numeric.replay import Variant
from .steps import KINDS, STEP_IDS, Key, Solution, downstream, entry_work, keys, replay

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
    ``message`` is the key of its sentence in :mod:`tutor.messages`.

    Where it can show up: ``variant``'s knobs turn the steps whose kind
    :attr:`~tutor.steps.StepKind.varies` by one of them, and every step
    computed from those (:meth:`applies`); a misconception that is not a
    variant of the pipeline names its steps in ``steps``."""

    key: str
    message: str
    recompute: Recompute
    variant: Variant | None = None
    steps: tuple[str, ...] = ()

    def applies(self, ex: Exercise, key: Key) -> bool:
        """Whether this mistake can change step ``key`` of ``ex``."""
        if self.variant is None:
            return key[0] in self.steps
        turned = self.variant.turned()
        first = [k for k in keys(ex) if KINDS[k[0]].varies & turned]
        return key in downstream(ex, first)


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
        return self.lo.shape

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


#: ``5``, ``0.4458``, ``-inf``: a float as a learner would write it (:func:`tutor.decimals.trimmed`).
num_text = trimmed


# --- the float pipeline (one: :func:`tutor.steps.replay` over :mod:`tutor.numeric.replay`) ---------


def right_value(sol: Solution, step_id: str, head: int | None) -> Array:
    """The step's right value as float64 ``[rows, cols]`` (from the exact engine).

    Raises ``KeyError`` when the exercise has no such step.
    """
    return np.array(sol.step(step_id, head).value, dtype=np.float64)


def recompute(sol: Solution, step_id: str, head: int | None, v: Variant) -> Array | None:
    """The step under variant ``v`` (``None`` when the variant cannot reach it)."""
    return replay(sol.exercise, v).values.get((step_id, head))


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
            if need in _V2_NEEDS and not _V2_NEEDS[need](ex):
                return None
        return recompute(sol, step_id, head, v)

    return run


#: What a misconception of format v2 needs (issue 12): grouped K/V heads, a cache, a decode step's mask, a bias.
_V2_NEEDS: dict[str, Callable[[Exercise], bool]] = {
    "grouped": lambda ex: ex.grouped,
    "cache": lambda ex: ex.has_cache,
    "lower_right": lambda ex: ex.mask_kind == "causal_lower_right" and ex.L != ex.L_k,
    "bias": lambda ex: ex.has_bias,
    "alibi": lambda ex: ex.alibi,
}


def _transposed(sol: Solution, step_id: str, head: int | None) -> Array | None:
    return right_value(sol, step_id, head).T  # [cols, rows]


def _mask_in_scaled(sol: Solution, step_id: str, head: int | None) -> Array | None:
    """``scaled`` with the mask already applied: the right ``masked`` step, written one step early."""
    if not sol.exercise.has_mask:
        return None
    return right_value(sol, "masked", head)  # [L, L_k], -inf where blocked


def _empty_rows(sol: Solution) -> list[int]:
    """The 0-based query rows that may attend to no key at all."""
    allowed = sol.exercise.allowed()
    return [] if allowed is None else [i for i, row in enumerate(allowed) if not any(row)]


# --- the catalogue ------------------------------------------------------------------

_ALL = STEP_IDS


def _m(key: str, variant: Variant, *needs: str) -> Misconception:
    """A misconception that is the float pipeline with ``variant``'s knobs turned (see :func:`_varied`)."""
    return Misconception(key, f"diagnose.{key}", _varied(variant, *needs), variant)


def _special(key: str, steps: tuple[str, ...], fn: Recompute) -> Misconception:
    """A misconception that is not a variant of the pipeline, shown at ``steps``."""
    return Misconception(key, f"diagnose.{key}", fn, None, steps)


#: The catalogue, most specific first: :func:`diagnose` reports matches in this order.
MISCONCEPTIONS: tuple[Misconception, ...] = (
    _m("no_b_q", Variant(drop=frozenset({"b_q"})), "b_q"),
    _m("no_b_k", Variant(drop=frozenset({"b_k"})), "b_k"),
    _m("no_b_v", Variant(drop=frozenset({"b_v"})), "b_v"),
    _m("kq_transposed", Variant(kq=True)),
    _m("no_scaling", Variant(scale="none")),
    _m("scale_sqrt_d_model", Variant(scale="sqrt_dmodel")),
    _m("scale_d_k", Variant(scale="dk")),
    _m("scale_times_d_k", Variant(scale="times_dk")),
    _m("scale_times_sqrt_d_k", Variant(scale="times_sqrt_dk")),
    _m("mask_inverted", Variant(mask="inverted"), "mask"),
    _m("mask_zero", Variant(mask="zero"), "mask"),
    _special("mask_in_scaled", ("scaled",), _mask_in_scaled),
    _m("padding_rows", Variant(mask="padding_rows"), "padding"),
    _m("no_mask", Variant(mask="none"), "mask"),
    _m("mask_after_softmax", Variant(mask="after_softmax"), "mask"),
    _m("empty_row_uniform", Variant(empty_rows="uniform"), "empty_row"),
    _m("softmax_columns", Variant(softmax_axis=0)),
    _m("not_normalised", Variant(normalise=False)),
    _m("no_softmax", Variant(softmax=False)),
    _m("rounded_scaled", Variant(round_scaled=2)),
    _m("rounded_weights", Variant(round_weights=2)),
    _m("times_k", Variant(values="k")),
    _m("heads_order", Variant(heads_reversed=True), "heads"),
    _m("w_o_transposed", Variant(w_o_transposed=True), "square_w_o"),
    _m("no_b_o", Variant(drop=frozenset({"b_o"})), "b_o"),
    # format v2 (issue 12)
    _m("kv_tile_order", Variant(kv_order="tile"), "grouped"),
    _m("decode_top_left", Variant(mask="top_left"), "lower_right"),
    _m("cache_reprojected", Variant(cache="reprojected"), "cache"),
    _m("bias_after_softmax", Variant(bias="after_softmax"), "bias"),
    _m("alibi_sign", Variant(bias="negated"), "alibi"),
    _special("transposed", _ALL, _transposed),
)


# --- messages ---------------------------------------------------------------------------

def _fields(sol: Solution, step_id: str, head: int | None) -> dict[str, object]:
    ex = sol.exercise
    h = ex.heads[head or 0]
    step = sol.step(step_id, head)
    rows, cols = step.shape
    empty = ", ".join(ex.query_labels[i] for i in _empty_rows(sol))
    return {"d_k": h.d_k, "d_model": ex.d_model, "step": step.name, "head": head,
            "rows": rows, "cols": cols, "places": 2, "L_k": ex.L_k, "empty_rows": empty,
            "src": "concat" if ex.num_heads > 1 else "head_1", "b_o": " + b_O" if ex.b_o is not None else "",
            "ratio": ex.num_heads // ex.num_kv_heads, "offset": ex.L_k - ex.L}


# --- a single slipped entry ---------------------------------------------------------------


def _single_entry(sol: Solution, step_id: str, head: int | None, claim: Claim, right: Array) -> Diagnosis | None:
    """The diagnosis for an answer with exactly one entry off, else ``None``."""
    cells = off_cells(right, claim)
    if cells is None or len(cells) != 1:
        return None
    (i, j), = cells
    step = sol.step(step_id, head)
    message = t("diagnose.single_entry", name=step.name, row=step.row_labels[i], col=step.col_labels[j],
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
        if not m.applies(sol.exercise, (step_id, head)):
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

    >>> from tutor.catalog import resolve; from tutor.steps import solve
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


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

Two more kinds of row (issue 10): a *family* (one mistake with several
values, each named: the scores divided by ``√L``, by ``num_heads`` ...) and
a *judge*, for a mistake with no one value, recognised from the answer's
signature (dropout left on: entries zeroed at random, the rest scaled by one
``1/(1 - p)``; a large finite fill; decimals cut off at the places written).
Published numbers often carry one more slip on top of a mistake: when no
mistake matches every entry, one that matches all but one (or a tenth) of
them, and explains more wrong entries than it leaves, is reported with the
odd entries named (all of those that leave equally few).

Adding a misconception: usually a new knob on
:class:`tutor.steps.Variant` read by the step functions it changes
(and named in those kinds' ``varies``), a message under ``diagnose.<key>`` in
:mod:`tutor.base.messages`, a row ``_m(key, Variant(...))`` in
:data:`MISCONCEPTIONS`, and a test with a hand-made wrong answer.

Pure: no printing, no I/O.  Arrays are float64 NumPy; ``-inf`` marks a masked
score.  Formulas: Vaswani et al. 2017, eq. 1 (``softmax(Q Kᵀ / √d_k) V``) and
§3.2.2 (``Concat(head_1, …, head_h) W_O``), row-vector convention ``Q = X W_Q + b_Q``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from ..base.decimals import trimmed
from ..base.messages import Msg, Text
from ..exact.numbers import frac_text
from ..exercise.record import Exercise, alibi_slope
from ..steps import KINDS, STEP_IDS, Key, Solution, Variant, downstream, entry_work, keys, replay, varies
from . import GROUP_SEP

__all__ = [
    "GROUP_SEP",
    "MISCONCEPTIONS",
    "Claim",
    "Diagnosis",
    "Misconception",
    "Variant",
    "diagnose",
    "diagnose_claim",
    "event",
    "explained_cells",
    "group_key",
    "matches",
    "members",
    "needs_met",
    "num_text",
    "off_cells",
    "recompute",
    "right_value",
    "same_numbers",
    "tied",
    "wrong_cells",
]

Array = NDArray[np.float64]
Recompute = Callable[[Solution, str, "int | None"], "Array | None"]

#: Relative tolerance for "the same matrix" between two float recomputations (:func:`_same`).
EPS = 1e-9
#: How far a misconception's float recomputation may stray from an answer's claim: float64
#: round-off over the few dozen operations of a step, and a weight below it that a learner writes
#: as ``0`` (softmax([0, 22.6]) gives 1.5e-10): relative, absolute below 1.  The slack
#: :func:`diagnose_claim` gives a recomputed step against an answer's claim.  Never given to the
#: right value: whether an entry is right is the grading rule's alone (``1.0000000001`` claims
#: [1.00000000005, 1.00000000015], which does not hold 1), and a mistake must differ from the right
#: value at every cell grading refused.
ROUND_OFF = EPS


# --- records -------------------------------------------------------------------


@dataclass(frozen=True)
class Diagnosis:
    """One explanation of a wrong answer.

    ``key`` is the misconception id (``"no_scaling"``, ``"single_entry"``...);
    ``message`` one sentence naming the mistake and the fix (a
    :class:`~tutor.base.messages.Msg`, put into words when shown); ``cells`` the 0-based ``(row, col)`` entries it
    points at (where the misconception changes the value, or the one slipped
    entry), empty when the answer's shape differs from the right one.
    """

    key: str
    message: Text
    cells: tuple[tuple[int, int], ...] = ()
    value: Array | None = field(default=None, compare=False, repr=False)  # the step as the mistake computes it


Judge = Callable[[Solution, str, "int | None", "Claim", Array], "tuple[dict[str, object], tuple[tuple[int, int], ...]] | None"]
Family = Callable[[Solution, str, "int | None"], "list[tuple[dict[str, object], Array]]"]


@dataclass(frozen=True)
class Misconception:
    """A catalogue row: ``recompute(sol, step_id, head)`` gives the step as the
    learner holding this misconception computes it (floats, ``[rows, cols]``),
    or ``None`` where it does not apply (e.g. no bias to forget).
    ``message`` is the key of its sentence in :mod:`tutor.base.messages`.

    Where it can show up: ``variant``'s knobs turn the steps whose kind
    by one of them (:func:`tutor.steps.varies`), and every step
    computed from those (:meth:`applies`); a misconception that is not a
    variant of the pipeline names its steps in ``steps`` (with a variant,
    ``steps`` narrows where it is reported).

    Two kinds of row are not one recomputation:

    * ``family(sol, step_id, head)``: several values of one mistake, each
      with the message fields that name it (a wrong constant: ``√L``,
      ``num_heads`` ...), ``[(fields, value [rows, cols])]``;
    * ``judge(sol, step_id, head, claim, right)``: a mistake recognised
      from the answer itself, because it has no one value (dropout zeroes
      entries at random; a large finite fill may be any number):
      ``(fields, cells)`` when the answer has its signature, else ``None``.

    ``needs``: what the exercise must have for it to apply at all (:func:`needs_met`).
    ``per_entry``: the mistake is made entry by entry (a masked entry of ``d_scaled`` left
    non-zero), so an answer that shows it at some of its entries, every other entry right,
    has it too (at those entries).
    """

    key: str
    message: str
    recompute: Recompute
    variant: Variant | None = None
    steps: tuple[str, ...] = ()
    family: Family | None = None
    judge: Judge | None = None
    needs: tuple[str, ...] = ()
    per_entry: bool = False

    def applies(self, ex: Exercise, key: Key) -> bool:
        """Whether this mistake can change step ``key`` of ``ex``."""
        if self.steps and key[0] not in self.steps:
            return False
        if self.variant is None:
            return True
        turned = self.variant.turned()
        backward = KINDS[key[0]].backward  # the backward pass only for a backward step (none for format v2)
        first = [k for k in keys(ex, backward=backward) if varies(ex, k) & turned]
        return key in downstream(ex, first, backward=backward)

    def candidates(self, sol: Solution, step_id: str, head: int | None) -> list[tuple[dict[str, object], Array]]:
        """The values this mistake gives for the step, each with its message fields (``[]`` for a judge)."""
        if self.family is not None:
            return self.family(sol, step_id, head)
        if self.judge is not None:
            return []
        got = self.recompute(sol, step_id, head)
        return [] if got is None else [({}, got)]


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
    def around(cls, answer: Sequence[Sequence[float]], tolerance: float, *,
               texts: Sequence[Sequence[str]] | None = None) -> Claim:
        """``answer ± tolerance`` elementwise (an infinite entry claims itself); ``texts``: how each
        entry was written (for "you wrote ...", else the float's shortest form).

        Raises ``ValueError`` for a ragged or empty ``answer``, or a NaN entry.
        """
        a = _array(answer)  # [r, c]
        if np.isnan(a).any():
            raise ValueError("an answer entry is NaN")
        inf = np.isinf(a)
        lo = np.where(inf, a, a - tolerance)  # [r, c]
        hi = np.where(inf, a, a + tolerance)  # [r, c]
        return cls(lo, hi, None if texts is None else tuple(tuple(row) for row in texts))

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


def matches(value: Array, claim: Claim, *, slack: float = 0.0) -> bool:
    """Whether ``value`` (``[r, c]``) lies in ``claim`` entry by entry.

    Same shape required; ``-inf`` matches only ``-inf``; an entry the claim
    leaves out (``NaN`` bounds) matches anything.  A finite value must lie in
    its interval, or miss it by at most ``slack`` relative (absolute below 1):
    none by default, as the grading rule draws the interval; :data:`ROUND_OFF`
    for a float recomputation of a misconception.
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
        off_by = slack * np.maximum(1.0, np.abs(v))  # [n]
        return bool(np.all((lo - off_by <= v) & (v <= hi + off_by)))


def same_numbers(a: Array, b: Array) -> bool:
    """Whether two float recomputations of a step (``[r, c]``) are the same matrix: equal shapes and values to
    float round-off (:data:`EPS`; ``-inf`` equal to ``-inf``), so no answer can tell them apart."""
    return _same(a, b)


def _same(a: Array, b: Array) -> bool:
    """Equal shapes and values to float round-off (``-inf`` equal to ``-inf``)."""
    if a.shape != b.shape:
        return False
    inf = np.isinf(a) | np.isinf(b)
    if not np.array_equal(a[inf], b[inf]):
        return False
    return bool(np.allclose(a[~inf], b[~inf], rtol=EPS, atol=1e-12))


#: ``5``, ``0.4458``, ``-inf``: a float as a learner would write it (:func:`tutor.base.decimals.trimmed`).
num_text = trimmed


# --- the float pipeline (one: :func:`tutor.steps.replay`, each kind's float function) ---------


def right_value(sol: Solution, step_id: str, head: int | None) -> Array:
    """The step's right value as float64 ``[rows, cols]`` (from the exact engine).

    Raises ``KeyError`` when the exercise has no such step.
    """
    return np.array(sol.step(step_id, head).value, dtype=np.float64)


def recompute(sol: Solution, step_id: str, head: int | None, v: Variant) -> Array | None:
    """The step under variant ``v`` (``None`` when the variant cannot reach it)."""
    return replay(sol.exercise, v, backward=KINDS[step_id].backward).values.get((step_id, head))


def _varied(v: Variant, *needs: str) -> Recompute:
    """A misconception function: the pipeline with ``v``'s knobs turned.

    ``needs`` names what must exist for it to apply (:func:`needs_met`).
    """

    def run(sol: Solution, step_id: str, head: int | None) -> Array | None:
        if not needs_met(sol, needs):
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
    "causal": lambda ex: ex.mask_kind in ("causal", "causal_lower_right"),
    "rope": lambda ex: ex.rope is not None,  # format v3 (issue 23)
    "mla": lambda ex: ex.mla is not None,  # format v3: multi-head latent attention
    # the pre-norm block (issue 23)
    "norm": lambda ex: ex.has_norm,
    "rmsnorm": lambda ex: ex.norm == "rmsnorm",
    "residual": lambda ex: ex.residual,
    "norm_residual": lambda ex: ex.has_norm and ex.residual,
    "post_norm": lambda ex: ex.post_norm,  # issue 23: norm_placement: post
    "window": lambda ex: ex.mask_kind == "sliding_window",  # issue 23
    "sinks": lambda ex: ex.mask_kind == "sliding_window" and ex.sinks > 0,
}


def needs_met(sol: Solution, needs: Sequence[str]) -> bool:
    """Whether the exercise of ``sol`` has what a misconception ``needs`` to apply: ``"mask"``,
    ``"padding"``, ``"heads"`` (more than one), ``"empty_row"`` (a query row that may attend to no
    key), ``"square_w_o"`` (a W_O with as many rows as columns), a bias field (``"b_q"``...), or
    a part of format v2 (:data:`_V2_NEEDS`: ``"grouped"``, ``"cache"``, ``"lower_right"``, ``"bias"``,
    ``"alibi"``), or a causal mask (``"causal"``)."""
    ex = sol.exercise
    for need in needs:
        if need == "mask" and not ex.has_mask:
            return False
        if need == "padding" and ex.key_padding is None:
            return False
        if need == "heads" and ex.num_heads < 2:
            return False
        if need == "empty_row" and not _empty_rows(sol):
            return False
        if need == "square_w_o" and (ex.w_o is None or len(ex.w_o) != len(ex.w_o[0])):
            return False
        if need == "b_o" and ex.b_o is None:
            return False
        if need in ("b_q", "b_k", "b_v") and all(getattr(hd, need) is None for hd in ex.heads):
            return False
        if need in _V2_NEEDS and not _V2_NEEDS[need](ex):
            return False
    return True


def _transposed(sol: Solution, step_id: str, head: int | None) -> Array | None:
    return right_value(sol, step_id, head).T  # [cols, rows]


def _transposed_said(sol: Solution, step_id: str, head: int | None) -> list[tuple[dict[str, object], Array]]:
    """The transposed step, with the sentence for its shape: a square matrix transposed keeps its shape,
    so the learner is told to swap the entries, not to write it in another shape."""
    got = right_value(sol, step_id, head).T  # [cols, rows]
    return [({"_message": "diagnose.transposed.square"} if got.shape[0] == got.shape[1] else {}, got)]


def _mask_in_scaled(sol: Solution, step_id: str, head: int | None) -> Array | None:
    """``scaled`` with the mask already applied: the right ``masked`` step, written one step early."""
    if not sol.exercise.has_mask:
        return None
    return right_value(sol, "masked", head)  # [L, L_k], -inf where blocked


def _q_prescaled(sol: Solution, step_id: str, head: int | None) -> Array | None:
    """Q already divided by ``√d_k``: the scale folded into the projection (``q`` only)."""
    return right_value(sol, "q", head) / math.sqrt(sol.exercise.heads[head or 0].d_k)  # [L, d_k]


def _scores_prescaled(sol: Solution, step_id: str, head: int | None) -> Array | None:
    """``scores`` written already divided by ``√d_k``: the ``scaled`` step one step early."""
    return right_value(sol, "scaled", head)  # [L, L_k]


def _empty_rows(sol: Solution) -> list[int]:
    """The 0-based query rows that may attend to no key at all."""
    allowed = sol.exercise.allowed()
    return [] if allowed is None else [i for i, row in enumerate(allowed) if not any(row)]


# --- mistakes from published code (issue 10) -----------------------------------------------

#: Large finite numbers published code fills blocked scores with that have a name (``-1e9`` and
#: ``-10000`` are named by their digits).
_FILLS = ((-65504.0, "fill.float16"), (-3.4028234663852886e38, "fill.float32"))
#: A finite fill is a stand-in for -inf when it is at most this, and at least :data:`_UNDERFLOW` below
#: every row's largest kept score: then exp(fill - that maximum) is 0 in float64 (exp(-746) underflows),
#: so the weights of every row with a key to attend are exactly the right ones.
_LARGE_NEGATIVE = -1000.0
_UNDERFLOW = 746.0
#: The simplest dropout rates first, when several fit the scaling.
_RATES = (0.5, 0.1, 0.2, 0.25, 0.3, 0.4, 0.05, 0.15, 0.35, 0.45, *(k / 100 for k in range(1, 100)))
#: How many of :data:`_RATES` are the rates people set (the rest: any rate in hundredths).
_SIMPLE = 10


def _cells(sol: Solution, step_id: str, head: int | None, cells: Sequence[tuple[int, int]]) -> Text:
    """``weights[t1, t2], weights[t3, t1]``: entries named by the step's labels."""
    step = sol.step(step_id, head)
    return Msg.and_list([f"{step.name}[{step.row_labels[i]}, {step.col_labels[j]}]" for i, j in cells])


def _given(claim: Claim) -> NDArray[np.bool_]:
    """``[r, c]``: True where the claim gives an entry (not ``~``, not NaN)."""
    with np.errstate(invalid="ignore"):
        return ~(np.isnan(claim.lo) | np.isnan(claim.hi))


def _large_fill(sol: Solution, step_id: str, head: int | None, claim: Claim,
                right: Array) -> tuple[dict[str, object], tuple[tuple[int, int], ...]] | None:
    """Blocked scores written as a large finite negative number (``-1e9``, ``-10000``, float16's
    ``-65504``) instead of ``-inf``, the kept ones right: ``masked`` only."""
    if claim.shape != right.shape:
        return None
    blocked = np.isneginf(right)  # [L, L_k]
    given = _given(claim)
    if not (blocked & given).any():
        return None
    live = ~blocked
    if not matches(np.where(live, right, 0.0), Claim(np.where(live, claim.lo, 0.0), np.where(live, claim.hi, 0.0)),
                   slack=ROUND_OFF):  # an exact form's bounds and the float right value may differ by round-off
        return None
    cells = [(int(i), int(j)) for i, j in zip(*np.nonzero(blocked & given))]
    lo = max(float(claim.lo[c]) for c in cells)
    hi = min(float(claim.hi[c]) for c in cells)
    row_max = [float(np.max(right[i][live[i]])) for i in range(right.shape[0]) if live[i].any()]
    bound = min([_LARGE_NEGATIVE, *(m - _UNDERFLOW for m in row_max)])
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi or hi > bound:
        return None  # not one finite number, or not one negative enough to vanish beside the kept scores
    i, j = cells[0]
    known = next((Msg(f"diagnose.{name}") for v, name in _FILLS if lo - 1e-9 * abs(v) <= v <= hi + 1e-9 * abs(v)), "")
    mid = (lo + hi) / 2
    fill = claim.text(i, j) if claim.texts is not None else (trimmed(mid) if abs(mid) < 1e15 else f"{mid:.6g}")
    return {"fill": fill, "known": known}, tuple(cells)


def _dropout(sol: Solution, step_id: str, head: int | None, claim: Claim,
             right: Array) -> tuple[dict[str, object], tuple[tuple[int, int], ...]] | None:
    """Weights with dropout left on: some zeroed, every other one ``w/(1 - p)`` for one ``p``.

    (Inverted dropout keeps each weight with probability ``1 - p`` and
    scales it by ``1/(1 - p)``, so each weight, and each row's sum, keeps
    its right value in expectation: a row sums to 1 on average, to
    ``1/(1 - p)`` only when nothing in it was dropped.)

    Which entries dropout zeroes is random, so an answer cannot be checked
    against them; what can be recognised is the signature: every entry
    written is either 0 or the right weight times one factor ``s > 1``
    (``s = 1/(1 - p)``), shared by the whole matrix, with at least one
    weight zeroed and one scaled.  A blocked weight must still be 0.  An
    entry whose claim holds both 0 and ``s·w`` (a tiny weight) counts as
    neither.  Some row written in full must not sum to 1 (a one-hot row is
    :func:`_argmax`'s), and a factor fitted to one kept weight alone (one
    fits any factor) must be that of a rate people set (0.5, 0.1, ...).
    ``weights`` only.
    """
    if claim.shape != right.shape:
        return None
    given = _given(claim)
    lo, hi = np.where(given, claim.lo, 0.0), np.where(given, claim.hi, 0.0)  # [r, c]
    slack = EPS * np.maximum(1.0, np.abs(right))
    zero_ok = (lo - slack <= 0) & (0 <= hi + slack)  # [r, c]: the entry may be 0
    if not zero_ok[given & (right == 0)].all():
        return None
    live = given & (right > 0)
    s_lo, s_hi = 1.0, math.inf
    for i, j in zip(*np.nonzero(live & ~zero_ok)):  # kept: written w·s
        w = right[i, j]
        s_lo, s_hi = max(s_lo, (lo[i, j] - slack[i, j]) / w), min(s_hi, (hi[i, j] + slack[i, j]) / w)
    if s_lo > s_hi or s_lo <= 1.0 + 1e-9 or s_hi == math.inf:
        return None
    whole = given.all(axis=1)  # [r]: rows written in full
    sums_lo, sums_hi = lo.sum(axis=1) - slack.sum(axis=1), hi.sum(axis=1) + slack.sum(axis=1)  # [r]
    if not (whole & ((sums_lo > 1) | (sums_hi < 1))).any():
        return None  # every written row still sums to 1: the signature says it does not
    rate = next((p for p in _RATES if s_lo <= 1 / (1 - p) <= s_hi), None)
    if (live & ~zero_ok).sum() < 2 and rate not in _RATES[:_SIMPLE]:
        return None  # one kept entry fits any factor: only a rate people use makes it evidence
    s = 1 / (1 - rate) if rate is not None else (s_lo + s_hi) / 2
    dropped = [(int(i), int(j)) for i, j in zip(*np.nonzero(live & zero_ok)) if not lo[i, j] <= right[i, j] * s <= hi[i, j]]
    if not dropped:
        return None
    p_text = trimmed(rate if rate is not None else 1 - 1 / s, 3)
    return {"p": p_text, "scale": trimmed(s, 4), "dropped": _cells(sol, step_id, head, dropped),
            "count": len(dropped)}, tuple(dropped)


def _argmax(sol: Solution, step_id: str, head: int | None, claim: Claim,
            right: Array) -> tuple[dict[str, object], tuple[tuple[int, int], ...]] | None:
    """Weights written one-hot: each row 1 at a key of its largest weight (its largest score), 0 elsewhere.

    A hard argmax in place of the softmax.  Every row must be written in full; a row whose keys are all
    blocked must stay 0.  At least one row must differ from its right weights (a row whose softmax is
    already one-hot, to float64, is no evidence).  ``weights`` only."""
    if claim.shape != right.shape:
        return None
    given = _given(claim)
    if not given.all():
        return None
    slack = EPS * np.maximum(1.0, np.abs(right))
    picked: list[tuple[int, int]] = []
    for i in range(right.shape[0]):
        zero = (claim.lo[i] - slack[i] <= 0) & (0 <= claim.hi[i] + slack[i])  # [c]
        one = (claim.lo[i] - EPS <= 1) & (1 <= claim.hi[i] + EPS)  # [c]
        if not (right[i] > 0).any():  # an empty row: its weights are all 0
            if not zero.all():
                return None
            continue
        top = right[i] >= right[i].max() * (1 - EPS)  # [c]: the keys of the row's largest weight
        j = int(np.argmax(one & ~zero)) if (one & ~zero).any() else -1
        if j < 0 or (one & ~zero).sum() != 1 or not top[j] or not np.delete(zero, j).all():
            return None
        picked.append((i, j))
    cells = off_cells(right, claim)
    if not cells:
        return None
    return {"rows": len(picked)}, tuple(cells)


#: The sizes of an exercise a learner may divide the scores by instead of √d_k, by name.
_SIZES = ("num_heads", "d_model", "L", "L_k", "d_v", "d_out")


def _wrong_constants(sol: Solution, step_id: str, head: int | None) -> list[tuple[dict[str, object], Array]]:
    """The scores divided by ``√c`` or by ``c`` for a size ``c`` of the exercise (``num_heads``,
    ``d_model``, ``L``, ``L_k``, ``d_v``, ``d_out``), one value per distinct divisor, naming every size
    that has it.  ``√d_model`` has its own row (``scale_sqrt_d_model``), so its name is left to it; a
    size equal to it, or to ``d_k`` (``scale_d_k``), is still named here: the answer cannot tell
    which one the learner used, so both rows are reported.  ``√d_k`` is right; 1 is ``no_scaling``."""
    ex = sol.exercise
    d_k = ex.heads[head or 0].d_k
    sizes = {"num_heads": ex.num_heads, "d_model": ex.d_model, "L": ex.L, "L_k": ex.L_k,
             "d_v": ex.heads[head or 0].d_v, "d_out": ex.d_out}
    taken = {math.sqrt(d_k), 1.0}
    out: list[tuple[dict[str, object], Array]] = []
    for form in ("sqrt", "plain"):
        by_value: dict[float, list[str]] = {}
        for name in _SIZES:
            if form == "sqrt" and name == "d_model":
                continue
            c = sizes[name]
            by_value.setdefault(math.sqrt(c) if form == "sqrt" else float(c), []).append(name)
        for divisor, names in by_value.items():
            if any(math.isclose(divisor, x) for x in taken):
                continue
            got = recompute(sol, step_id, head, Variant(divisor=divisor))
            if got is not None:
                c = sizes[names[0]]
                out.append(({"_message": f"diagnose.scale_constant.{form}", "c": c, "names": " = ".join(names)}, got))
    return out


#: The decimals a learner may round √d_k to before dividing by it.
_ROOT_PLACES = (1, 2)


def _rounded_roots(sol: Solution, step_id: str, head: int | None) -> list[tuple[dict[str, object], Array]]:
    """The scores divided by ``√d_k`` rounded to 1 or 2 decimals (``√2`` as 1.4, 1.41), when that is not
    ``√d_k`` itself (a perfect square), one value per distinct rounding."""
    d_k = sol.exercise.heads[head or 0].d_k
    root = math.sqrt(d_k)
    out: list[tuple[dict[str, object], Array]] = []
    seen: set[float] = set()
    for places in _ROOT_PLACES:
        r = round(root, places)
        if math.isclose(r, root) or r in seen or r == 0:
            continue
        seen.add(r)
        got = recompute(sol, step_id, head, Variant(divisor=r))
        if got is not None:
            out.append(({"rounded": f"{r:.{places}f}", "root": trimmed(root, 6)}, got))
    return out


def _none(sol: Solution, step_id: str, head: int | None) -> Array | None:
    return None


def _judged(key: str, steps: tuple[str, ...], judge: Judge) -> Misconception:
    """A misconception recognised from the answer itself (:attr:`Misconception.judge`), at ``steps``."""
    return Misconception(key, f"diagnose.{key}", _none, None, steps, judge=judge)


# --- the catalogue ------------------------------------------------------------------

_ALL = STEP_IDS


def _m(key: str, variant: Variant, *needs: str) -> Misconception:
    """A misconception that is the float pipeline with ``variant``'s knobs turned (see :func:`_varied`)."""
    return Misconception(key, f"diagnose.{key}", _varied(variant, *needs), variant, needs=needs)


def _special(key: str, steps: tuple[str, ...], fn: Recompute, *needs: str) -> Misconception:
    """A misconception that is not a variant of the pipeline, shown at ``steps``; ``needs``: what the exercise
    must have for it to be made at all (:func:`needs_met`), which the exercise suggested for it must have too
    (:func:`tutor.mistakes.invisible.suggestion`)."""
    return Misconception(key, f"diagnose.{key}", fn, None, steps, needs=needs)


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
    Misconception("scale_root_rounded", "diagnose.scale_root_rounded", _none, None,
                  ("scaled", "masked", "biased", "weights", "head_output", "concat", "output"), family=_rounded_roots),
    # before the softmax it is no_scaling's (the scores left as they are): named from the weights on
    replace(_m("scale_after_softmax", Variant(scale="after_softmax")),
            steps=tuple(s for s in _ALL if s not in ("scaled", "masked", "biased"))),
    _m("mask_upper", Variant(mask="upper"), "causal"),
    _m("mask_diagonal", Variant(mask="diagonal"), "causal"),
    _m("mask_inverted", Variant(mask="inverted"), "mask"),
    _m("mask_zero", Variant(mask="zero"), "mask"),
    _special("q_prescaled", ("q",), _q_prescaled),
    _special("scores_prescaled", ("scores",), _scores_prescaled),
    _special("mask_in_scaled", ("scaled",), _mask_in_scaled, "mask"),
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
    # the backward pass (issue 13)
    _m("softmax_grad_elementwise", Variant(softmax_grad="elementwise")),
    _m("softmax_grad_diagonal", Variant(softmax_grad="diagonal")),
    _m("grad_no_scale", Variant(grad_scale=False)),
    _m("d_k_not_transposed", Variant(d_k_transposed=False)),
    _m("d_k_order", Variant(d_k_order="q_first")),
    _m("d_k_order_transposed", Variant(d_k_order="qt_first")),
    replace(_m("masked_grad_leak", Variant(masked_grad="leak"), "mask"), per_entry=True),
    _m("bias_grad_mean", Variant(bias_grad="mean")),
    _m("kv_grad_not_summed", Variant(kv_grad="own"), "grouped"),
    # format v2 (issue 12)
    _m("kv_tile_order", Variant(kv_order="tile"), "grouped"),
    _m("decode_top_left", Variant(mask="top_left"), "lower_right"),
    _m("cache_reprojected", Variant(cache="reprojected"), "cache"),
    _m("bias_after_softmax", Variant(bias="after_softmax"), "bias"),
    _m("alibi_sign", Variant(bias="negated"), "alibi"),
    _m("alibi_shifted", Variant(bias="shifted"), "alibi"),
    _m("alibi_geometric", Variant(bias="geometric"), "alibi"),
    # issue 23: the sliding window and its attention sinks
    _m("window_wide", Variant(mask="window_wide"), "window"),
    _m("window_narrow", Variant(mask="window_narrow"), "window"),
    _m("window_acausal", Variant(mask="window_acausal"), "window"),
    _m("sinks_forgotten", Variant(mask="sinks_forgotten"), "sinks"),
    replace(_special("transposed", _ALL, _transposed), family=_transposed_said),
    # mistakes from published tutorials, notebooks and issues (issue 10)
    _judged("mask_large_negative", ("masked",), _large_fill),
    _m("mask_added", Variant(mask="added"), "mask"),
    Misconception("scale_constant", "diagnose.scale_constant.sqrt", _none, None,
                  ("scaled", "masked", "weights", "head_output", "concat", "output"), family=_wrong_constants),
    _m("heads_averaged", Variant(average_heads=True), "heads"),
    _m("heads_split_reshape", Variant(split_reshape=True), "heads"),
    _m("heads_merge_reshape", Variant(merge_reshape=True), "heads"),
    _judged("dropout_on", ("weights",), _dropout),
    _judged("argmax_weights", ("weights",), _argmax),
    _m("truncated_scaled", Variant(round_scaled=2, truncate=True)),
    _m("truncated_weights", Variant(round_weights=2, truncate=True)),
    # RoPE (format v3, issue 23): the other pairing, positions from 1, θ without the 2, V turned too
    _m("rope_pairing_mixed", Variant(rope="pairing"), "rope"),
    _m("rope_positions_from_one", Variant(rope="from_one"), "rope"),
    _m("rope_theta_without_two", Variant(rope="no_two"), "rope"),
    _m("rope_v_rotated", Variant(rope="rotate_v"), "rope"),
    _m("rope_grad_not_unrotated", Variant(rope_grad="not_unrotated"), "rope"),  # d_Q taken as d_Q_rot (backward)
    # fix-rope (trial findings F1, F12): the two layouts mixed (rotate_half with the interleaved layout's angles,
    # or the reverse: the public report "rotate_half against interleaved frequencies"); the gradient turned
    # forward by R(mθ) instead of back by R(mθ)ᵀ
    _m("rope_half_interleaved_angles", Variant(rope="half_interleaved_angles"), "rope"),
    _m("rope_interleaved_half_angles", Variant(rope="interleaved_half_angles"), "rope"),
    _m("rope_grad_turned_forward", Variant(rope_grad="forward"), "rope"),
    # issue 23: multi-head latent attention's absorbed route
    _m("uk_untransposed", Variant(uk_untransposed=True), "mla"),
    # the pre-norm block (issue 23)
    _m("norm_columns", Variant(norm_axis=0), "norm"),
    _m("rmsnorm_mean", Variant(norm_mean=True), "rmsnorm"),
    _m("residual_forgotten", Variant(residual="none"), "residual"),
    _m("residual_normed", Variant(residual="x_norm"), "norm_residual"),
    # post-norm (issue 23): the norm taken before the sum, the sum normalized over its columns
    _m("postnorm_before_add", Variant(post_norm="before_add"), "post_norm"),
    _m("postnorm_columns", Variant(norm_axis=0), "post_norm"),
)


# --- messages ---------------------------------------------------------------------------

def _fields(sol: Solution, step_id: str, head: int | None) -> dict[str, object]:
    ex = sol.exercise
    h = ex.heads[head or 0]
    step = sol.step(step_id, head)
    rows, cols = step.shape
    empty = Msg.joined("list.sep", [ex.query_labels[i] for i in _empty_rows(sol)])
    return {"d_k": h.d_k, "d_model": ex.d_model, "step": step.name, "head": head,
            "rows": rows, "cols": cols, "places": 2, "num_heads": ex.num_heads, "L_k": ex.L_k, "empty_rows": empty,
            "src": "concat" if ex.num_heads > 1 else "head_1", "b_o": " + b_O" if ex.b_o is not None else "",
            "ratio": ex.num_heads // ex.num_kv_heads, "offset": ex.L_k - ex.L,
            "pairing": ex.rope.pairing if ex.rope is not None else "", **_v3_mask_fields(ex)}

def _v3_mask_fields(ex: Exercise) -> dict[str, object]:
    """The fields of the messages on ALiBi's slopes and the sliding window (issue 23)."""
    out: dict[str, object] = {}
    if ex.alibi:
        out["slopes"] = Msg.joined("list.sep", [frac_text(alibi_slope(h, ex.num_heads)) for h in range(ex.num_heads)])
    if ex.window is not None:
        out.update(window=ex.window, before=ex.window - 1, sinks=ex.sinks)
    return out


# --- a single slipped entry ---------------------------------------------------------------


def _single_entry(sol: Solution, step_id: str, head: int | None, claim: Claim,
                  cells: Sequence[tuple[int, int]] | None) -> Diagnosis | None:
    """The diagnosis for an answer with exactly one entry off (``cells``: those off), else ``None``."""
    if cells is None or len(cells) != 1:
        return None
    (i, j), = cells
    step = sol.step(step_id, head)
    message = Msg("diagnose.single_entry", name=step.name, row=step.row_labels[i], col=step.col_labels[j],
                formula=entry_work(sol, step, i, j), found=claim.text(i, j))
    return Diagnosis("single_entry", message, ((i, j),))


def off_cells(right: Array, claim: Claim, *, slack: float = 0.0) -> list[tuple[int, int]] | None:
    """The 0-based cells where ``right`` (``[r, c]``) lies outside ``claim``,
    row by row (``slack``: as in :func:`matches`); ``None`` when the shapes differ."""
    if right.shape != claim.shape:
        return None
    r, c = right.shape
    return [(i, j) for i in range(r) for j in range(c)
            if not matches(right[i:i + 1, j:j + 1], Claim(claim.lo[i:i + 1, j:j + 1], claim.hi[i:i + 1, j:j + 1]),
                           slack=slack)]


# --- the API ---------------------------------------------------------------------------------


def diagnose_claim(sol: Solution, step_id: str, head: int | None, claim: Claim, *,
                   wrong: Sequence[tuple[int, int]] | None = None) -> list[Diagnosis]:
    """:func:`diagnose` for a :class:`Claim` (per-entry intervals, e.g. a
    solution file's entries, each rounded at the places written).

    ``wrong``: the cells the grading rule refused (``practice`` and ``check``
    pass theirs: an exact form is right only when exactly equal, which floats
    cannot tell); without it, the cells whose interval does not hold the right
    value, with no slack (:func:`off_cells`).  Returns ``[]`` when no cell is
    wrong (nothing to explain).  A misconception explains the answer when its
    recomputed step lies in the claim (within :data:`ROUND_OFF`), differs from
    the right value, and differs from it at every wrong cell (a refused entry it
    leaves at the right value is not its doing).  Raises ``KeyError`` when the
    exercise has no such step.
    """
    right = right_value(sol, step_id, head)  # [rows, cols]
    off = off_cells(right, claim) if wrong is None or right.shape != claim.shape else list(wrong)
    if off is not None and not off:
        return []
    found: list[Diagnosis] = []
    near: list[tuple[list[tuple[int, int]], Diagnosis]] = []
    fields = _fields(sol, step_id, head)
    for m in MISCONCEPTIONS:
        if not m.applies(sol.exercise, (step_id, head)):
            continue
        if m.judge is not None:
            judged = m.judge(sol, step_id, head, claim, right)
            if judged is not None:
                extra, cells = judged
                found.append(Diagnosis(m.key, Msg(m.message, **{**fields, **extra}), cells))
            continue
        for extra, got in m.candidates(sol, step_id, head):
            if _same(got, right):
                continue
            extra = dict(extra)
            message = Msg(str(extra.pop("_message", m.message)), **{**fields, **extra})
            if matches(got, claim, slack=ROUND_OFF):  # a float recomputation: round-off slack, never the right value
                cells = _differ(got, right)
                if off and got.shape == right.shape and not set(off) <= set(cells):
                    continue  # it leaves a refused entry at the right value: not why it is wrong
                found.append(Diagnosis(m.key, message, cells, got))
            elif m.per_entry and (some := _some_entries(got, right, claim, off)) is not None:
                found.append(Diagnosis(m.key, message, some, some_of(got, right, some)))
            elif (odd := _near(got, right, claim, off)) is not None:
                near.append((odd, Diagnosis(m.key, _near_message(sol, step_id, head, claim, got, odd, message),
                                            tuple(odd), got)))
    if len(found) > 1:  # a named mistake that gives the same numbers says more than "transposed"
        found = [d for d in found if d.key != "transposed"]
    if not found and near:  # all entries but a few explained: the closest fits, all of them
        fewest = min(len(odd) for odd, _ in near)
        found = [d for odd, d in near if len(odd) == fewest]
    if not found and (slip := _single_entry(sol, step_id, head, claim, off)) is not None:
        found.append(slip)
    return found


def explained_cells(found: Sequence[Diagnosis], claim: Claim) -> set[tuple[int, int]]:
    """The 0-based cells of ``claim`` that one of the mistakes ``found`` explains: the step as that mistake
    computes it (:attr:`Diagnosis.value`) lies in the entry's claim (within :data:`ROUND_OFF`).  There a wrong
    decimal is that mistake's value rounded, so no note on how it was rounded (cut off, away from zero) applies
    (fix-rope, trial finding F5)."""
    out: set[tuple[int, int]] = set()
    for d in found:
        if d.value is None or d.value.shape != claim.shape:
            continue
        r, c = claim.shape
        out |= {(i, j) for i in range(r) for j in range(c)
                if matches(d.value[i:i + 1, j:j + 1], Claim(claim.lo[i:i + 1, j:j + 1], claim.hi[i:i + 1, j:j + 1]),
                           slack=ROUND_OFF)}
    return out


def _some_entries(got: Array, right: Array, claim: Claim,
                  off: Sequence[tuple[int, int]] | None) -> tuple[tuple[int, int], ...] | None:
    """The wrong cells, when a per-entry mistake explains each of them and every other entry is right."""
    if not off or got.shape != right.shape or not set(off) <= set(_differ(got, right)):
        return None
    cells = tuple(off)
    return cells if matches(some_of(got, right, cells), claim, slack=ROUND_OFF) else None


def some_of(got: Array, right: Array, cells: Sequence[tuple[int, int]]) -> Array:
    """``right`` with ``cells`` taken from ``got`` (a per-entry mistake made at those entries only)."""
    out = right.copy()
    for i, j in cells:
        out[i, j] = got[i, j]
    return out


def _differ(got: Array, right: Array) -> tuple[tuple[int, int], ...]:
    """The cells where ``got`` differs from ``right`` (none when the shapes differ)."""
    if got.shape != right.shape:
        return ()
    differ = ~np.isclose(got, right, rtol=EPS, atol=1e-12) & ~(np.isinf(got) & (got == right))  # [r, c]
    return tuple((int(i), int(j)) for i, j in zip(*np.nonzero(differ)))


def _near(got: Array, right: Array, claim: Claim,
          off: Sequence[tuple[int, int]] | None) -> list[tuple[int, int]] | None:
    """The entries a mistake leaves unexplained, when it explains all the others.

    ``got`` (the step as the mistake computes it) must match the claim at
    all but a few entries (one, or at most a tenth of them), and those it
    matches must hold more wrong entries than it leaves: a published answer
    with one more slip (a rounding, a typo) on top of one mistake.  ``off``:
    the wrong cells (those grading refused, see :func:`diagnose_claim`).
    ``None`` otherwise.
    """
    odd = off_cells(got, claim, slack=ROUND_OFF)  # a float recomputation
    if not odd or len(odd) > max(1, got.size // 10):
        return None
    explained = [c for c in off or () if c not in odd]
    return odd if len(explained) >= 2 and len(explained) > len(odd) else None


def _near_message(sol: Solution, step_id: str, head: int | None, claim: Claim, got: Array,
                  odd: list[tuple[int, int]], message: Text) -> Text:
    """The mistake's sentence, then the entries it leaves: what was written and what it gives."""
    step = sol.step(step_id, head)
    details = Msg.and_list([Msg("diagnose.near.cell", name=f"{step.name}[{step.row_labels[i]}, {step.col_labels[j]}]",
                          found=claim.text(i, j), value=num_text(float(got[i, j]))) for i, j in odd])
    return Msg.plural("diagnose.near", len(odd), message=message, details=details)


def diagnose(sol: Solution, step_id: str, head: int | None, answer: Sequence[Sequence[float]], *,
             tolerance: float, wrong: Sequence[tuple[int, int]] | None = None) -> list[Diagnosis]:
    """The misconceptions that explain a wrong answer, most specific first.

    ``answer``: the learner's matrix as floats (``-inf`` allowed for masked
    scores), any shape.  A misconception counts when its recomputed step
    matches ``answer`` within ``tolerance`` elementwise (``-inf`` matches
    ``-inf``) and differs from the right value.  When none does and exactly
    one entry is off, the result is one ``single_entry`` diagnosis that
    works the entry out.  ``[]`` when the answer is right, or nothing
    explains it.  ``wrong``: the cells the grading rule refused (see
    :func:`diagnose_claim`); without it, the cells more than ``tolerance``
    from the right value.

    Raises ``KeyError`` when the exercise has no step ``(step_id, head)``,
    ``ValueError`` for a ragged or empty answer.

    >>> from tutor.exercise.catalog import resolve; from tutor.steps import solve
    >>> sol = solve(resolve("single-head-3x4"))
    >>> [d.key for d in diagnose(sol, "scaled", 0, [[2, 4, 4], [4, 8, 8], [4, 8, 8]], tolerance=0.005)]
    ['no_scaling']
    """
    return diagnose_claim(sol, step_id, head, Claim.around(answer, tolerance), wrong=wrong)


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



# --- one answer, one mistake: the mistakes it cannot tell apart -----------------------------------

def tied(found: Sequence[Diagnosis], value: Callable[[Diagnosis], Array | None] | None = None) -> int:
    """How many of the leading diagnoses ``found`` give the very numbers of the first (``[rows, cols]``, to
    float round-off): the mistakes the answer cannot tell apart (on single-head-3x4, where √d_model = √4 =
    d_k = d_v = 2, dividing by any of them).  ``value(d)``: the step as ``d``'s mistake computes it (default
    :attr:`Diagnosis.value`; a judge's has none, so it ties with nothing).  0 for none, 1 when the first
    stands alone."""
    if len(found) < 2:
        return len(found)
    get = value or (lambda d: d.value)
    first = get(found[0])
    if first is None:
        return 1
    count = 1
    for d in found[1:]:
        got = get(d)
        if got is None or got.shape != first.shape or not _same(got, first):
            break
        count += 1
    return count


def group_key(keys: Sequence[str]) -> str:
    """The key under which mistakes an answer cannot tell apart are recorded and counted, as ONE mistake:
    their keys in the catalogue's order, each once, joined by :data:`GROUP_SEP`; a lone key is itself.

    >>> group_key(["scale_sqrt_d_model", "scale_d_k", "scale_constant", "scale_constant"]), group_key(["no_scaling"])
    ('scale_sqrt_d_model+scale_d_k+scale_constant', 'no_scaling')
    """
    return GROUP_SEP.join(dict.fromkeys(keys))


def members(key: str) -> tuple[str, ...]:
    """The mistakes a recorded key stands for: those of a group (:func:`group_key`), else the key itself.

    >>> members("scale_d_k+scale_constant"), members("no_scaling")
    (('scale_d_k', 'scale_constant'), ('no_scaling',))
    """
    return tuple(key.split(GROUP_SEP))


def event(found: Sequence[Diagnosis]) -> str | None:
    """What one wrong answer records and counts: the key (:func:`group_key`) of its first diagnosis and of those
    it cannot tell apart from it (:func:`tied`) -- one mistake with several possible causes, never several
    mistakes; ``None`` when nothing explains the answer.  A later diagnosis that fits with other numbers is
    not the answer's mistake as shown (``practice`` shows the first and its ties)."""
    n = tied(found)
    return group_key([d.key for d in found[:n]]) if n else None

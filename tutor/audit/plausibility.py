"""The plausibility checks ``check`` runs on a written solution: what needs no recomputation.

Every given matrix has the size of its step; and per step kind, the checks
its catalogue entry names (:attr:`tutor.steps.StepKind.checks`):

* ``row_sums``: every weights row sums to 1 within ``Σ 0.5·10^-p`` of its
  entries (0 for a row that may attend to no key);
* ``weights_range``: weights lie in [0, 1];
* ``masked_zero``: entries the mask blocks are 0 after the softmax;
* ``column_range``: every head-output column lies between the smallest and
  largest entry of that column of V (the author's V if given, else the true
  V; a convex mix cannot leave it).

Each allows the rounding the author wrote.  Pure: no printing, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..base.decimals import trimmed
from ..base.messages import Msg, Text
from ..exercise.record import Exercise
from ..mistakes.diagnose import right_value
from ..steps import KINDS, Solution
from .solution import GivenStep, SolutionFile

Array = np.ndarray


@dataclass(frozen=True)
class Finding:
    """One plausibility check on one step: ``check`` is ``shape``, ``row_sums``,
    ``weights_range``, ``masked_zero`` or ``column_range``; ``message`` one
    sentence; ``cells`` the entries it concerns."""

    check: str
    id: str
    head: int | None
    ok: bool
    message: Text
    cells: tuple[tuple[int, int], ...] = ()


# --- names ----------------------------------------------------------------------------


def label(ex: Exercise, id: str, head: int | None) -> Text:
    """``weights`` for a one-head exercise, ``weights (head 2)`` for the second head (heads
    counted from 1, as a learner reads them) otherwise; layer steps plain."""
    if head is None or ex.num_heads == 1:
        return id
    from ..steps import KINDS

    kind = KINDS.get(id)
    if ex.grouped and kind is not None and kind.per_kv_head:  # one matrix per K/V head: named by it
        return Msg("check.step_of_kv_head", step=id, kv=ex.kv_head(head) + 1)
    return Msg("check.step_of_head", step=id, head=head + 1)


def cell_name(sol: Solution, id: str, head: int | None, i: int, j: int) -> str:
    """``[t1, t2]``: the row and column labels of a cell (its indices beyond the step's shape)."""
    step = sol.step(id, head)
    r = step.row_labels[i] if i < len(step.row_labels) else str(i + 1)
    c = step.col_labels[j] if j < len(step.col_labels) else str(j + 1)
    return f"[{r}, {c}]"


def cells_text(sol: Solution, g: GivenStep, cells: list[tuple[int, int]], limit: int = 4) -> Text:
    """``[t1, t2] = 0.5, [t2, t1] = 1.2`` (at most ``limit``, then "and N more")."""
    texts = g.texts()
    shown: list[Text] = [f"{cell_name(sol, g.id, g.head, i, j)} = {texts[i][j]}" for i, j in cells[:limit]]
    if len(cells) > limit:
        shown.append(Msg("check.more", count=len(cells) - limit))
    return Msg.joined("list.sep", shown)


def dims(shape: tuple[int, int]) -> str:
    """``[3×3]``."""
    return f"[{shape[0]}×{shape[1]}]"


# --- the checks ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Given:
    """One given step with what every check reads of it."""

    sol: Solution
    sf: SolutionFile
    g: GivenStep
    allowed: Array | None  # [L, L_k], True = may attend

    @property
    def name(self) -> Text:
        return label(self.sol.exercise, self.g.id, self.g.head)

    @property
    def right_shape(self) -> bool:
        return self.g.shape == self.sol.step(self.g.id, self.g.head).shape

    def ok(self, key: str) -> str:
        """The key of a passed check's sentence: ``key``, or ``key.nan`` ("…, apart from its nan entries") when
        the step has NaN entries, which are judged in their step.  (A plural key's ``.one``/``.other`` follow.)"""
        return f"{key}.nan" if self.g.nan_cells().any() else key

    def half(self) -> tuple[Array, Array, Array]:
        """``(lo, hi, mid)`` ``[r, c]`` of the entries (NaN where not given or written as NaN)."""
        lo, hi = self.g.bounds(nan_as_missing=True)  # a NaN entry is judged in its step, not here
        with np.errstate(invalid="ignore"):
            return lo, hi, (lo + hi) / 2


def _row_sums(c: _Given) -> list[Finding]:
    g, sol, allowed = c.g, c.sol, c.allowed
    lo, hi, mid = c.half()
    nan = g.nan_cells()  # [r, c]
    bad_rows = []
    empty_rows = []  # labels of the checked rows that may attend to no key (they sum to 0)
    for i in range(g.shape[0]):
        row = sol.step(g.id, g.head).row_labels[i] if c.right_shape else str(i + 1)
        if nan[i].any():
            bad_rows.append((i, Msg("check.row_sum.nan", step=c.name, row=row)))
            continue
        if np.isnan(lo[i]).any():
            continue
        empty = c.right_shape and allowed is not None and not allowed[i].any()
        if empty:
            empty_rows.append(row)
        with np.errstate(invalid="ignore"):  # an infinite entry has no width, and fails the sum
            total = float(np.where(np.isinf(lo[i]), lo[i], mid[i]).sum())
            allow = float(np.where(np.isinf(lo[i]), 0.0, (hi[i] - lo[i]) / 2).sum())
        if abs(total - (0.0 if empty else 1.0)) > allow + 1e-9:
            if empty:
                message = Msg("check.row_sum.bad_empty", step=c.name, row=row, total=trimmed(total, 6), allow=trimmed(allow, 6))
            else:
                message = Msg("check.row_sum.bad", step=c.name, row=row, total=trimmed(total, 6), target=1,
                            allow=trimmed(allow, 6))
            bad_rows.append((i, message))
    out = [Finding("row_sums", g.id, g.head, False, message, tuple((i, j) for j in range(g.shape[1])))
           for i, message in bad_rows]
    if not bad_rows and empty_rows:
        out.append(Finding("row_sums", g.id, g.head, True,
                           Msg("check.row_sum.ok_empty", step=c.name, rows=Msg.joined("list.sep", empty_rows))))
    elif not bad_rows:
        out.append(Finding("row_sums", g.id, g.head, True, Msg("check.row_sum.ok", step=c.name)))
    return out


def _weights_range(c: _Given) -> list[Finding]:
    g = c.g
    lo, hi, _ = c.half()
    with np.errstate(invalid="ignore"):
        outside = [(int(i), int(j)) for i, j in zip(*np.nonzero((hi < -1e-12) | (lo > 1 + 1e-12)))]
    if outside:
        return [Finding("weights_range", g.id, g.head, False, Msg(
            "check.range01.bad", step=c.name, cells=cells_text(c.sol, g, outside)), tuple(outside))]
    return [Finding("weights_range", g.id, g.head, True, Msg(c.ok("check.range01.ok"), step=c.name))]


def _masked_zero(c: _Given) -> list[Finding]:
    g, allowed = c.g, c.allowed
    if allowed is None or not c.right_shape:
        return []
    lo, hi, _ = c.half()
    with np.errstate(invalid="ignore"):
        leak = [(int(i), int(j)) for i, j in zip(*np.nonzero(~allowed & ((lo > 1e-12) | (hi < -1e-12))))]
    if leak:
        return [Finding("masked_zero", g.id, g.head, False, Msg(
            "check.masked_zero.bad", step=c.name, cells=cells_text(c.sol, g, leak)), tuple(leak))]
    return [Finding("masked_zero", g.id, g.head, True, Msg(c.ok("check.masked_zero.ok"), step=c.name))]


def _column_range(c: _Given) -> list[Finding]:
    g, sol, sf, allowed = c.g, c.sol, c.sf, c.allowed
    if not c.right_shape:
        return []
    v_step = sol.step("v", g.head)
    gv = sf.given("v", g.head)
    if gv is not None and gv.shape == v_step.shape and not np.isnan(gv.bounds(nan_as_missing=True)[0]).any():
        v_lo, v_hi = gv.bounds()
        whose = Msg("check.v.yours")
    else:
        v_lo = v_hi = right_value(sol, "v", g.head)
        whose = Msg("check.v.true")
    lo, hi, _ = c.half()
    live_rows = np.ones(g.shape[0], bool) if allowed is None else np.asarray(allowed.any(axis=1))  # [L]
    bad: list[tuple[int, int]] = []
    texts = []
    for j in range(g.shape[1]):
        top, bottom = float(v_hi[:, j].max()), float(v_lo[:, j].min())
        for i in range(g.shape[0]):
            if not live_rows[i] or np.isnan(lo[i, j]):
                continue
            if hi[i, j] < bottom - 1e-9 or lo[i, j] > top + 1e-9:
                bad.append((i, j))
                texts.append(Msg("check.column.bad_cell", cell=cell_name(sol, g.id, g.head, i, j),
                               value=g.texts()[i][j], low=trimmed(bottom, 6), high=trimmed(top, 6), col=v_step.col_labels[j]))
    if bad:
        return [Finding("column_range", g.id, g.head, False, Msg(
            "check.column.bad", step=c.name, cells=Msg.joined("list.sep.clauses", texts), whose=whose), tuple(bad))]
    empty = [sol.step(g.id, g.head).row_labels[i] for i in range(g.shape[0]) if not live_rows[i]]
    if empty:  # a zero row (no key to attend) is no weighted average: the bound does not hold for it
        return [Finding("column_range", g.id, g.head, True, Msg.plural(
            c.ok("check.column.ok_empty"), len(empty), step=c.name, whose=whose, rows=Msg.joined("list.sep", empty)))]
    return [Finding("column_range", g.id, g.head, True, Msg(c.ok("check.column.ok"), step=c.name, whose=whose))]


#: The checks a step kind may name, by name.
CHECKS: dict[str, Callable[[_Given], list[Finding]]] = {
    "row_sums": _row_sums,
    "weights_range": _weights_range,
    "masked_zero": _masked_zero,
    "column_range": _column_range,
}


def findings(sol: Solution, sf: SolutionFile) -> list[Finding]:
    """Every plausibility check on every step ``sf`` gives: sizes first, then each kind's checks."""
    ex = sol.exercise
    allowed = None if ex.allowed() is None else np.array(ex.allowed(), dtype=bool)  # [L, L_k]
    out: list[Finding] = []
    shapes_ok = True
    for g in sf.steps:
        step = sol.step(g.id, g.head)
        if g.shape != step.shape:
            shapes_ok = False
            out.append(Finding("shape", g.id, g.head, False, Msg(
                "check.shape.bad", step=label(ex, g.id, g.head), found=dims(g.shape), expected=dims(step.shape),
                annotation=step.annotation())))
    if sf.steps and shapes_ok:
        out.append(Finding("shape", "", None, True, Msg("check.shape.ok")))
    for g in sf.steps:
        given = _Given(sol, sf, g, allowed)
        for name in KINDS[g.id].checks:
            out += CHECKS[name](given)
    return out

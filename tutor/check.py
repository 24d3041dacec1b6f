"""The errata auditor: is a written solution right, and where does it go wrong?

:func:`audit` compares every step a solution file gives with the exact
solution, each entry within the rounding its author wrote (``0.45`` claims
[0.445, 0.455]; exact forms claim themselves), and finds

* the first wrong step in the contract's order, with its diagnosis
  (:func:`tutor.diagnose.diagnose_claim`);
* for every later wrong step, whether it only carries the error forward:
  the step is recomputed from the author's *own* earlier values (the nearest
  given ones, the missing ones recomputed from those) and compared with what
  the author wrote, allowing for the rounding of those inputs.  A step that
  matches is "carried"; one that does not is "independently" wrong; a first
  wrong step that matches its author's rounded inputs was "rounded too early";
* for every wrong entry written as an exact number (``0``, ``1``, ``1/3``)
  whose value rounds to it, a note that an exact number claims exactly that
  value (``0`` for 0.000012 is wrong; ``0.0000`` is right): the verdict
  stands, the note says why;
* the plausibility checks that need no recomputation: every weights row sums
  to 1 within ``Σ 0.5·10^-p`` of its entries (0 for a fully masked row);
  weights lie in [0, 1]; entries the mask blocks are 0 after the softmax;
  every head-output column lies between the smallest and largest entry of
  that column of V (the author's V if given, else the true V; a convex mix
  cannot leave it); every given matrix has the size of its step.

Pure: no printing, no I/O; the report is data for :mod:`tutor.render.check`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .answers import equals_exactly
from .diagnose import (
    Claim,
    Diagnosis,
    diagnose_claim,
    matches,
    off_cells,
    right_value,
    softmax,
)
from .messages import plural, t
from .model import Exercise
from .solution_file import GivenStep, SolutionFile, step_exists
from .steps import HEAD_STEPS, LAYER_STEPS, Solution
from .decimals import fixed

Key = tuple[str, "int | None"]
Array = np.ndarray

#: How a wrong step relates to the author's own earlier values.
CARRIED, INDEPENDENT, ROUNDING = "carried", "independent", "rounding"


@dataclass(frozen=True)
class StepCheck:
    """One given step, judged.

    ``expected`` is the right value ``[rows, cols]`` (float64, ``-inf`` for a
    masked score); ``wrong`` the 0-based cells outside their claim (every
    cell when the shape is wrong); ``follows`` for a wrong step: ``"carried"``
    (it matches what the author's own wrong earlier values give),
    ``"rounding"`` (it matches the author's earlier values, which are right
    but were rounded), ``"independent"`` (it matches neither), or ``None``;
    ``source`` the earlier wrong given step it carries forward;
    ``exact_claims`` the wrong cells written as exact numbers whose value
    rounds to what was written, each with its note (``[t2, t1]: you wrote
    0, an exact claim; the value is 0.000012 — write 0.0000 ...``).
    """

    given: GivenStep
    expected: Array
    wrong: tuple[tuple[int, int], ...]
    diagnoses: tuple[Diagnosis, ...]
    follows: str | None = None
    source: Key | None = None
    exact_claims: tuple[tuple[tuple[int, int], str], ...] = ()

    @property
    def key(self) -> Key:
        return (self.given.id, self.given.head)

    @property
    def shape_ok(self) -> bool:
        return self.given.shape == self.expected.shape

    @property
    def ok(self) -> bool:
        return self.shape_ok and not self.wrong


@dataclass(frozen=True)
class Finding:
    """One plausibility check on one step: ``check`` is ``shape``, ``row_sums``,
    ``weights_range``, ``masked_zero`` or ``column_range``; ``message`` one
    sentence; ``cells`` the entries it concerns."""

    check: str
    id: str
    head: int | None
    ok: bool
    message: str
    cells: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Report:
    """The audit of one solution file."""

    solution: SolutionFile
    sol: Solution  # the exact solution it was judged against
    steps: tuple[StepCheck, ...]
    findings: tuple[Finding, ...]
    first_wrong: StepCheck | None
    affected: tuple[Key, ...]  # steps after the first wrong one that depend on it, given or not

    @property
    def exercise(self) -> Exercise:
        return self.solution.exercise

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.steps) and all(f.ok for f in self.findings)

    @property
    def exit_code(self) -> int:
        """0 when every given step is right and plausible, 1 otherwise."""
        return 0 if self.ok else 1


# --- names ----------------------------------------------------------------------------


def label(ex: Exercise, id: str, head: int | None) -> str:
    """``weights`` for a one-head exercise, ``weights (head 1)`` otherwise; layer steps plain."""
    if head is None or ex.num_heads == 1:
        return id
    return t("check.step_of_head", step=id, head=head)


def cell_name(sol: Solution, id: str, head: int | None, i: int, j: int) -> str:
    """``[t1, t2]``: the row and column labels of a cell (its indices beyond the step's shape)."""
    step = sol.step(id, head)  # type: ignore[arg-type]
    r = step.row_labels[i] if i < len(step.row_labels) else str(i + 1)
    c = step.col_labels[j] if j < len(step.col_labels) else str(j + 1)
    return f"[{r}, {c}]"


# --- dependencies ------------------------------------------------------------------------


def inputs(ex: Exercise, id: str, head: int | None) -> list[Key]:
    """The steps ``(id, head)`` is computed from (``q``, ``k``, ``v`` come from the exercise)."""
    if id == "scores":
        return [("q", head), ("k", head)]
    if id == "scaled":
        return [("scores", head)]
    if id == "masked":
        return [("scaled", head)]
    if id == "weights":
        return [("masked" if ex.has_mask else "scaled", head)]
    if id == "head_output":
        return [("weights", head), ("v", head)]
    if id == "concat":
        return [("head_output", h) for h in range(ex.num_heads)]
    if id == "output":
        return [("concat", None)] if ex.num_heads > 1 else [("head_output", 0)]
    return []


def order(ex: Exercise) -> list[Key]:
    """Every step of the exercise, in the contract's order."""
    keys: list[Key] = [(s, h) for h in range(ex.num_heads) for s in HEAD_STEPS] + [(s, None) for s in LAYER_STEPS]
    return [k for k in keys if step_exists(ex, *k)]


def upstream(ex: Exercise, key: Key) -> set[Key]:
    """Every step ``key`` depends on, directly or not."""
    out: set[Key] = set()
    todo = inputs(ex, *key)
    while todo:
        k = todo.pop()
        if k not in out:
            out.add(k)
            todo += inputs(ex, *k)
    return out


# --- carrying the author's own values forward ----------------------------------------------


def _f(m) -> Array:
    return np.array([[float(x) for x in row] for row in m], dtype=np.float64)


def _carry(sol: Solution, sf: SolutionFile) -> dict[Key, tuple[Array, Array]]:
    """For every step: the value recomputed from the author's own inputs, and its slack.

    Walks the steps in order keeping, per step, the *carried* value (the
    author's where given, with ``[lo, hi]`` half-widths as slack; entries not
    given and steps not given recomputed from the carried inputs) and
    returns ``{key: (from_inputs [r, c], slack [r, c])}``: what the author's
    inputs give, and how far their rounding can move it (first-order bounds:
    products add ``|A|·δB + δA·|B| + δA·δB``; a softmax row moves by at most
    ``w·(exp(2·max δ) - 1)``).
    """
    ex = sol.exercise
    allowed = None if ex.allowed() is None else np.array(ex.allowed(), dtype=bool)  # [L, L_k]
    carried: dict[Key, tuple[Array, Array]] = {}
    result: dict[Key, tuple[Array, Array]] = {}

    def mul(a: tuple[Array, Array], b: tuple[Array, Array]) -> tuple[Array, Array]:
        (A, dA), (B, dB) = a, b
        return A @ B, np.abs(A) @ dB + dA @ np.abs(B) + dA @ dB  # [n, m]·[m, p] -> [n, p]

    for key in order(ex):
        id, head = key
        hd = ex.heads[head or 0]
        if id in ("q", "k", "v"):
            val = right_value(sol, id, head)
            got = (val, np.zeros_like(val))
        elif id == "scores":
            Q, K = carried["q", head], carried["k", head]
            got = mul(Q, (K[0].T, K[1].T))  # [L, d_k]·[d_k, L_k] -> [L, L_k]
        elif id == "scaled":
            S, dS = carried["scores", head]
            got = (S / math.sqrt(hd.d_k), dS / math.sqrt(hd.d_k))  # [L, L_k]
        elif id == "masked":
            assert allowed is not None  # the masked step exists only with a mask
            A, dA = carried["scaled", head]
            got = (np.where(allowed, A, -np.inf), np.where(allowed, dA, 0.0))  # [L, L_k]
        elif id == "weights":
            A, dA = carried[inputs(ex, id, head)[0]]  # masked (or scaled without a mask)
            W = softmax(A)  # [L, L_k]
            live = np.where(np.isinf(A), 0.0, dA)  # [L, L_k]
            spread = np.max(live, axis=-1, keepdims=True)  # [L, 1]
            got = (W, W * np.expm1(2 * spread))  # [L, L_k]
        elif id == "head_output":
            got = mul(carried["weights", head], carried["v", head])  # [L, L_k]·[L_k, d_v] -> [L, d_v]
        elif id == "concat":
            parts = [carried["head_output", h] for h in range(ex.num_heads)]
            got = (np.hstack([p[0] for p in parts]), np.hstack([p[1] for p in parts]))  # [L, H·d_v]
        else:  # output
            C = carried[inputs(ex, id, head)[0]]
            W_O = _f(ex.w_o)  # [H·d_v, d_out]
            b_o = 0.0 if ex.b_o is None else np.array([float(b) for b in ex.b_o])  # [d_out]
            got = (C[0] @ W_O + b_o, C[1] @ np.abs(W_O))  # [L, H·d_v]·[H·d_v, d_out] -> [L, d_out]
        val, slack = got[0], np.nan_to_num(got[1], nan=0.0, posinf=1e300)
        result[key] = (val, slack)
        g = sf.given(*key)
        if g is not None and g.shape == val.shape:
            lo, hi = g.bounds(nan_as_missing=True)
            with np.errstate(invalid="ignore"):  # -inf - -inf: masked entries have no width
                mid = np.where(np.isinf(lo), lo, (lo + hi) / 2)  # [r, c]
                half = np.where(np.isinf(lo), 0.0, (hi - lo) / 2)  # [r, c]
            nan = g.nan_cells()  # [r, c]: written as NaN, carried forward as NaN (as PyTorch would)
            missing = np.isnan(lo) & ~nan
            carried[key] = (np.where(nan, np.nan, np.where(missing, val, mid)),
                            np.where(nan | missing, np.where(nan, 0.0, slack), half))
        else:
            carried[key] = (val, slack)
    return result


def _consistent(g: GivenStep, value: Array, slack: Array) -> bool:
    """Whether what ``g`` writes follows from ``value`` (recomputed from the author's inputs) within ``slack``.

    An entry written as NaN follows only from a NaN (a NaN input row
    carried forward), and a NaN follows only into an entry written as NaN.
    """
    if g.shape != value.shape:
        return False
    nan = g.nan_cells()  # [r, c]
    if not np.array_equal(nan & np.isnan(value), nan):
        return False
    lo, hi = g.bounds(nan_as_missing=True)
    return matches(np.where(nan, 0.0, value), Claim(lo - slack, hi + slack))


# --- plausibility ------------------------------------------------------------------------------


def _half(g: GivenStep) -> tuple[Array, Array, Array]:
    lo, hi = g.bounds(nan_as_missing=True)  # a NaN entry is judged in its step, not by the plausibility checks
    with np.errstate(invalid="ignore"):
        return lo, hi, (lo + hi) / 2


def _plausibility(sol: Solution, sf: SolutionFile) -> list[Finding]:
    ex = sol.exercise
    allowed = None if ex.allowed() is None else np.array(ex.allowed(), dtype=bool)  # [L, L_k]
    out: list[Finding] = []
    shapes_ok = True
    for g in sf.steps:
        name = label(ex, g.id, g.head)
        want = sol.step(g.id, g.head).shape  # type: ignore[arg-type]
        if g.shape != want:
            shapes_ok = False
            out.append(Finding("shape", g.id, g.head, False, t(
                "check.shape.bad", step=name, found=_dims(g.shape), expected=_dims(want),
                annotation=sol.step(g.id, g.head).annotation())))  # type: ignore[arg-type]
    if sf.steps and shapes_ok:
        out.append(Finding("shape", "", None, True, t("check.shape.ok")))

    for g in sf.steps:
        name = label(ex, g.id, g.head)
        right_shape = g.shape == sol.step(g.id, g.head).shape  # type: ignore[arg-type]
        nan = g.nan_cells()  # [r, c]: NaN entries are left out of the checks below, and said so
        apart = t("check.nan.apart") if nan.any() else ""
        if g.id == "weights":
            lo, hi, mid = _half(g)
            bad_rows = []
            empty_rows = []  # labels of the checked rows that may attend to no key (they sum to 0)
            for i in range(g.shape[0]):
                row = sol.step("weights", g.head).row_labels[i] if right_shape else str(i + 1)  # type: ignore[arg-type]
                if nan[i].any():
                    bad_rows.append((i, t("check.row_sum.nan", step=name, row=row)))
                    continue
                if np.isnan(lo[i]).any():
                    continue
                empty = right_shape and allowed is not None and not allowed[i].any()
                if empty:
                    empty_rows.append(row)
                with np.errstate(invalid="ignore"):  # an infinite entry has no width, and fails the sum
                    total = float(np.where(np.isinf(lo[i]), lo[i], mid[i]).sum())
                    allow = float(np.where(np.isinf(lo[i]), 0.0, (hi[i] - lo[i]) / 2).sum())
                if abs(total - (0.0 if empty else 1.0)) > allow + 1e-9:
                    if empty:
                        message = t("check.row_sum.bad_empty", step=name, row=row, total=_short(total), allow=_short(allow))
                    else:
                        message = t("check.row_sum.bad", step=name, row=row, total=_short(total), target=1,
                                    allow=_short(allow))
                    bad_rows.append((i, message))
            for i, message in bad_rows:
                out.append(Finding("row_sums", g.id, g.head, False, message, tuple((i, j) for j in range(g.shape[1]))))
            if not bad_rows and empty_rows:
                out.append(Finding("row_sums", g.id, g.head, True,
                                   t("check.row_sum.ok_empty", step=name, rows=", ".join(empty_rows))))
            elif not bad_rows:
                out.append(Finding("row_sums", g.id, g.head, True, t("check.row_sum.ok", step=name)))
            with np.errstate(invalid="ignore"):
                outside = [(int(i), int(j)) for i, j in zip(*np.nonzero((hi < -1e-12) | (lo > 1 + 1e-12)))]
            if outside:
                out.append(Finding("weights_range", g.id, g.head, False, t(
                    "check.range01.bad", step=name, cells=_cells(sol, g, outside, mid)), tuple(outside)))
            else:
                out.append(Finding("weights_range", g.id, g.head, True, t("check.range01.ok", step=name) + apart))
            if allowed is not None and right_shape:
                with np.errstate(invalid="ignore"):
                    leak = [(int(i), int(j)) for i, j in zip(*np.nonzero(~allowed & ((lo > 1e-12) | (hi < -1e-12))))]
                if leak:
                    out.append(Finding("masked_zero", g.id, g.head, False, t(
                        "check.masked_zero.bad", step=name, cells=_cells(sol, g, leak, mid)), tuple(leak)))
                else:
                    out.append(Finding("masked_zero", g.id, g.head, True, t("check.masked_zero.ok", step=name) + apart))
        if g.id == "head_output" and right_shape:
            gv = sf.given("v", g.head)
            if gv is not None and gv.shape == sol.step("v", g.head).shape and not np.isnan(gv.bounds(nan_as_missing=True)[0]).any():
                v_lo, v_hi = gv.bounds()
                whose = t("check.v.yours")
            else:
                v_lo = v_hi = right_value(sol, "v", g.head)
                whose = t("check.v.true")
            lo, hi, mid = _half(g)
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
                        col = sol.step("v", g.head).col_labels[j]  # type: ignore[arg-type]
                        texts.append(t("check.column.bad_cell", cell=cell_name(sol, g.id, g.head, i, j),
                                       value=g.texts()[i][j], low=_short(bottom), high=_short(top), col=col))
            if bad:
                out.append(Finding("column_range", g.id, g.head, False, t(
                    "check.column.bad", step=name, cells="; ".join(texts), whose=whose), tuple(bad)))
            else:
                out.append(Finding("column_range", g.id, g.head, True, t("check.column.ok", step=name, whose=whose) + apart))
    return out


def _dims(shape: tuple[int, int]) -> str:
    return f"[{shape[0]}×{shape[1]}]"


def _short(v: float) -> str:
    text = f"{v:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _exact_claims(sol: Solution, g: GivenStep, expected: Array,
                  wrong: tuple[tuple[int, int], ...]) -> tuple[tuple[tuple[int, int], str], ...]:
    """The wrong cells of ``g`` written as exact numbers that the value rounds to, with a note each.

    "Rounds to" at the most places the author wrote in this step (4 when
    none, and at least 1, so that what the note suggests is a decimal: an
    entry such as ``1e1`` is written to -1 places): ``0`` for 0.000012 is
    noted (``0.0000`` would be right), ``0`` for 0.3 is not (it is simply
    wrong).
    """
    written = [e.places for row in g.entries for e in row if e is not None and e.places is not None]
    places = max(1, max(written, default=4))
    half = 0.5 * 10.0 ** -places
    out = []
    for i, j in wrong:
        e = g.entries[i][j]
        v = float(expected[i, j])
        if e is None or not e.is_exact or not math.isfinite(v):
            continue
        w = e.value()
        if not math.isfinite(w) or abs(v - w) > half + 1e-12 * max(1.0, abs(v)):
            continue
        digits = min(15, max(places + 2, 1 - math.floor(math.log10(abs(v - w))))) if v != w else places + 2
        value = fixed(v, digits).rstrip("0").rstrip(".")
        rounded = fixed(v, places)
        out.append(((i, j), t("check.exact_claim", cell=cell_name(sol, g.id, g.head, i, j), found=e.text,
                              value=value, rounded=rounded)))
    return tuple(out)


#: The steps whose row is a query's: a query that may attend to no key has a zero row there (NaN in PyTorch's MHA).
_QUERY_ROWS = ("weights", "head_output", "concat", "output")


def _nan_notes(sol: Solution, g: GivenStep, expected: Array) -> list[Diagnosis]:
    """Why each entry written as NaN is wrong: one note for the rows of queries
    that may attend to no key (PyTorch's ``nn.MultiheadAttention`` prints NaN
    there), one for any other NaN.  ``[]`` without NaN or with a wrong shape."""
    nan = g.nan_cells()  # [r, c]
    if not nan.any() or g.shape != expected.shape:
        return []
    ex = sol.exercise
    allowed = None if ex.allowed() is None else np.array(ex.allowed(), dtype=bool)  # [L, L_k]
    empty = set() if allowed is None or g.id not in _QUERY_ROWS else {int(i) for i in np.nonzero(~allowed.any(axis=1))[0]}
    cells = [(int(i), int(j)) for i, j in zip(*np.nonzero(nan))]
    in_empty = [c for c in cells if c[0] in empty]
    other = [c for c in cells if c[0] not in empty]
    name = label(ex, g.id, g.head)
    out = []
    if in_empty:
        labels = sol.step(g.id, g.head).row_labels  # type: ignore[arg-type]
        rows = sorted({i for i, _ in in_empty})
        out.append(Diagnosis("nan_empty_row", plural("check.nan.empty_row", len(rows), step=name,
                                                     rows=", ".join(labels[i] for i in rows)), tuple(in_empty)))
    if other:
        out.append(Diagnosis("nan", t("check.nan.elsewhere", step=name, cells=_cells(sol, g, other, expected)),
                             tuple(other)))
    return out


def _exact_verdict(sol: Solution, g: GivenStep, off: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """The wrong cells of ``g`` (right shape): an entry written exactly (``1/3``, ``sqrt(2)/2``,
    ``-inf``) is right only if it *is* the true value (:func:`tutor.answers.equals_exactly`:
    ``1000000001/1000000000`` is not 1, though the floats agree to 1e-9); a decimal is right
    within its rounding (``off``, from the float bounds).  Row by row."""
    exact = sol.step(g.id, g.head).exact  # type: ignore[arg-type]
    bad = set(off)
    for i, row in enumerate(g.entries):
        for j, e in enumerate(row):
            if e is not None and e.is_exact:
                if equals_exactly(e, exact[i][j]):
                    bad.discard((i, j))
                else:
                    bad.add((i, j))
    return tuple(sorted(bad))


def _cells(sol: Solution, g: GivenStep, cells: list[tuple[int, int]], mid: Array, limit: int = 4) -> str:
    texts = g.texts()
    shown = [f"{cell_name(sol, g.id, g.head, i, j)} = {texts[i][j]}" for i, j in cells[:limit]]
    if len(cells) > limit:
        shown.append(t("check.more", count=len(cells) - limit))
    return ", ".join(shown)


# --- the audit -------------------------------------------------------------------------------------


def audit(sf: SolutionFile, sol: Solution | None = None) -> Report:
    """Judge every step ``sf`` gives against the exact solution of its exercise.

    ``sol`` defaults to :func:`tutor.steps.solve` of ``sf.exercise``.
    Returns a :class:`Report`; raises nothing for a parsed file.
    """
    if sol is None:
        from .steps import solve

        sol = solve(sf.exercise)
    ex = sol.exercise
    with np.errstate(invalid="ignore", over="ignore"):  # the author's values may hold ±inf: NaN never matches
        carry = _carry(sol, sf)
    judged: list[StepCheck] = []
    wrong_keys: list[Key] = []
    for g in sf.steps:
        key = (g.id, g.head)
        expected = right_value(sol, g.id, g.head)
        lo, hi = g.bounds()
        claim = Claim(lo, hi, g.texts())
        if g.shape != expected.shape:
            wrong = tuple((i, j) for i in range(g.shape[0]) for j in range(g.shape[1]))
        else:
            wrong = _exact_verdict(sol, g, tuple(off_cells(expected, claim) or ()))
        if not wrong and g.shape == expected.shape:
            judged.append(StepCheck(g, expected, (), ()))
            continue
        exact = _exact_claims(sol, g, expected, wrong) if g.shape == expected.shape else ()
        nan = g.nan_cells()
        if nan.any():  # the misconceptions are judged on the numbers written; each NaN gets its own note
            claim = Claim(*g.bounds(nan_as_missing=True), g.texts())
        diagnoses = tuple(_nan_notes(sol, g, expected)) + tuple(diagnose_claim(sol, g.id, g.head, claim))
        noted = {cell for cell, _ in exact}
        # a slip in one entry that is only an exact number for a rounded value: the note says it better
        diagnoses = tuple(d for d in diagnoses if not (d.key == "single_entry" and set(d.cells) <= noted))
        ups = upstream(ex, key)
        given_ups = [k for k in ups if sf.given(*k) is not None]
        wrong_ups = [k for k in wrong_keys if k in ups]
        consistent = bool(given_ups) and _consistent(g, *carry[key])
        follows: str | None
        if wrong_ups:
            follows = CARRIED if consistent else INDEPENDENT
            source = max(wrong_ups, key=lambda k: order(ex).index(k)) if consistent else None
        else:
            follows, source = (ROUNDING if consistent else None), None
        judged.append(StepCheck(g, expected, wrong, diagnoses, follows, source, exact))
        wrong_keys.append(key)
    first = next((s for s in judged if not s.ok), None)
    affected: tuple[Key, ...] = ()
    if first is not None:
        affected = tuple(k for k in order(ex) if first.key in upstream(ex, k))
    return Report(sf, sol, tuple(judged), tuple(_plausibility(sol, sf)), first, affected)

"""The errata auditor: is a written solution right, and where does it go wrong?

:func:`audit` compares every step a solution file gives with the exact
solution, each entry within the rounding its author wrote (``0.45`` claims
[0.445, 0.455]; exact forms claim themselves), and finds

* the first wrong step in the contract's order, with its diagnosis
  (:func:`tutor.mistakes.diagnose.diagnose_claim`);
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
* the plausibility checks that need no recomputation (:mod:`tutor.audit.plausibility`).

Pure: no printing, no I/O; the report is data for :mod:`tutor.render.check`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..answers import MIN_PLACES, ROUNDED_AWAY, TRUNCATED, Entry, judge
from ..base.decimals import fixed, trimmed
from ..base.messages import Msg, Text
from ..exercise.record import Exercise
from ..mistakes.diagnose import EPS, Claim, Diagnosis, diagnose_claim, explained_cells, matches, right_value
from ..steps import Key, Solution, inputs, keys, replay, torch_empty_row, upstream
from .plausibility import Finding, cell_name, cells_text, findings, label
from .solution import GivenStep, SolutionFile

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
    0, an exact claim; the value is 0.000012 — write 0.0000 ...``);
    ``notes`` the grading notes of the step, ``(key, cells, sentence)``:
    ``truncated_decimal`` and ``rounded_away_decimal`` (wrong decimals that
    are the value cut off, or rounded away from zero, instead of rounded to
    the nearest) and ``coarse_decimal`` (right decimals written to fewer than
    2 places for a value that is not an integer: right within a rounding that
    says little).
    """

    given: GivenStep
    expected: Array
    wrong: tuple[tuple[int, int], ...]
    diagnoses: tuple[Diagnosis, ...]
    follows: str | None = None
    source: Key | None = None
    exact_claims: tuple[tuple[tuple[int, int], Text], ...] = ()
    notes: tuple[tuple[str, tuple[tuple[int, int], ...], Text], ...] = ()

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


# --- carrying the author's own values forward ----------------------------------------------


def _carry(sol: Solution, sf: SolutionFile, tolerance: float | None = None) -> dict[Key, tuple[Array, Array]]:
    """For every step: the value recomputed from the author's own inputs, and its slack.

    The float pipeline (:func:`tutor.steps.replay`) walks the steps in order
    over the *carried* values: the author's where given, with their ``[lo,
    hi]`` half-widths as slack (an entry written as NaN carried forward as
    NaN, as PyTorch would), and the computed ones elsewhere.  Returns
    ``{key: (from_inputs [r, c], slack [r, c])}``: what the author's inputs
    give, and how far their rounding can move it.
    """

    def given(key: Key) -> tuple[Array, Array, Array] | None:
        g = sf.given(*key)
        if g is None:
            return None
        lo, hi = g.bounds(nan_as_missing=True, tolerance=tolerance)
        with np.errstate(invalid="ignore"):  # -inf - -inf: masked entries have no width
            mid = np.where(np.isinf(lo), lo, (lo + hi) / 2)  # [r, c]
            half = np.where(np.isinf(lo), 0.0, (hi - lo) / 2)  # [r, c]
        nan = g.nan_cells()  # [r, c]: written as NaN, carried forward as NaN
        missing = np.isnan(lo) & ~nan
        return np.where(nan, np.nan, mid), np.where(nan, 0.0, half), missing

    return replay(sol.exercise, given=given, backward=_backward(sol)).computed


def _consistent(g: GivenStep, value: Array, slack: Array, tolerance: float | None = None) -> bool:
    """Whether what ``g`` writes follows from ``value`` (recomputed from the author's inputs) within ``slack``.

    An entry written as NaN follows only from a NaN (a NaN input row
    carried forward), and a NaN follows only into an entry written as NaN.
    """
    if g.shape != value.shape:
        return False
    nan = g.nan_cells()  # [r, c]
    if not np.array_equal(nan & np.isnan(value), nan):
        return False
    lo, hi = g.bounds(nan_as_missing=True, tolerance=tolerance)
    return matches(np.where(nan, 0.0, value), Claim(lo - slack, hi + slack), slack=EPS)  # a float replay


# --- plausibility ------------------------------------------------------------------------------


def _exact_claims(sol: Solution, g: GivenStep, expected: Array,
                  wrong: tuple[tuple[int, int], ...]) -> tuple[tuple[tuple[int, int], Text], ...]:
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
        out.append(((i, j), Msg("check.exact_claim", cell=cell_name(sol, g.id, g.head, i, j), found=e.text,
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
        labels = sol.step(g.id, g.head).row_labels
        rows = sorted({i for i, _ in in_empty})
        out.append(Diagnosis("nan_empty_row", Msg.plural("check.nan.empty_row", len(rows), step=name,
                                                     rows=Msg.joined("list.sep", [labels[i] for i in rows]), torch=torch_empty_row()),
                             tuple(in_empty)))
    if other:
        out.append(Diagnosis("nan", Msg("check.nan.elsewhere", step=name, cells=cells_text(sol, g, other)),
                             tuple(other)))
    return out


def _judged(sol: Solution, g: GivenStep, tolerance: float | None) -> tuple[tuple[tuple[int, int], ...],
                                                                            tuple[tuple[str, tuple[tuple[int, int], ...], Text], ...]]:
    """The wrong cells of ``g`` (right shape) by the one grading rule (:func:`tutor.answers.judge`,
    as ``practice`` grades: a decimal within its rounding, or ``± tolerance``; an exact form exactly;
    an entry a mask fixes exactly), row by row, and the step's grading notes (see :class:`StepCheck`).
    An entry written as NaN is wrong; one not given is not judged."""
    from ..steps import blocked_cells

    step = sol.step(g.id, g.head)
    strict = blocked_cells(sol, step)
    wrong: list[tuple[int, int]] = []
    coarse: list[tuple[int, int]] = []
    cut: list[tuple[int, int]] = []
    away: list[tuple[int, int]] = []
    for i, row in enumerate(g.entries):
        for j, e in enumerate(row):
            if e is None:
                continue
            if not isinstance(e, Entry):  # written as NaN
                wrong.append((i, j))
                continue
            verdict = judge(e, step.exact[i][j], tolerance=tolerance, strict=(i, j) in strict)
            if not verdict.right:
                wrong.append((i, j))
                if verdict.truncated:
                    cut.append((i, j))
                elif verdict.rounded_away:
                    away.append((i, j))
            elif verdict.coarse:
                coarse.append((i, j))
    notes = [_decimal_note(sol, g, key, tuple(cells)) for key, cells in ((TRUNCATED, cut), (ROUNDED_AWAY, away))
             if cells]
    if coarse:
        notes.append(("coarse_decimal", tuple(coarse), Msg("check.note.coarse", cells=cells_text(sol, g, coarse),
                                                         places=MIN_PLACES)))
    return tuple(wrong), tuple(notes)


def _decimal_note(sol: Solution, g: GivenStep, key: str,
                  cells: tuple[tuple[int, int], ...]) -> tuple[str, tuple[tuple[int, int], ...], Text]:
    """The grading note ``key`` (``truncated_decimal``, ``rounded_away_decimal``) on ``cells`` of ``g``: the first
    one's right value, rounded to the places written, beside what was written."""
    step = sol.step(g.id, g.head)
    i, j = cells[0]
    e = g.entries[i][j]
    assert isinstance(e, Entry) and e.places is not None
    return (key, cells, Msg(f"check.note.{key}", cells=cells_text(sol, g, list(cells)),
                            value=trimmed(step.value[i][j], max(e.places, 0) + 3), places=e.places,
                            rounded=fixed(step.value[i][j], max(e.places, 0)), written=e.text))


def _unexplained(sol: Solution, g: GivenStep, notes: Sequence[tuple[str, tuple[tuple[int, int], ...], Text]],
                 diagnoses: Sequence[Diagnosis], claim: Claim) -> tuple[tuple[str, tuple[tuple[int, int], ...], Text], ...]:
    """``notes`` without the decimals cut off or rounded away at entries a named mistake explains: there the
    mistake's value, not the right one, rounds to what was written (the rope trial, F5: V rotated too, each entry
    rounded right from it, was told "cut off instead of rounded")."""
    explained = explained_cells(diagnoses, claim)
    out = []
    for key, cells, text in notes:
        if key in (TRUNCATED, ROUNDED_AWAY) and explained & set(cells):
            left = tuple(c for c in cells if c not in explained)
            if left:
                out.append(_decimal_note(sol, g, key, left))
            continue
        out.append((key, cells, text))
    return tuple(out)


# --- the audit -------------------------------------------------------------------------------------


def _backward(sol: Solution) -> bool:
    """Whether ``sol`` holds the backward pass (a solution file that gives a gradient)."""
    return sol.get(("d_output", None)) is not None


def audit(sf: SolutionFile, sol: Solution | None = None, *, tolerance: float | None = None) -> Report:
    """Judge every step ``sf`` gives against the exact solution of its exercise, by the one
    grading rule (:mod:`tutor.answers.grading`; ``tolerance``: every decimal within ± it).

    ``sol`` defaults to :func:`tutor.steps.solve` of ``sf.exercise``.
    Returns a :class:`Report`; raises nothing for a parsed file.
    """
    if sol is None:
        from ..steps import has_backward, solve

        sol = solve(sf.exercise, backward=has_backward(g.id for g in sf.steps))
    ex = sol.exercise
    order = keys(ex, backward=_backward(sol))
    with np.errstate(invalid="ignore", over="ignore"):  # the author's values may hold ±inf: NaN never matches
        carry = _carry(sol, sf, tolerance)
    judged: list[StepCheck] = []
    wrong_keys: list[Key] = []
    for g in sf.steps:
        key = (g.id, g.head)
        expected = right_value(sol, g.id, g.head)
        lo, hi = g.bounds(tolerance=tolerance)
        claim = Claim(lo, hi, g.texts())
        notes: tuple[tuple[str, tuple[tuple[int, int], ...], Text], ...] = ()
        if g.shape != expected.shape:
            wrong = tuple((i, j) for i in range(g.shape[0]) for j in range(g.shape[1]))
        else:
            wrong, notes = _judged(sol, g, tolerance)
        if not wrong and g.shape == expected.shape:
            judged.append(StepCheck(g, expected, (), (), notes=notes))
            continue
        exact = _exact_claims(sol, g, expected, wrong) if g.shape == expected.shape else ()
        nan = g.nan_cells()
        if nan.any():  # the misconceptions are judged on the numbers written; each NaN gets its own note
            claim = Claim(*g.bounds(nan_as_missing=True, tolerance=tolerance), g.texts())
        graded = tuple(c for c in wrong if not nan[c]) if nan.any() else wrong  # a NaN entry has its own note
        diagnoses = tuple(_nan_notes(sol, g, expected)) + tuple(diagnose_claim(sol, g.id, g.head, claim, wrong=graded))
        noted = {cell for cell, _ in exact}
        # a slip in one entry that is only an exact number for a rounded value: the note says it better
        diagnoses = tuple(d for d in diagnoses if not (d.key == "single_entry" and set(d.cells) <= noted))
        notes = _unexplained(sol, g, notes, diagnoses, claim)
        ups = upstream(ex, key)
        given_ups = [k for k in ups if sf.given(*k) is not None]
        wrong_ups = [k for k in wrong_keys if k in ups]
        consistent = bool(given_ups) and _consistent(g, *carry[key], tolerance)
        follows: str | None
        if wrong_ups:
            follows = CARRIED if consistent else INDEPENDENT
            source = max(wrong_ups, key=order.index) if consistent else None
        else:
            follows, source = (ROUNDING if consistent else None), None
        judged.append(StepCheck(g, expected, wrong, diagnoses, follows, source, exact, notes))
        wrong_keys.append(key)
    first = next((s for s in judged if not s.ok), None)
    affected: tuple[Key, ...] = ()
    if first is not None:
        affected = _affected(ex, order, first.key, {s.key for s in judged if s.ok})
    return Report(sf, sol, tuple(judged), tuple(findings(sol, sf)), first, affected)


def _affected(ex: Exercise, order: Sequence[Key], wrong: Key, right: set[Key]) -> tuple[Key, ...]:
    """The steps after ``wrong`` that take its error in: computed from it, or from a step that took it in.

    A step given and right (``right``) is listed, since the learner should see the error stop there, but
    what is computed from it does not inherit the error through it (only through another input)."""
    reached = {wrong}
    out = []
    for k in order:
        if k != wrong and any(i in reached for i in inputs(ex, k)):
            out.append(k)
            if k not in right:
                reached.add(k)
    return tuple(out)

"""The practice drill's questions: the steps of a worked solution, a client of :mod:`.machine`.

A session walks the chosen steps in the order of the solution (head 0's steps,
then head 1's, ..., then ``concat`` and ``output``); each step begins with its
title, formula and inputs (:class:`Present`).  Its hints are its formula and
one entry worked out; a wrong matrix is explained by the misconception catalogue
(:func:`tutor.mistakes.diagnose.diagnose_claim`); the cells a mask fixes are
graded exactly; every try is recorded (an :class:`~tutor.store.attempt.Attempt`
effect) under the exercise id and family.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tutor.base.messages import Msg, Text
from tutor.steps import KINDS, Input, Solution, Step, blocked_cells, worked_entry
from tutor.store.attempt import Attempt, Outcome

from .effects import Answered, Cell, Effect, Opening
from .grading import Graded
from .machine import Drill, Settings, State, begin

if TYPE_CHECKING:
    import numpy as np

    from tutor.mistakes.diagnose import Diagnosis


@dataclass(frozen=True)
class Present(Opening):
    """Show a new step: its title, formula and inputs (never its result's shape)."""

    step: Step
    number: int
    total: int
    inputs: tuple[Input, ...]
    multi_head: bool
    title: Text = ""  # the step's title for its exercise (:meth:`tutor.steps.StepKind.title_of`); "" = its kind's
    note: Text = ""  # what the formula leaves to the exercise, said under it: RoPE's pairing ("" = nothing)


def _pairing(sol: Solution, step: Step) -> Text:
    """RoPE's pairing, for its rotations (``Q_rot``, ``K_rot``): which dimensions turn together, as ``explain``
    says it (``step.rope.why.<pairing>``); the formula does not say it, and a learner who guesses it is marked
    "paired the other way" (the rope trial, F2).  ``""`` for any other step."""
    rope = sol.exercise.rope
    if rope is None or step.id not in ("q_rot", "k_rot"):  # the rotations: their formula line shows no pairing
        return ""
    return Msg(f"step.rope.why.{rope.pairing}")


@dataclass(frozen=True)
class Worked(Drill[Step]):
    """The steps of ``sol`` as the machine's questions; answers recorded under ``record_as``."""

    sol: Solution
    record_as: str
    multi_head: bool = False

    def opening(self, state: State[Step], before: Step | None) -> list[Effect]:
        step = state.step
        title = KINDS[step.id].title_of(step, self.sol.exercise)
        if _mask_is_asked(self.sol, step):  # M is not given: the title says the rule to build it by
            ex = self.sol.exercise
            title = Msg("practice.masked.window_sinks" if ex.sinks else "practice.masked.window", title=title,
                        W=ex.window, S=ex.sinks)
        return [Present(step, state.index + 1, len(state.steps), inputs_for(self.sol, step), self.multi_head, title,
                        _pairing(self.sol, step))]

    def formula(self, step: Step) -> Text:
        pairing = _pairing(self.sol, step)
        return Msg("practice.hint.formula.pairing", formula=step.formula, pairing=pairing) if pairing else step.formula

    def worked(self, state: State[Step]) -> tuple[Cell | None, str]:
        i, j = _hint_cell(state)
        return (i, j), worked_entry(self.sol, state.step, i, j)

    def diagnose(self, state: State[Step], answer: Answered, graded: Graded) -> tuple[tuple[Diagnosis, ...], int]:
        """Explained by :func:`tutor.mistakes.diagnose.diagnose_claim` from what the answer claims."""
        import numpy as np

        from tutor.answers import claim as claim_of
        from tutor.mistakes.diagnose import Claim, diagnose_claim

        step, tolerance = state.step, state.settings.tolerance
        bounds = [[claim_of(e, tolerance=tolerance) for e in row] for row in answer]
        claim = Claim(np.array([[b[0] for b in row] for row in bounds], dtype=np.float64),  # [rows, cols]
                      np.array([[b[1] for b in row] for row in bounds], dtype=np.float64),  # [rows, cols]
                      tuple(tuple(e.text for e in row) for row in answer))
        # the cells grading refused are the ones to explain (never called right here)
        found = tuple(diagnose_claim(self.sol, step.id, step.head, claim, wrong=graded.wrong))
        # one slipped entry that is only an exact form of a rounded value: the note on it says it better
        # (as in check); a masked key's near-zero weight keeps its "should be 0" sentence
        found = tuple(d for d in found if not (d.key == "single_entry" and set(d.cells) <= set(graded.inexact)))
        return found, alike(self.sol, step, found)

    def strict(self, step: Step) -> frozenset[Cell]:
        return blocked_cells(self.sol, step)

    def attempt(self, state: State[Step], outcome: Outcome, attempt: int, *,
                diagnoses: tuple[str, ...] = (), notes: tuple[str, ...] = (), answer: str | None = None) -> Attempt:
        """The current step's ``attempt``-th try (its hints so far included), a review of the skill
        (step, exercise family) in the schedule."""
        step = state.step
        return Attempt(self.record_as, step.id, step.head, outcome, attempt, state.hints, diagnoses, answer,
                       notes=notes, family=self.sol.exercise.family)

    def entry_name(self, step: Step, cell: Cell) -> tuple[str, str]:
        return step.row_labels[cell[0]], step.col_labels[cell[1]]

    def widest(self, step: Step) -> int:
        """Every size of the exercise's matrices (a step's, or d_model): a wrong answer of another shape
        -- transposed, weights·K, a head's output for the layer's -- is built from them, so no row of
        one is wider."""
        return max(self._widest, max(step.shape))

    @property
    def _widest(self) -> int:
        return max([self.sol.exercise.d_model] + [max(s.shape) for s in self.sol.steps])


def select(sol: Solution, steps: Sequence[str] | None = None, head: int | None = None) -> tuple[Step, ...]:
    """The steps of ``sol`` a session asks, in order: only ``steps`` (ids) if given, only
    ``head``'s per-head steps if given (layer steps are kept, as in ``explain --head``).
    A step grouped query heads share (``k``, ``v`` and the K/V gradients of grouped K/V
    heads: one matrix per K/V head) is asked once, under the first head of its group,
    unless the session is on one head."""
    chosen = []
    for s in sol.steps:
        if steps is not None and s.id not in steps:
            continue
        if head is not None and s.head is not None and s.head != head:
            continue
        if head is None and s.kv_head is not None and s.head != s.shared[0]:
            continue  # the same matrix as under the group's first head: asked there
        chosen.append(s)
    return tuple(chosen)


def start(sol: Solution, settings: Settings | None = None, *, steps: Sequence[str] | None = None,
          head: int | None = None, begin_at: int = 0, record_as: str | None = None
          ) -> tuple[State[Step], list[Effect]]:
    """A new session over :func:`select`'s steps, and its first effects.

    ``begin_at`` is the 0-based index of the first step asked: the steps
    before it are given (a session resumed, or started at the weakest step;
    they count as ``given`` in the summary).  ``record_as`` is the exercise id
    the answers are recorded under (default ``sol``'s own; a session on fresh
    numbers drawn from an exercise records them under that exercise's id).  ``settings``: the
    default :class:`.machine.Settings` when ``None``.
    """
    drill = Worked(sol, record_as or sol.exercise.id, multi_head=sol.exercise.num_heads > 1)
    return begin(drill, select(sol, steps, head), settings or Settings(), at=begin_at)


def _hint_cell(state: State[Step]) -> Cell:
    """The entry a hint works out: the one being asked (entry mode), else the first one
    answered wrong, else the first with a finite value."""
    if state.todo:
        return state.todo[0]
    if state.last_wrong:
        return state.last_wrong[0]
    for i, row in enumerate(state.step.value):
        for j, v in enumerate(row):
            if math.isfinite(v):
                return (i, j)
    return (0, 0)


def alike(sol: Solution, step: Step, diagnoses: Sequence[Diagnosis]) -> int:
    """How many of the leading ``diagnoses`` recompute the same matrix as the first
    (:func:`tutor.mistakes.diagnose.tied`): mistakes that give the same numbers here, which the answer
    cannot tell apart, all shown and recorded as one (:func:`tutor.mistakes.diagnose.event`)."""
    from tutor.mistakes.diagnose import MISCONCEPTIONS, tied

    recompute = {m.key: m.recompute for m in MISCONCEPTIONS}

    def value(d: Diagnosis) -> np.ndarray | None:
        """The step as the diagnosed mistake computes it: carried by the diagnosis, else recomputed."""
        if d.value is not None:
            return d.value
        return recompute[d.key](sol, step.id, step.head) if d.key in recompute else None

    return tied(diagnoses, value)


# --- what a step needs ------------------------------------------------------------------------------


def result_name(step: Step) -> str:
    """The name of a step's result: ``Q``, ``scores``, ``head_1``, ``output``."""
    return step.name


def step_label(step: Step, multi_head: bool) -> str:
    """A step's result named as its prompt names it: ``Q``, ``Q (head 1)``, ``head_1``, ``K (K/V head 1)``,
    ``output`` -- the head counted from 1, said for a per-head step of a multi-head exercise (unless its
    name says it)."""
    from ..base.messages import t
    from ..steps import KINDS

    if multi_head and step.kv_head is not None:  # a matrix grouped query heads share: its K/V head's
        return t("practice.label.of_kv_head", name=result_name(step), kv=step.kv_head + 1)
    if multi_head and step.head is not None and not KINDS[step.id].names_head:
        return t("practice.label.of_head", name=result_name(step), head=step.head + 1)
    return result_name(step)


def head_suffix(step: Step, multi_head: bool) -> str:
    """The head a prompt names after its result (`` (head 1)``, `` (K/V head 1)``), where :func:`step_label`
    names one; else nothing.  A prompt's template places it (``{name}{head}>``)."""
    from ..base.messages import t
    from ..steps import KINDS

    if multi_head and step.kv_head is not None:
        return t("practice.label.kv_head", kv=step.kv_head + 1)
    if multi_head and step.head is not None and not KINDS[step.id].names_head:
        return t("practice.label.head", head=step.head + 1)
    return ""


def inputs_for(sol: Solution, step: Step) -> tuple[Input, ...]:
    """The matrices ``step`` is computed from, as the learner has them (the right values
    of the earlier steps): e.g. ``Q`` and ``K`` for ``scores``, ``X``, ``W_Q`` (and ``b_Q``) for ``q``.
    A sliding window's mask ``M`` is not among them: building it is what the exercise practises."""
    given = KINDS[step.id].given(sol, step)
    if _mask_is_asked(sol, step):
        return tuple(i for i in given if str(i.name) != "M")
    return given


def _mask_is_asked(sol: Solution, step: Step) -> bool:
    """Whether the learner builds ``step``'s mask: the masked scores of a sliding window (with or without sinks).
    Given, its 0s and −∞s left only copying (rope trial F13); a causal mask stays given."""
    ex = sol.exercise
    return step.id == "masked" and ex.mask_kind == "sliding_window" and ex.window is not None  # M is the point

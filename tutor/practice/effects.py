"""What the drill asks its caller to do, as effects: show something, ask for input, save an attempt.

:func:`.machine.handle` returns them in order; the caller carries each out
(:class:`~tutor.store.attempt.Attempt` to the progress store, before the feedback
that follows it is shown, so that an answer is saved before the learner reads
the verdict; :class:`Prompt` by asking; every other effect by the renderer,
:class:`tutor.render.quiz.QuizRenderer`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from tutor.answers import Entry
from tutor.steps import Input, Step
from tutor.store.attempt import Attempt

if TYPE_CHECKING:
    from tutor.mistakes.diagnose import Diagnosis

Mode = Literal["matrix", "entry"]  # type whole matrices, or answer entry by entry
Cell = tuple[int, int]  # (row, column), 0-based
Answered = tuple[tuple[Entry, ...], ...]  # a typed answer: [rows, cols] parsed entries


@dataclass(frozen=True)
class Present:
    """Show a new step: its title, formula and inputs (never its result's shape)."""

    step: Step
    number: int
    total: int
    inputs: tuple[Input, ...]
    multi_head: bool


@dataclass(frozen=True)
class Prompt:
    """Ask for input.  ``row`` (1-based) during row-by-row input; ``cell`` in entry mode."""

    step: Step
    multi_head: bool
    row: int | None = None
    cell: Cell | None = None


@dataclass(frozen=True)
class Invalid:
    """Typed text that is not an answer: one line saying what and where; nothing was graded."""

    message: str


@dataclass(frozen=True)
class RowByRow:
    """Row 1 was read as the first row of a row-by-row answer."""

    rows: int


@dataclass(frozen=True)
class Correct:
    """The answer is right (``attempt`` is the 1-based try)."""

    step: Step
    attempt: int


@dataclass(frozen=True)
class Wrong:
    """The answer is wrong.

    ``wrong`` are the wrong cells when the shape is right (``None`` when it
    is not); ``inexact`` the wrong cells whose exact form (``1/9``,
    ``sqrt(2)/10``) is close to the value but not equal: they need decimals;
    ``blocked`` the wrong cells a mask blocks whose entry is close to the
    right ``0`` (a weight must be exactly 0 there: see :func:`blocked_cells`);
    ``diagnoses`` the misconceptions that explain the answer, most specific
    first; ``alike`` how many of the first diagnoses recompute the very same
    matrix (1 to 3: the mistakes the answer cannot tell apart, all shown);
    ``retry`` the cells asked again in entry mode; ``coarse`` the cells
    written coarser than 2 decimals (not wrong, but to be given more
    precisely); ``truncated`` the wrong cells that are the value cut
    instead of rounded (the grading note ``truncated_decimal``).
    """

    step: Step
    answer: Answered
    wrong: tuple[Cell, ...] | None
    inexact: tuple[Cell, ...]
    diagnoses: tuple[Diagnosis, ...]
    attempt: int
    retry: tuple[Cell, ...] = ()
    blocked: tuple[Cell, ...] = ()
    alike: int = 1
    coarse: tuple[Cell, ...] = ()
    truncated: tuple[Cell, ...] = ()

    @property
    def shown(self) -> tuple[Diagnosis, ...]:
        """The diagnoses to show: the first and those indistinguishable from it."""
        return self.diagnoses[: self.alike]


@dataclass(frozen=True)
class Coarse:
    """The answer holds no wrong entry, but ``cells`` are written coarser than 2 decimals for a
    value that is not an integer: neither right nor wrong, nothing recorded; the answer is asked
    again (in entry mode only ``retry``, those cells)."""

    step: Step
    answer: Answered
    cells: tuple[Cell, ...]
    retry: tuple[Cell, ...] = ()


@dataclass(frozen=True)
class Hint:
    """Hint number ``level``: 1 is the formula, 2 one entry worked out; 3 and on: no more hints."""

    step: Step
    level: int
    formula: str = ""
    cell: Cell | None = None
    work: str = ""


@dataclass(frozen=True)
class ShapeInfo:
    """Reveal the shape of the step's result, and how it follows from the inputs."""

    step: Step


@dataclass(frozen=True)
class Reveal:
    """Show the right answer (after ``show``); the step counts as missed."""

    step: Step


@dataclass(frozen=True)
class Skipped:
    """The step was skipped (not counted)."""

    step: Step


@dataclass(frozen=True)
class Help:
    """List the commands and the answer formats."""

    mode: Mode

@dataclass(frozen=True)
class Result:
    """How one step of the session ended: ``correct``, ``shown``, ``skipped``, ``given`` (not
    asked: before the step the session began at), or ``None`` when it was not finished --
    ``seen`` then says whether it was on screen when the session ended (``attempts`` and
    ``hints`` whether it was begun)."""

    step: Step
    outcome: Literal["correct", "shown", "skipped", "given"] | None = None
    attempts: int = 0
    hints: int = 0
    diagnoses: tuple[str, ...] = ()
    seen: bool = False


@dataclass(frozen=True)
class Summary:
    """The session is over: one :class:`Result` per chosen step, and why it ended."""

    results: tuple[Result, ...]
    reason: Literal["done", "quit", "end", "interrupt"]


#: Every effect.  An :class:`~tutor.store.attempt.Attempt` asks the caller to save it in the progress store
#: (each answer, ``show`` and ``skip``); it is the very record the store writes.
Effect = (Present | Prompt | Invalid | RowByRow | Correct | Wrong | Coarse | Hint | ShapeInfo | Reveal | Skipped
          | Help | Attempt | Summary)

"""What a drill asks its caller to do, as effects: show something, ask for input, save an attempt.

:func:`.machine.handle` returns them in order; the caller carries each out
(:class:`~tutor.store.attempt.Attempt` to the progress store, before the feedback
that follows it is shown, so that an answer is saved before the learner reads
the verdict; :class:`Prompt` by asking; every other effect by the renderer,
:class:`tutor.render.quiz.QuizRenderer` or
:class:`tutor.render.tiled_practice.TiledPracticeRenderer`).

The effects are the same for every client of the machine; ``step`` is the
question asked (``Q``: a :class:`tutor.steps.Step` of a worked solution, or a
:class:`tutor.flash.drill.Ask` of the online softmax).  Only what a client shows
as a question begins is its own (an :class:`Opening`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

from tutor.answers import Entry
from tutor.base.messages import Text, plural, t
from tutor.store.attempt import Attempt

if TYPE_CHECKING:
    from tutor.mistakes.diagnose import Diagnosis

Q = TypeVar("Q")  # the question: a solution's Step, or a tiled quantity

#: How an answer is typed: whole matrices (one line, or row by row), entry by entry, or one row on one line.
Mode = Literal["matrix", "entry", "row"]
Cell = tuple[int, int]  # (row, column), 0-based
Answered = tuple[tuple[Entry, ...], ...]  # a typed answer: [rows, cols] parsed entries


class Opening:
    """What a client shows as one of its questions begins (practice's
    :class:`tutor.practice.worked.Present`, the online softmax's
    :class:`tutor.flash.drill.BlockStart`): the base of those effects."""


@dataclass(frozen=True)
class Prompt(Generic[Q]):
    """Ask for input.  ``row`` (1-based) during row-by-row input; ``cell`` in entry mode;
    ``more``: the next line of a printout pasted over several lines;
    ``multi_head``: the question is named with its head."""

    step: Q
    multi_head: bool = False
    row: int | None = None
    cell: Cell | None = None
    more: bool = False


@dataclass(frozen=True)
class Invalid:
    """Typed text that is not an answer: one line saying what and where; nothing was graded."""

    message: str


@dataclass(frozen=True)
class RowByRow:
    """Row 1 was read as the first row of a row-by-row answer."""

    rows: int


@dataclass(frozen=True)
class Correct(Generic[Q]):
    """The answer is right (``attempt`` is the 1-based try)."""

    step: Q
    attempt: int


@dataclass(frozen=True)
class Wrong(Generic[Q]):
    """The answer is wrong.

    ``wrong`` are the wrong cells when the shape is right (``None`` when it
    is not); ``inexact`` the wrong cells whose exact form (``1/9``,
    ``sqrt(2)/10``) is close to the value but not equal: they need decimals;
    ``blocked`` the wrong cells a mask blocks whose entry is close to the
    right ``0`` (a weight must be exactly 0 there: see
    :func:`tutor.steps.blocked_cells`); ``diagnoses`` the misconceptions
    that explain the answer, most specific first; ``alike`` how many of the
    first diagnoses recompute the very same value (1 to 3: the mistakes the
    answer cannot tell apart, all shown); ``retry`` the cells asked again in
    entry mode; ``coarse`` the cells written coarser than 2 decimals (not
    wrong, but to be given more precisely); ``truncated`` the wrong cells that
    are the value cut instead of rounded (the grading note
    ``truncated_decimal``), ``rounded_away`` those rounded away from zero
    when the nearest is towards it (``rounded_away_decimal``).
    """

    step: Q
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
    rounded_away: tuple[Cell, ...] = ()

    @property
    def shown(self) -> tuple[Diagnosis, ...]:
        """The diagnoses to show: the first and those indistinguishable from it."""
        return self.diagnoses[: self.alike]


@dataclass(frozen=True)
class Coarse(Generic[Q]):
    """The answer holds no wrong entry, but ``cells`` are written coarser than 2 decimals for a
    value that is not an integer: neither right nor wrong, nothing recorded; the answer is asked
    again (in entry mode only ``retry``, those cells)."""

    step: Q
    answer: Answered
    cells: tuple[Cell, ...]
    retry: tuple[Cell, ...] = ()


@dataclass(frozen=True)
class Hint(Generic[Q]):
    """Hint number ``level``: 1 is the ``formula``, 2 the ``work`` (one entry, ``cell``, or the
    quantity, worked out with the numbers); 3 and on: no more hints."""

    step: Q
    level: int
    formula: Text = ""
    cell: Cell | None = None
    work: str = ""


@dataclass(frozen=True)
class ShapeInfo(Generic[Q]):
    """Reveal the shape of the question's value, and how it follows from the inputs."""

    step: Q


@dataclass(frozen=True)
class Reveal(Generic[Q]):
    """Show the right answer (after ``show``); the question counts as missed."""

    step: Q


@dataclass(frozen=True)
class Skipped(Generic[Q]):
    """The question was skipped (not counted)."""

    step: Q


@dataclass(frozen=True)
class Help:
    """List the commands and the answer formats (of ``mode``)."""

    mode: Mode


Finished = Literal["correct", "shown", "skipped", "given"]  # how a question ended


@dataclass(frozen=True)
class Result(Generic[Q]):
    """How one question of the session ended: ``correct``, ``shown``, ``skipped``, ``given`` (not
    asked: before the question the session began at), or ``None`` when it was not finished --
    ``seen`` then says whether it was on screen when the session ended (``attempts`` and
    ``hints`` whether it was begun)."""

    step: Q
    outcome: Finished | None = None
    attempts: int = 0
    hints: int = 0
    diagnoses: tuple[str, ...] = ()
    seen: bool = False

    @property
    def status(self) -> str:
        """How it went, in words: ``right after 1 wrong, 1 hint``."""
        if self.outcome == "correct":
            text = t("practice.status.first") if self.attempts == 0 else t("practice.status.retry", wrong=self.attempts)
        elif self.outcome is not None:
            text = t(f"practice.status.{self.outcome}")
        elif self.attempts:
            text = t("practice.status.left", wrong=self.attempts)
        elif self.seen:
            text = t("practice.status.unanswered")  # on screen when the session ended, not answered
        else:
            text = t("practice.status.unreached")
        return plural("practice.status.with_hints", self.hints, status=text) if self.hints else text


@dataclass(frozen=True)
class Summary(Generic[Q]):
    """The session is over: one :class:`Result` per question, and why it ended."""

    results: tuple[Result[Q], ...]
    reason: Literal["done", "quit", "end", "interrupt"]

    def count(self, outcome: Finished) -> int:
        """How many questions ended so."""
        return sum(r.outcome == outcome for r in self.results)

    @property
    def asked(self) -> int:
        """How many questions were asked (not given)."""
        return len(self.results) - self.count("given")

    @property
    def first(self) -> int:
        """How many were right at the first try."""
        return sum(r.outcome == "correct" and r.attempts == 0 for r in self.results)


#: Every effect.  An :class:`~tutor.store.attempt.Attempt` asks the caller to save it in the progress store
#: (each answer, ``show`` and ``skip`` of a client that records); it is the very record the store writes.
Effect = (Opening | Prompt | Invalid | RowByRow | Correct | Wrong | Coarse | Hint | ShapeInfo | Reveal | Skipped
          | Help | Attempt | Summary)

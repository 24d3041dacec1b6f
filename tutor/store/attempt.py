"""One answered practice step: what the drill reports and the progress store keeps.

The drill (:mod:`tutor.practice`) emits an :class:`Attempt` among its effects
each time a step is answered, shown or skipped; the caller hands it to the
progress store (:mod:`tutor.store`), which writes it and reads it back.  Both
import this module and neither imports the other.  Pure data: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["OUTCOMES", "Attempt", "Outcome"]

#: How a step ended: answered right or wrong, revealed with ``show`` (a miss), or skipped (not counted).
Outcome = Literal["correct", "wrong", "shown", "skipped"]
OUTCOMES: tuple[Outcome, ...] = ("correct", "wrong", "shown", "skipped")


@dataclass(frozen=True)
class Attempt:
    """One answered step, as recorded: what was asked, how it went, what was typed.

    ``exercise`` is the exercise id (progress on fresh numbers drawn from an
    exercise is recorded under that exercise's id); ``step`` the step id
    (``q``, ``scores``, …) and ``head`` its 0-based head (``None`` for a layer
    step); ``attempt`` the 1-based try at that step in its session and
    ``hints`` the hints taken before it; ``diagnoses`` the keys of the mistakes a
    wrong answer showed, most specific first (misconceptions of
    :mod:`tutor.mistakes.diagnose`, or ``single_entry``): practice records
    one, the answer's mistake -- several mistakes that give the very same
    numbers there, which the answer cannot tell apart, are ONE mistake
    whose key joins theirs with ``+`` (:func:`tutor.mistakes.diagnose.event`;
    answers saved before kept each key apart); ``answer`` the text typed
    (``None`` for ``shown``/``skipped``); ``at`` when it was answered (ISO
    8601, UTC) -- ``None`` until the store's recorder stamps it; ``notes``
    the grading notes that explain it (``truncated_decimal``: see
    :mod:`tutor.answers.grading`); ``family`` the exercise's family
    (:attr:`tutor.exercise.record.Exercise.family`), which makes the answer a
    review of the skill (step, family) in the schedule (``None``: not scheduled).
    """

    exercise: str
    step: str
    head: int | None
    outcome: Outcome
    attempt: int = 1
    hints: int = 0
    diagnoses: tuple[str, ...] = ()
    answer: str | None = None
    at: str | None = None
    notes: tuple[str, ...] = ()
    family: str | None = None

    @property
    def diagnosis(self) -> str | None:
        """The key of the first diagnosis (``None`` when none matched)."""
        return self.diagnoses[0] if self.diagnoses else None


class OutcomeCounts:
    """What counts of answers by outcome say (mixed into the frozen records that hold
    ``correct``, ``wrong``, ``shown`` and ``skipped``: a step's in the store, a drill topic's)."""

    correct: int
    wrong: int
    shown: int
    skipped: int

    @property
    def graded(self) -> int:
        """Answers that count for accuracy: right, wrong, or revealed with ``show`` (a miss)."""
        return self.correct + self.wrong + self.shown

    @property
    def accuracy(self) -> float | None:
        """``correct / graded``; ``None`` when nothing was graded."""
        return self.correct / self.graded if self.graded else None

    @property
    def score(self) -> float:
        """Accuracy smoothed towards 1/2 (``(correct + 1) / (graded + 2)``): an
        unpractised step scores 0.5, below a step mostly right and above one mostly wrong."""
        return (self.correct + 1) / (self.graded + 2)

"""How the drill grades a typed answer: the one rule of :mod:`tutor.answers.grading`, entry by entry,
with ``practice``'s policy on coarse answers and the cells graded exactly (those a mask fixes)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from tutor.answers import judge, practice_verdict
from tutor.exact.numbers import Exact

from .effects import Answered, Cell


@dataclass(frozen=True)
class Graded:
    """A typed answer judged entry by entry (:func:`grade`).

    ``wrong``: the wrong cells (``None`` when the shape is not the question's);
    ``coarse``: the cells written coarser than 2 decimals for a value that is
    not an integer, whose claim holds the value ("give at least 2 decimals":
    neither right nor wrong); ``truncated``: wrong cells that are the value cut
    instead of rounded; ``rounded_away``: wrong cells that are the value rounded
    away from zero when its nearest is towards zero; ``inexact``: wrong cells written as an exact form
    within :data:`tutor.answers.grading.NEAR` of the value; ``blocked``: wrong
    cells graded exactly whose entry is within that of the right value.
    """

    wrong: tuple[Cell, ...] | None
    coarse: tuple[Cell, ...] = ()
    truncated: tuple[Cell, ...] = ()
    inexact: tuple[Cell, ...] = ()
    blocked: tuple[Cell, ...] = ()
    rounded_away: tuple[Cell, ...] = ()

    @property
    def right(self) -> bool:
        """Every entry right: the question is answered."""
        return self.wrong == () and not self.coarse


def grade(right: Sequence[Sequence[Exact]], answer: Answered, tolerance: float | None,
          strict: Collection[Cell] = frozenset()) -> Graded:
    """``answer`` judged against the exact values ``right`` (``[rows][cols]``) by the one rule
    (:func:`tutor.answers.judge`, with ``practice``'s policy :func:`tutor.answers.practice_verdict`);
    the ``strict`` cells must be exactly equal (a mask fixes them: :func:`tutor.steps.blocked_cells`)."""
    if (len(answer), len(answer[0])) != (len(right), len(right[0]) if right else 0):
        return Graded(None)
    wrong: list[Cell] = []
    coarse: list[Cell] = []
    truncated: list[Cell] = []
    away: list[Cell] = []
    inexact: list[Cell] = []
    blocked: list[Cell] = []
    for i, row in enumerate(answer):
        for j, e in enumerate(row):
            j_ = judge(e, right[i][j], tolerance=tolerance, strict=(i, j) in strict)
            verdict = practice_verdict(j_)
            if verdict == "coarse":
                coarse.append((i, j))
            elif verdict == "wrong":
                wrong.append((i, j))
                if j_.truncated:
                    truncated.append((i, j))
                elif j_.rounded_away:
                    away.append((i, j))
                if j_.near:
                    (blocked if (i, j) in strict else inexact).append((i, j))
    return Graded(tuple(wrong), tuple(coarse), tuple(truncated), tuple(inexact), tuple(blocked), tuple(away))

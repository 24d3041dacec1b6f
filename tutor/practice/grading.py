"""How the drill grades a typed matrix: the one rule of :mod:`tutor.answers.grading` entry by
entry, the cells a mask fixes exactly, and mistakes that look alike."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tutor.answers import judge, practice_verdict
from tutor.steps import Solution, Step, blocked_cells

from .effects import Answered, Cell

if TYPE_CHECKING:
    from tutor.mistakes.diagnose import Claim, Diagnosis


@dataclass(frozen=True)
class Graded:
    """A typed matrix judged entry by entry (:func:`grade`).

    ``wrong``: the wrong cells (``None`` when the shape is not the step's);
    ``coarse``: the cells written coarser than 2 decimals for a value that is
    not an integer, whose claim holds the value ("give at least 2 decimals":
    neither right nor wrong); ``truncated``: wrong cells that are the value cut
    instead of rounded; ``inexact``: wrong cells written as an exact form
    within :data:`tutor.answers.grading.NEAR` of the value; ``blocked``: wrong
    cells a mask fixes whose entry is within that of the right value;
    ``claim``: what the answer claims, entry by entry (for the diagnosis).
    """

    wrong: tuple[Cell, ...] | None
    coarse: tuple[Cell, ...]
    truncated: tuple[Cell, ...]
    inexact: tuple[Cell, ...]
    blocked: tuple[Cell, ...]
    claim: Claim

    @property
    def right(self) -> bool:
        """Every entry right: the step is answered."""
        return self.wrong == () and not self.coarse


def grade(sol: Solution, step: Step, answer: Answered, tolerance: float | None) -> Graded:
    """``answer`` judged by the one rule (:func:`tutor.answers.judge`, with ``practice``'s policy
    :func:`tutor.answers.practice_verdict`), the cells a mask fixes exactly (:func:`tutor.steps.blocked_cells`)."""
    import numpy as np

    from tutor.answers import claim as claim_of
    from tutor.mistakes.diagnose import Claim

    rows, cols = len(answer), len(answer[0])
    bounds = [[claim_of(e, tolerance=tolerance) for e in row] for row in answer]
    claim = Claim(np.array([[b[0] for b in row] for row in bounds], dtype=np.float64),  # [rows, cols]
                  np.array([[b[1] for b in row] for row in bounds], dtype=np.float64),  # [rows, cols]
                  tuple(tuple(e.text for e in row) for row in answer))
    if (rows, cols) != step.shape:
        return Graded(None, (), (), (), (), claim)
    strict = blocked_cells(sol, step)
    wrong: list[Cell] = []
    coarse: list[Cell] = []
    truncated: list[Cell] = []
    inexact: list[Cell] = []
    blocked: list[Cell] = []
    for i, row in enumerate(answer):
        for j, e in enumerate(row):
            j_ = judge(e, step.exact[i][j], tolerance=tolerance, strict=(i, j) in strict)
            verdict = practice_verdict(j_)
            if verdict == "coarse":
                coarse.append((i, j))
            elif verdict == "wrong":
                wrong.append((i, j))
                if j_.truncated:
                    truncated.append((i, j))
                if j_.near:
                    (blocked if (i, j) in strict else inexact).append((i, j))
    return Graded(tuple(wrong), tuple(coarse), tuple(truncated), tuple(inexact), tuple(blocked), claim)


def alike(sol: Solution, step: Step, diagnoses: Sequence[Diagnosis], limit: int = 3) -> int:
    """How many of the leading ``diagnoses`` recompute the same matrix as the first (at most ``limit``):
    mistakes that give the same numbers here, which the answer cannot tell apart."""
    if len(diagnoses) < 2:
        return len(diagnoses)
    import numpy as np

    from tutor.mistakes.diagnose import MISCONCEPTIONS

    recompute = {m.key: m.recompute for m in MISCONCEPTIONS}

    def value(d: Diagnosis) -> np.ndarray | None:
        """The step as the diagnosed mistake computes it: carried by the diagnosis, else recomputed."""
        if d.value is not None:
            return d.value
        return recompute[d.key](sol, step.id, step.head) if d.key in recompute else None

    first = value(diagnoses[0])  # [rows, cols] or None
    if first is None:
        return 1
    count = 1
    for d in diagnoses[1:]:
        if count == limit:
            break
        got = value(d)  # [rows, cols] or None
        if got is not None and got.shape == first.shape and bool(np.allclose(got, first, rtol=1e-9, atol=1e-12)):
            count += 1
    return count


"""How the drill grades a matrix entry: the cells a mask fixes exactly, and mistakes that look alike."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tutor.answers import Entry, close, equals_exactly
from tutor.exactnum import Exact
from tutor.steps import KINDS, Solution, Step

from .effects import Cell

if TYPE_CHECKING:
    from tutor.diagnose import Diagnosis


def blocked_cells(sol: Solution, step: Step) -> frozenset[Cell]:
    """The cells of ``step`` whose value a mask fixes exactly: the keys a query may not attend
    to, in the steps whose kind says what a mask fixes there (:attr:`tutor.steps.StepKind.fixed_by_mask`:
    ``masked`` ``-inf``, ``weights`` ``0``).  Every other step, and an exercise without a mask, has none.

    These entries are exact by construction, not computed, so no rounding
    tolerance applies to them: a weight of 0.0035 on a masked key is wrong.
    Other entries that come out exact (a weight of 1 on a query's only
    allowed key, whole-number products) are still graded with the tolerance:
    a decimal near them is an honest rounding of a computation.
    """
    allowed = sol.exercise.allowed()  # [L, L_k], True = may attend
    if allowed is None or KINDS[step.id].fixed_by_mask is None:
        return frozenset()
    return frozenset((i, j) for i, row in enumerate(allowed) for j, ok in enumerate(row) if not ok)


def right(entry: Entry, expected: float, true: Exact, strict: bool, tolerance: float) -> bool:
    """Whether ``entry`` is right for the true value ``true`` (``expected`` is its float): exactly
    equal for a ``strict`` (mask-fixed) cell -- ``1e-400`` is not the 0 a mask fixes, though its
    float is --, else :func:`tutor.answers.close` (an exact entry equal to ``true`` exactly)."""
    if strict:
        return equals_exactly(entry, true)
    return close(entry, expected, tolerance=tolerance, exact=true)


def alike(sol: Solution, step: Step, diagnoses: Sequence[Diagnosis], limit: int = 3) -> int:
    """How many of the leading ``diagnoses`` recompute the same matrix as the first (at most ``limit``):
    mistakes that give the same numbers here, which the answer cannot tell apart."""
    if len(diagnoses) < 2:
        return len(diagnoses)
    import numpy as np

    from tutor.diagnose import MISCONCEPTIONS

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


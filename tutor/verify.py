"""The two engines check each other: the exact solution against the NumPy core.

:func:`verify` runs the exercise through :class:`tutor.numeric.MultiHeadAttention`
(batched, fused, as production code does) and compares every step of the
exact :class:`tutor.steps.Solution` with it; ``explain`` refuses to print a
solution where they disagree.
"""

from __future__ import annotations

import numpy as np

from .errors import EngineMismatchError
from .messages import t
from .steps import KINDS, Solution

RTOL = 1e-9
ATOL = 1e-9


def _compare(sol: Solution, step_id: str, head: int | None, reference: np.ndarray) -> None:
    step = sol.step(step_id, head)  # type: ignore[arg-type]
    exact = np.array(step.value, dtype=np.float64)  # [rows, cols]
    if exact.shape != reference.shape:
        raise EngineMismatchError(t("verify.shape", step=step_id, head=head, exact=exact.shape, numeric=reference.shape))
    inf = np.isinf(exact)
    if not np.array_equal(inf, np.isinf(reference)):
        raise EngineMismatchError(t("verify.masked", step=step_id, head=head))
    if not np.allclose(exact[~inf], reference[~inf], rtol=RTOL, atol=ATOL):
        i, j = np.unravel_index(np.argmax(np.where(inf, 0, np.abs(exact - reference))), exact.shape)
        raise EngineMismatchError(t("verify.value", step=step_id, head=head, row=int(i), col=int(j),
                                    exact=float(exact[i, j]), numeric=float(reference[i, j])))


def verify(sol: Solution) -> None:
    """Check every step of ``sol`` against the NumPy core to ``1e-9`` (relative and absolute).

    Each step is read off the batched layer's run by its kind
    (:meth:`tutor.steps.StepKind.production`).  Raises
    :class:`tutor.errors.EngineMismatchError` naming the first step, head and
    entry where the engines disagree (a bug in one of them).
    """
    from . import numeric

    ex = sol.exercise
    run = numeric.run_exercise(ex)  # q, k, v [H, L, d]; scores, weights [H, L, L_k]; context [L, H·d_v]
    for step in sol.steps:
        _compare(sol, step.id, step.head, KINDS[step.id].production(run, ex, step.head))

"""The two engines check each other: the exact solution against the NumPy core.

:func:`verify` runs the exercise through :class:`tutor.numeric.MultiHeadAttention`
(batched, fused, as production code does) and compares every step of the
exact :class:`tutor.steps.Solution` with it; ``explain`` refuses to print a
solution where they disagree.  The comparison allows ``1e-9`` plus the
rounding error float64 can make on *this* exercise
(each step kind bounds it, :mod:`tutor.steps.rounding`): ~1e-15 for the
paper-sized exercises, so a wrong formula is caught, while an exercise the
format allows but float64 cannot resolve (scores of 1e24 a few units apart)
is not called a bug.
"""

from __future__ import annotations

import numpy as np

from ..base.errors import EngineMismatchError
from ..base.messages import Msg
from ..steps import KINDS, Solution, rounding_bounds
from .run import run_exercise

RTOL = 1e-9
ATOL = 1e-9
SAFETY = 8.0  # the rounding bounds are first-order; allow a margin for the orderings the NumPy core may use


def _compare(sol: Solution, step_id: str, head: int | None, reference: np.ndarray, bound: np.ndarray | float = 0.0) -> None:
    step = sol.step(step_id, head)
    exact = np.array(step.value, dtype=np.float64)  # [rows, cols]
    if exact.shape != reference.shape:
        raise EngineMismatchError(Msg("verify.shape", step=step_id, head=_one_based(head), exact=exact.shape, numeric=reference.shape))
    inf = np.isinf(exact)
    if not np.array_equal(inf, np.isinf(reference)):
        raise EngineMismatchError(Msg("verify.masked", step=step_id, head=_one_based(head)))
    allowed = ATOL + RTOL * np.abs(exact) + SAFETY * np.broadcast_to(bound, exact.shape)  # [rows, cols]
    with np.errstate(invalid="ignore"):  # -inf - -inf at a masked entry
        diff = np.where(inf, 0.0, np.abs(exact - reference))  # [rows, cols]
    if not np.all(diff <= np.where(inf, np.inf, allowed)):
        i, j = np.unravel_index(np.argmax(diff - allowed), exact.shape)
        raise EngineMismatchError(Msg("verify.value", step=step_id, head=_one_based(head), row=int(i) + 1, col=int(j) + 1,
                                    exact=float(exact[i, j]), numeric=float(reference[i, j])))


def verify(sol: Solution) -> None:
    """Check every step of ``sol`` against the NumPy core to ``1e-9`` (relative and absolute),
    plus the rounding error float64 can make on this exercise.

    Each step is read off the batched layer's run, and its rounding bounded,
    by its kind (:attr:`tutor.steps.StepKind.production`,
    :attr:`~tutor.steps.StepKind.rounding`); the backward pass's steps off the
    run's gradients.  Raises
    :class:`tutor.base.errors.EngineMismatchError` naming the first step, head and
    entry where the engines disagree (a bug in one of them).
    """
    ex = sol.exercise
    backward = any(KINDS[s.id].backward for s in sol.steps)
    run = run_exercise(ex, backward=backward)  # q, k, v [H, L, d]; scores, weights [H, L, L_k]; context [L, H·d_v]
    for step, bound in zip(sol.steps, rounding_bounds(sol).values()):
        _compare(sol, step.id, step.head, KINDS[step.id].production(run, ex, step.head), bound)


def _one_based(head: int | None) -> str:
    """A head as the sentences count them (from 1); ``-`` for a layer step."""
    return "-" if head is None else str(head + 1)

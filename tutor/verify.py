"""The two engines check each other: the exact solution against the NumPy core.

:func:`verify` runs the exercise through :class:`tutor.numeric.MultiHeadAttention`
(batched, fused, as production code does) and compares every step of the
exact :class:`tutor.steps.Solution` with it; ``explain`` refuses to print a
solution where they disagree.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import EngineMismatchError
from .messages import t
from .steps import Solution

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

    Raises :class:`tutor.errors.EngineMismatchError` naming the first step,
    head and entry where the engines disagree (a bug in one of them).
    """
    from .numeric import run_exercise

    ex = sol.exercise
    run = run_exercise(ex)  # q, k, v [H, L, d]; scores, weights [H, L, L_k]; context [L, H·d_v]
    allowed = ex.allowed()
    offset = 0
    for h, head in enumerate(ex.heads):
        _compare(sol, "q", h, run.q[h])
        _compare(sol, "k", h, run.k[h])
        _compare(sol, "v", h, run.v[h])
        scaled = run.scores[h]  # [L, L_k], already divided by √d_k
        _compare(sol, "scores", h, scaled * math.sqrt(head.d_k))
        _compare(sol, "scaled", h, scaled)
        if allowed is not None:
            _compare(sol, "masked", h, np.where(np.array(allowed, dtype=bool), scaled, -np.inf))
        _compare(sol, "weights", h, run.weights[h])
        _compare(sol, "head_output", h, run.context[:, offset:offset + head.d_v])
        offset += head.d_v
    if ex.num_heads > 1:
        _compare(sol, "concat", None, run.context)
    if ex.w_o is not None:
        _compare(sol, "output", None, run.output)

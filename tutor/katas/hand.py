"""Hand-sized cases: a bundled exercise's numbers, and the values the exact engine works out for them.

A kata's first cases are the numbers a learner has worked on paper with
``attn-tutor explain``: :func:`exercise` reads a bundled exercise, and
:func:`solved` gives every step of it exactly (:func:`tutor.steps.solve`)
as float64 arrays, so that a hand-sized case's expected values come from the
exact engine, not from the float reference the mistakes are recomputed with.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ..exercise.catalog import resolve_id
from ..exercise.record import Exercise, Matrix, Vector
from ..steps import Solution, solve
from .kata import Array

__all__ = ["array", "exercise", "solved", "step", "stacked"]


@cache
def exercise(id: str) -> Exercise:
    """The bundled exercise ``id``.  Raises :class:`tutor.base.errors.NotFoundError` if there is none."""
    return resolve_id(id)


@cache
def solved(id: str) -> Solution:
    """Every forward step of the bundled exercise ``id``, exactly."""
    return solve(exercise(id))


def array(m: Matrix | Vector | None) -> Array:
    """An exact matrix (or vector) as a float64 array (``None``: an empty one)."""
    return np.array([[float(x) for x in row] if isinstance(row, tuple) else float(row) for row in (m or ())],
                    dtype=np.float64)


def step(id: str, step_id: str, head: int | None = None) -> Array:
    """Step ``step_id`` of ``head`` of the bundled exercise ``id``, as float64 (``-inf`` for a masked score)."""
    return np.array(solved(id).step(step_id, head).value, dtype=np.float64)


def stacked(id: str, step_id: str) -> Array:
    """Step ``step_id`` of every head of the bundled exercise ``id``, stacked: ``[H, rows, cols]``."""
    return np.stack([step(id, step_id, h) for h in range(exercise(id).num_heads)])

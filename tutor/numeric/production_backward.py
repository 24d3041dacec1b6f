"""The backward steps read off the NumPy core's backward pass, and how far float64 rounding may move them.

``<id>_production(run, ex, head)`` reads step ``id`` off
:func:`tutor.numeric.backward.layer_backward` (the gradients batched over the
heads, as a framework computes them); ``<id>_rounding(r, head)`` bounds its
float64 error on this exercise: the inputs' bounds carried through the
step (its ``<id>_slack`` in :mod:`tutor.numeric.replay_backward`), plus the
step's own rounding, ``γ_n`` times the same expression with every input
replaced by its magnitude (Higham, "Accuracy and Stability of Numerical
Algorithms", 2nd ed., §3.1: a dot product of ``n`` terms is off by at most
``γ_n·|a|·|b|``).  Re-exported by :mod:`tutor.numeric.production`, where
the step catalogue finds them by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from . import replay_backward as rb

if TYPE_CHECKING:  # pragma: no cover
    from tutor.exercise.record import Exercise

    from .backward import LayerGrads
    from .layer import ExerciseRun
    from .replay import Replay

Array = NDArray[np.float64]
UNIT = float(np.finfo(np.float64).eps) / 2


def _grads(ex: Exercise) -> LayerGrads:
    from .backward import layer_backward

    return layer_backward(ex)


def _rounding(slack: Callable[[Replay, int | None], Array]) -> Callable[[Replay, int | None], Array]:
    def bound(r: Replay, head: int | None) -> Array:
        ex = r.ex
        n = ex.L + ex.L_k + ex.d_model + ex.d_out + 8
        g = n * UNIT / (1 - n * UNIT)
        assert r.slack is not None
        magnitudes = replace(r, slack={k: np.abs(v) for k, v in r.values.items()})
        with np.errstate(invalid="ignore"):
            own = np.nan_to_num(slack(magnitudes, head), nan=0.0, posinf=1e300)
        return np.nan_to_num(slack(r, head), nan=0.0) + 2 * g * own

    return bound


_IDS = ("d_output", "d_concat", "d_w_o", "d_b_o", "d_head_output", "d_weights", "d_scaled", "d_q", "d_k", "d_v",
        "d_w_q", "d_w_k", "d_w_v", "d_b_q", "d_b_k", "d_b_v", "d_x", "d_x_kv")
_LAYER = frozenset({"d_output", "d_concat", "d_w_o", "d_b_o", "d_x", "d_x_kv"})  # not stacked by head
_BIASES = frozenset({"d_b_o", "d_b_q", "d_b_k", "d_b_v"})  # vectors, read as [1, d]
_HEAD_COLUMNS = frozenset({"d_head_output"})  # a head's columns of d_concat


def _read(id: str, g: LayerGrads, ex: Exercise, h: int | None) -> Array:
    """Step ``id`` of head ``h`` off the layer's gradients."""
    if id in _HEAD_COLUMNS:
        offset = sum(hd.d_v for hd in ex.heads[:h])
        return g.d_concat[:, offset:offset + ex.heads[h or 0].d_v]  # [L, d_v]
    value = np.asarray(getattr(g, id))
    if id not in _LAYER:
        value = value[h]  # [H, ...] -> this head's
    return value.reshape(1, -1) if id in _BIASES else value


def _production(id: str) -> Callable[[ExerciseRun, Exercise, int | None], Array]:
    def read(run: ExerciseRun, ex: Exercise, head: int | None) -> Array:
        return np.asarray(_read(id, _grads(ex), ex, head), dtype=np.float64)

    return read


for _id in _IDS:
    globals()[f"{_id}_production"] = _production(_id)
    globals()[f"{_id}_rounding"] = _rounding(getattr(rb, f"{_id}_slack"))

__all__ = [name for name in dir() if name.startswith("d_")]

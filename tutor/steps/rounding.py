"""How far float64 rounding may move a step the batched layer computes: the bounds ``verify`` allows.

The exact engine is checked against the batched layer
(:func:`tutor.production.verify`): each kind reads its step off the layer's
run and bounds the float64 error of that reading on this exercise
(:attr:`tutor.steps.StepKind.rounding`), from the exact values of the steps
and the bounds of its inputs, in the order the catalogue walks them.

Float64 cannot represent every exercise the format allows to nine digits:
scores of 1e24 that differ by 1 are equal in float64, so its softmax gives
0.5 where the exact one gives 0.73.  The bounds are forward error bounds
carried through the steps from the magnitudes of the inputs (Higham,
"Accuracy and Stability of Numerical Algorithms", 2nd ed., §3.1 and §3.5,
``γ_n = n·u / (1 - n·u)`` for a dot product of length ``n``; for softmax, a
perturbation ``|δ| <= e`` of the scores of a row scales each weight by a
factor in ``[exp(-2e), exp(2e)]``).  For paper-sized exercises they are
~1e-15; a real disagreement (a wrong formula) is far above them.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
else:
    from ..base.lazy import numpy as np


if TYPE_CHECKING:
    Array = NDArray[np.float64]
UNIT = 2.0**-53  # u, the unit roundoff of float64: half its machine epsilon, 2^-52


def gamma(n: int) -> float:
    """``γ_n = n·u / (1 - n·u)``: the relative error bound of a float64 sum or dot product of ``n`` terms."""
    return n * UNIT / (1 - n * UNIT)


def magnitude(m: Sequence[Sequence[Fraction]] | Sequence[Fraction] | None, shape: tuple[int, ...] = ()) -> Array:
    """``|m|`` as float64 (a matrix ``[r, c]`` or a vector ``[c]``); zeros of ``shape`` for ``None``."""
    if m is None:
        return np.zeros(shape)
    return np.abs(np.array(m, dtype=object).astype(np.float64))

"""RMSNorm and LayerNorm without learned parameters, with the arguments of ``torch.nn.functional.rms_norm`` and
``layer_norm`` (PyTorch 2.13).

Both normalize over the last ``len(normalized_shape)`` axes: RMSNorm
``x / sqrt(mean(x²) + eps)`` (Zhang & Sennrich 2019, eq. 4), LayerNorm
``(x − mean(x)) / sqrt(var(x) + eps)`` with the population (biased) variance
(Ba et al. 2016, eq. 4).  ``eps`` is added inside the square root, as in
PyTorch.  One difference of defaults is deliberate and stated: PyTorch's
``rms_norm`` with ``eps=None`` uses ``torch.finfo(x.dtype).eps``; here
``eps`` is a number (an exercise's ``norm_eps``, 0 unless given).  Tested
against ``torch.nn.RMSNorm`` and ``torch.nn.LayerNorm(elementwise_affine=False)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._common import _float_dtype


def _axes(x: NDArray, normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise ValueError(f"normalized_shape {list(shape)} is not the trailing shape of an input of shape {list(x.shape)}")
    return tuple(range(x.ndim - len(shape), x.ndim))


def rms_norm(input: ArrayLike, normalized_shape: int | Sequence[int], eps: float = 0.0) -> NDArray:
    """``input / sqrt(mean(input², over the last axes) + eps)``: any shape ``[..., *normalized_shape]`` ->
    the same shape; float32/float64 kept (integers computed in float64).  Raises ``ValueError`` when
    ``normalized_shape`` is not the input's trailing shape.  Source: Zhang & Sennrich 2019, eq. 4 (gain 1)."""
    x = np.asarray(input)
    x = x.astype(_float_dtype(x.dtype), copy=False)
    axes = _axes(x, normalized_shape)
    ms = np.mean(x * x, axis=axes, keepdims=True)  # [..., 1, …]
    return x / np.sqrt(ms + x.dtype.type(eps))


def layer_norm(input: ArrayLike, normalized_shape: int | Sequence[int], eps: float = 1e-5) -> NDArray:
    """``(input − mean) / sqrt(var + eps)`` over the last axes, population variance: shapes and dtypes as
    :func:`rms_norm`; ``eps`` defaults to 1e-5 as in PyTorch.  Raises ``ValueError`` as :func:`rms_norm`.
    Source: Ba et al. 2016, eq. 4 (no gain, no bias)."""
    x = np.asarray(input)
    x = x.astype(_float_dtype(x.dtype), copy=False)
    axes = _axes(x, normalized_shape)
    centred = x - np.mean(x, axis=axes, keepdims=True)  # [...]
    var = np.mean(centred * centred, axis=axes, keepdims=True)  # [..., 1, …]
    return centred / np.sqrt(var + x.dtype.type(eps))

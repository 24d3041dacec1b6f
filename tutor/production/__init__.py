"""An exercise through the NumPy mirror, as production code runs it: the
batched, fused layer for format v1, a decoder's step for format v2 (grouped
K/V heads with ``enable_gqa``, a KV cache, one float ``attn_mask``), its
backward pass, the same forward as shapes with its masks spelled as PyTorch
takes them (the production view), and ``verify``, the exact engine checked
against the batched layer step by step.

The NumPy core (:mod:`tutor.numeric`) knows no exercise, as a framework's
layer knows no data pipeline; this package runs an exercise through it as
production code would: the batched, fused layer for format v1, a decoder's
step (grouped K/V heads with ``enable_gqa``, a KV cache, one float
``attn_mask``) for format v2, and the backward pass
(:mod:`.run`, :mod:`.backward`).  :mod:`.view` is the same forward as
shapes, with the notes that hold for the exercise, and :mod:`.masks` its
masks spelled as PyTorch takes them (what ``explain`` shows as the
production view).  :mod:`.verify` checks the exact engine against the
batched layer, step by step, each step read off the run and its float64
rounding bounded by its kind (:attr:`tutor.steps.StepKind.production`,
:attr:`~tutor.steps.StepKind.rounding`).
"""

from .backward import layer_backward, upstream
from .masks import TorchMask, pytorch_masks
from .run import layer_of, run_decoder, run_exercise
from .verify import verify
from .view import exercise_trace, production_view

__all__ = [
    "TorchMask",
    "exercise_trace",
    "layer_backward",
    "layer_of",
    "production_view",
    "pytorch_masks",
    "run_decoder",
    "run_exercise",
    "upstream",
    "verify",
]

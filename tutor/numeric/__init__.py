"""The NumPy mirror of PyTorch: ``scaled_dot_product_attention`` with
PyTorch's signature and semantics, the blocked path (an online softmax over
key blocks), the batched ``nn.MultiheadAttention`` layer, its masks, its
backward pass and the forward as shapes, each tested against PyTorch itself.
Like a framework's layer it knows no exercise.

Modules: :mod:`.functional` (softmax, the causal mask, and scaled dot-product
attention with PyTorch's signature), :mod:`.blocked` (the memory-bounded
online-softmax path), :mod:`.layer` (the batched multi-head layer with
``nn.MultiheadAttention``'s forward, and one run's intermediate arrays),
:mod:`.masks` (``nn.MultiheadAttention``'s mask polarity, checked and
converted), :mod:`.backward` (SDPA's gradients, a numerical gradient
check), :mod:`.trace` (the forward pass as shapes, for any configuration).
Like a framework's layer, it knows no exercise: running an exercise through
it is :mod:`tutor.production`'s.

What the hand calculation does one head and one token at a time, this module
does the way production code does it: batched tensors, one fused QKV
projection split into heads by ``reshape``/``transpose``, a boolean mask, a
stable softmax, ``weights @ V``, heads merged back, output projection.  The
tests check every function here against PyTorch 2.13 and against values
worked out by hand.

Sources
    * Scaled dot-product and multi-head attention: Vaswani et al. 2017,
      "Attention Is All You Need", eq. (1) and section 3.2.2.
    * Layouts, mask polarity, causal alignment, dropout scaling: the PyTorch
      docs of ``torch.nn.functional.scaled_dot_product_attention`` and
      ``torch.nn.MultiheadAttention``.
    * The blocked path (online softmax over key blocks): Dao 2023,
      "FlashAttention-2", Algorithm 1 (after Milakov & Gimelshein 2018).

Conventions
    * Row vectors, math convention: a projection is ``x @ W + b`` with ``W``
      of shape ``[d_in, d_out]`` (PyTorch's ``nn.Linear`` stores ``W.T``).
    * The public functions take PyTorch's arguments with PyTorch's meanings
      (PyTorch 2.13): :func:`scaled_dot_product_attention` those of
      ``torch.nn.functional.scaled_dot_product_attention`` (boolean
      ``attn_mask`` True = may attend, a float one added to the scores), and
      :meth:`MultiHeadAttention.forward` those of ``nn.MultiheadAttention``
      (boolean ``attn_mask`` True = blocked, ``key_padding_mask`` True =
      padding).  A mask that can only be meant in the other polarity is
      refused (the layer) or warned about (:class:`MaskPolarityWarning`).
      Inside, every boolean mask is True = may attend.  An exercise file's
      ``key_padding`` is True for a real key; its ``key_padding_mask`` is
      PyTorch's (True = padding).
    * A query row that may attend to no key gets zero weights and a zero
      context row.  ``F.scaled_dot_product_attention`` does the same since
      PyTorch 2.5; ``nn.MultiheadAttention`` returns NaN for such rows (output
      and weights) when ``need_weights=True`` or on its fast path, and
      ``out_proj.bias`` as the output row with ``need_weights=False`` off the
      fast path - which is what :class:`MultiHeadAttention` returns too.
    * float32 stays float32 and float64 stays float64; integer inputs are
      computed in float64.
"""


from __future__ import annotations

from ._common import MaskPolarityWarning
from .blocked import DEFAULT_BLOCK_SIZE
from .functional import attention_with_weights, blocked_attention, causal_mask, scaled_dot_product_attention, softmax
from .layer import LayerRun, MultiHeadAttention
from .trace import TraceStep

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "LayerRun",
    "MaskPolarityWarning",
    "MultiHeadAttention",
    "TraceStep",
    "attention_with_weights",
    "blocked_attention",
    "causal_mask",
    "scaled_dot_product_attention",
    "softmax",
]

"""The `backward` kata, PyTorch flavour: the gradients of scaled dot-product attention, worked out by hand.

Check it with:  attn-tutor code check THIS_FILE --watch
(the checker calls attention_backward under torch.no_grad(), with autograd switched off: loss.backward()
and torch.autograd.grad raise a RuntimeError that says so.  Work the gradients out with tensor operations;
autograd is what you would check them against.  This file is the PyTorch flavour because it imports
torch at its top level.)
"""

import math

import torch

KATA = "backward"


def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, d_out: torch.Tensor,
                       mask: torch.Tensor | None = None):
    """∂loss/∂q, ∂loss/∂k, ∂loss/∂v and ∂loss/∂S of attention, given ∂loss/∂out (Dao 2023, FlashAttention-2,
    Algorithm 2; `attn-tutor explain single-head-3x4 --backward` works them by hand).

    The forward pass:
      S    = q·kᵀ/√d    [B, H, L_q, L_k], -inf where the mask is False
      P    = softmax(S) along the keys (a query that may attend to no key: a row of zeros)
      out  = P·v        [B, H, L_q, d_v]
    Shapes:
      q         [B, H, L_q, d]
      k         [B, H, L_k, d]
      v         [B, H, L_k, d_v]
      d_out     [B, H, L_q, d_v]   ∂loss/∂out
      mask      bool tensor, broadcastable to [B, H, L_q, L_k]; True = the query (row) may attend to the
                key (column); None = every query attends to every key
    Returns (d_q, d_k, d_v, d_scores), in the inputs' dtype:
      d_q       [B, H, L_q, d]
      d_k       [B, H, L_k, d]
      d_v       [B, H, L_k, d_v]
      d_scores  [B, H, L_q, L_k]   ∂loss/∂S, the gradient of the scaled scores (before the 1/√d that d_q
                                   and d_k take); 0 where the mask is False
    """
    # TODO 1: the forward pass again: S (masked_fill), P = softmax(S, dim=-1) (a row with no key: zeros,
    #         not NaN)
    # TODO 2: d_v and dP = ∂loss/∂P from out = P·v (mind which factor is transposed)
    # TODO 3: d_scores from P = softmax(S): each weight depends on its whole row of scores
    # TODO 4: d_q and d_k from S = q·kᵀ/√d (mind the 1/√d, and which factor is transposed)
    raise NotImplementedError

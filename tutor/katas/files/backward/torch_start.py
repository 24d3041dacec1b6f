"""The `backward` kata in PyTorch: the gradients of scaled dot-product attention, worked out by hand.

Write attention_backward(q, k, v, d_out, mask=None) -> (d_q, d_k, d_v, d_scores), with tensors:

    q         [B, H, L_q, d]     queries
    k         [B, H, L_k, d]     keys
    v         [B, H, L_k, d_v]   values
    d_out     [B, H, L_q, d_v]   ∂loss/∂out, the gradient arriving from above
    mask      None, or a bool tensor broadcastable to [B, H, L_q, L_k]; True = the query may attend to the key

The forward pass it is the backward of:

    S   = q·kᵀ/√d   [B, H, L_q, L_k], -inf where the mask is False
    P   = softmax(S) along the keys (a query that may attend to no key: a row of zeros)
    out = P·v       [B, H, L_q, d_v]

Return, in the inputs' dtype (float32 or float64):

    d_q       [B, H, L_q, d]       ∂loss/∂q
    d_k       [B, H, L_k, d]       ∂loss/∂k
    d_v       [B, H, L_k, d_v]     ∂loss/∂v
    d_scores  [B, H, L_q, L_k]     ∂loss/∂S: the gradient of the scaled scores (before the 1/√d that d_q and
                                   d_k take); 0 where the mask is False

Work the gradients out yourself, with tensor operations: the checker calls your function under
torch.no_grad(), where loss.backward() and torch.autograd.grad raise ("element 0 of tensors does not
require grad and does not have a grad_fn").  Autograd is what you would check your answer against.
This file is the PyTorch flavour because it imports torch at its top level.  The formulas: Dao 2023,
FlashAttention-2, Algorithm 2; `attn-tutor explain single-head-3x4 --backward` works them by hand.
"""

import math  # noqa: F401 -- for your code

import torch

KATA = "backward"


def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, d_out: torch.Tensor,
                       mask: torch.Tensor | None = None):
    # 1. Recompute the forward pass: S (masked_fill(~mask, float("-inf"))) and P = softmax(S, dim=-1),
    #    with zeros for a query row whose keys are all masked (softmax gives NaN there).
    # 2. d_v from out = P·v (mind which factor is transposed, and its shape [B, H, L_k, d_v]).
    # 3. dP = ∂loss/∂P from out = P·v: [B, H, L_q, L_k].
    # 4. d_scores from P = softmax(S): each row's softmax mixes the whole row, so
    #    d_scores = P ∘ (dP − the row's Σ_j dP_j·P_j).
    # 5. d_q and d_k from S = q·kᵀ/√d (mind the 1/√d, and which factor is transposed).
    raise NotImplementedError

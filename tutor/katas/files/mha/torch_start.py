"""The `mha` kata, PyTorch flavour: the module the interview asks for.

Check it with:  attn-tutor code check THIS_FILE --watch
(the checker loads each case's weights into `qkv` and `out_proj`, calls
.eval() and runs forward under torch.no_grad()).
"""

import math

import torch
from torch import nn

KATA = "mha"


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention: softmax(Q Kᵀ / √d_k) V per head, heads concatenated, then W_O.

    Submodules (keep these names: the checker loads their weights):
      qkv       nn.Linear(d_model, 3 * d_model)   its output's last axis: Q's d_model, K's, V's;
                                                   head h takes h·d_k ... (h+1)·d_k - 1 of each
      out_proj  nn.Linear(d_model, d_model)
    forward(x, mask=None) -> (out, weights)
      x        [B, L, D]
      mask     bool, broadcastable to [B, H, L, L]; True = the query (row) may attend to the key
      out      [B, L, D]
      weights  [B, H, L, L]; a query that may attend to no key gets zero weights
    dropout applies to the weights in training only (the checker builds some cases with dropout=0.5
    and calls .eval()).
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        # TODO 1: head sizes; self.qkv and self.out_proj; dropout
        raise NotImplementedError

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        # TODO 2: qkv -> Q, K, V, each [B, H, L, d_k]
        # TODO 3: scores scaled by 1/√d_k, masked, softmax over the keys (no NaN on a row with no key)
        # TODO 4: context, heads merged to [B, L, D], out_proj
        raise NotImplementedError

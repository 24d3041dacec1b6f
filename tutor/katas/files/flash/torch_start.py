"""The `flash` kata, PyTorch flavour: FlashAttention-2's forward pass, the keys read in blocks (online softmax).

Check it with:  attn-tutor code check THIS_FILE --watch
(the checker calls flash_attention under torch.no_grad(); this file is the PyTorch flavour because it
imports torch at its top level).
"""

import math

import torch

KATA = "flash"


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_size: int):
    """softmax(q·kᵀ/√d)·v and each row's log-sum-exp, the keys walked in blocks (Dao 2023, FlashAttention-2,
    Algorithm 1; `attn-tutor explain single-head-3x4 --tiled` works it by hand, row by row).

    Walk the keys in blocks and never form the [L_q, L_k] scores (the checker measures memory in the NumPy
    flavour only, but that is the point); do not call scaled_dot_product_attention.

    Shapes:
      q           [B, H, L_q, d]
      k           [B, H, L_k, d]
      v           [B, H, L_k, d_v]
      block_size  keys (and values) per block, an int >= 1; the last block may be smaller
    Returns (out, lse):
      out         [B, H, L_q, d_v]   the same numbers as plain attention (no mask)
      lse         [B, H, L_q]        log Σ_j exp(s_j) of each query row's scaled scores s = q·kᵀ/√d
                                     (natural log)
    """
    # TODO 1: the running state of every query row: max m_i = -inf, sum l_i = 0 ([B, H, L_q]),
    #         accumulator acc = 0 ([B, H, L_q, d_v]); q.new_full / q.new_zeros keep q's dtype
    # TODO 2: for each block k[..., start:start + block_size, :] (and the same rows of v): its scores
    #         s [B, H, L_q, n], the new running max m_new = max(m_i, s.amax(dim=-1))
    # TODO 3: the rescale factor alpha = exp(m_i − m_new) (0 at the first block, where m_i = -inf);
    #         p = exp(s − m_new); l_i = alpha·l_i + p.sum(dim=-1); acc = alpha·acc + p·v_block; m_i = m_new
    # TODO 4: out = acc / l_i and lse = m_i + log(l_i)
    raise NotImplementedError

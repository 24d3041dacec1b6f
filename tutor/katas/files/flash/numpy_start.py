"""The `flash` kata, NumPy flavour: FlashAttention-2's forward pass, the keys read in blocks (online softmax).

Check it with:  attn-tutor code check THIS_FILE --watch
(one case has L_q = L_k = 2048 in blocks of 64: the most memory your code allocates there must stay
under a quarter of one [L_q, L_k] matrix, so never form the full scores).
"""

import math

import numpy as np

KATA = "flash"


def flash_attention(q, k, v, block_size):
    """softmax(q·kᵀ/√d)·v and each row's log-sum-exp, the keys walked in blocks (Dao 2023, FlashAttention-2,
    Algorithm 1; `attn-tutor explain single-head-3x4 --tiled` works it by hand, row by row).

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
    #         accumulator acc = 0 ([B, H, L_q, d_v])
    # TODO 2: for each block k[..., start:start + block_size, :] (and the same rows of v): its scores
    #         s [B, H, L_q, n], the new running max m_new = max(m_i, the block's row max)
    # TODO 3: the rescale factor alpha = exp(m_i − m_new) (0 at the first block, where m_i = -inf);
    #         p = exp(s − m_new); l_i = alpha·l_i + rowsum(p); acc = alpha·acc + p·v_block; m_i = m_new
    # TODO 4: out = acc / l_i and lse = m_i + log(l_i)
    raise NotImplementedError

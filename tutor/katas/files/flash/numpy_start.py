"""The `flash` kata in NumPy: FlashAttention-2's forward pass, the keys read in blocks with the online softmax.

Write flash_attention(q, k, v, block_size) -> (out, lse):

    q    [B, H, L_q, d]     queries
    k    [B, H, L_k, d]     keys
    v    [B, H, L_k, d_v]   values
    block_size              keys (and values) per block, an int >= 1; the last block may be smaller
    out  [B, H, L_q, d_v]   softmax(q·kᵀ/√d)·v, the same numbers as plain attention
    lse  [B, H, L_q]        log Σ_j exp(s_j) of each query row's scaled scores s = q·kᵀ/√d (natural log)

Never form the [L_q, L_k] scores: one case has L_q = L_k = 2048 and blocks of 64, and the most memory
your code allocates there must stay under a quarter of one [L_q, L_k] matrix.  No mask.  Return arrays
of the inputs' dtype (float32 or float64).  Use only NumPy and math.  The algorithm: Dao 2023,
FlashAttention-2, Algorithm 1; `attn-tutor explain single-head-3x4 --tiled` works it by hand, row by row.
"""

import math  # noqa: F401 -- for your code

import numpy as np  # noqa: F401 -- for your code

KATA = "flash"


def flash_attention(q, k, v, block_size):
    # 1. The running state of every query row: the max m_i = -inf, the sum l_i = 0 ([B, H, L_q])
    #    and the accumulator acc = 0 ([B, H, L_q, d_v]).
    # 2. For each block of keys k[..., start:start + block_size, :] (and the same rows of v):
    #    a. its scores s = q·k_blockᵀ/√d: [B, H, L_q, n];
    #    b. the new running max m_new = max(m_i, the max of s along its last axis);
    #    c. the rescale factor alpha = exp(m_i − m_new) (0 at the first block, where m_i = -inf);
    #    d. p = exp(s − m_new); l_i = alpha·l_i + the sum of p along its last axis;
    #       acc = alpha·acc + p·v_block; m_i = m_new.
    # 3. out = acc / l_i and lse = m_i + log(l_i).
    raise NotImplementedError

"""The `flash` kata in NumPy, right but not tiled (held back for the tests): it forms the [L_q, L_k] scores."""

import math

import numpy as np

KATA = "flash"


def flash_attention(q, k, v, block_size):
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])  # [B, H, L_q, L_k]: what the kata asks not to form
    m_i = s.max(axis=-1)
    e = np.exp(s - m_i[..., None])
    l_i = e.sum(axis=-1)
    return e @ v / l_i[..., None], m_i + np.log(l_i)

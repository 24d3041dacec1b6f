"""One decode step against a KV cache, in PyTorch: the reference solution with one bug (decode_top_left_torch), as a learner would write it."""

import torch

KATA = "kv-cache"


def decode_step(x_new, w_q, w_k, w_v, w_o, num_heads, k_cache, v_cache):
    B, T, D = x_new.shape
    d_k = D // num_heads

    def split(t):                                          # [B, T, D] -> [B, H, T, d_k]
        return t.view(B, T, num_heads, d_k).transpose(1, 2)

    q = split(x_new @ w_q.T)                               # only the new tokens are projected
    k = torch.cat([k_cache, split(x_new @ w_k.T)], dim=2)  # [B, H, P + T, d_k]: new rows appended
    v = torch.cat([v_cache, split(x_new @ w_v.T)], dim=2)
    context = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, H, T, d_k]
    context = context.transpose(1, 2).reshape(B, T, D)
    return context @ w_o.T, k, v

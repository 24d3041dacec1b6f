"""Held back for the tests: the `cross` PyTorch solution with one bug (weights_not_transposed): x @ w instead of F.linear(x, w)."""

import math

import torch

KATA = "cross"


def cross_attention(x, memory, w_q, w_k, w_v, w_o, num_heads, key_padding_mask=None):
    B, L_q, D = x.shape
    d_k = D // num_heads

    def heads(t):  # [B, L, D] -> [B, H, L, d_k]: head h takes features h·d_k … (h+1)·d_k - 1
        return t.view(B, t.size(1), num_heads, d_k).transpose(1, 2)

    q = heads(x @ w_q)       # the queries from the decoder (x @ w_q.T): [B, H, L_q, d_k]
    k = heads(memory @ w_k)  # the keys and values from the encoder: [B, H, L_k, d_k]
    v = heads(memory @ w_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # [B, H, L_q, L_k]
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))  # padding keys' columns
    weights = torch.softmax(scores, dim=-1)            # [B, H, L_q, L_k]
    weights = torch.nan_to_num(weights, nan=0.0)       # a member all padding: 0/0 -> zero weights
    context = (weights @ v).transpose(1, 2).reshape(B, L_q, D)  # heads side by side: [B, L_q, D]
    return context @ w_o, weights              # [B, L_q, D], [B, H, L_q, L_k]

"""`cross` 编程练习，PyTorch 版：多头交叉注意力（cross-attention），解码器的查询关注编码器的状态。

像这个文件一样在开头 import torch 的文件，会按 PyTorch 版检查。
"""

import math  # noqa: F401 -- math.sqrt

import torch  # noqa: F401

KATA = "cross"


def cross_attention(x, memory, w_q, w_k, w_v, w_o, num_heads, key_padding_mask=None):
    """多头注意力，Q 来自 x，K、V 来自 memory；没有偏置。

    x:      [B, L_q, D]  解码器的词元：即查询（一个张量）
    memory: [B, L_k, D]  编码器的状态：即键和值（L_k 可以不等于 L_q）
    w_q, w_k, w_v, w_o: 每个 [D, D]，采用 nn.Linear 的布局：y = t @ w.T（F.linear(t, w)）
    num_heads: H；d_k = D // H；第 h 个头取 Q、K、V 的第 h·d_k … (h+1)·d_k - 1 个特征
    key_padding_mask: torch.bool [B, L_k]，True = memory 的该位置是填充
                      （nn.MultiheadAttention 的极性）；或 None
    返回 (out [B, L_q, D], weights [B, H, L_q, L_k])：即 nn.MultiheadAttention(D, H, bias=False,
    batch_first=True) 以 (x, memory, memory) 和 average_attn_weights=False 调用时的返回值。
    """
    # TODO 1. Q = x @ w_q.T；K = memory @ w_k.T；V = memory @ w_v.T。
    # TODO 2. 拆分多头：[B, L, D] -> view(B, L, H, d_k) -> transpose(1, 2)：[B, H, L, d_k]。
    # TODO 3. scores = Q Kᵀ / √d_k：[B, H, L_q, L_k]。
    # TODO 4. 键填充：在填充键所在的列填入 -inf，[B, 1, 1, L_k]。
    # TODO 5. 在键上做 softmax（dim=-1）。
    # TODO 6. weights · V，再把各头合并回去：transpose(1, 2)，然后 reshape 为 [B, L_q, D]。
    # TODO 7. out = merged @ w_o.T；返回 (out, weights)。
    raise NotImplementedError

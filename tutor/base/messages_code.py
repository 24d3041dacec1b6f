"""The sentences of ``attn-tutor code`` (the katas), merged into :data:`tutor.base.messages.EN`.

Kept apart only to keep one catalogue file small enough to read; the keys
start with ``code.``.  ``code.mistake.<key>`` says what a learner's code did
and what to change, in their terms (a line of code where it helps).
"""

from __future__ import annotations

EN_CODE: dict[str, str] = {
    # --- commands -------------------------------------------------------------------
    "code.no_such_kata": "no kata '{kata}' (the katas: {katas})",
    # --- mha -------------------------------------------------------------------------
    # --- sdpa, masks, cross ------------------------------------------------------------
    # --- gqa, kv-cache ------------------------------------------------------------------
    # --- flash, backward ----------------------------------------------------------------
    "code.mistake.tiled_no_rescale_acc": (
        "When a block raised the running max, your accumulator kept the old max's scale: it was not multiplied "
        "by `alpha = exp(m_i - m_new)`.  Write `acc = alpha[..., None] * acc + p @ v_block` "
        "(PyTorch: `alpha.unsqueeze(-1) * acc + p @ v_block`)."),
    "code.mistake.tiled_no_rescale_l": (
        "When a block raised the running max, your running sum kept the old max's scale: it was not multiplied "
        "by `alpha = exp(m_i - m_new)`.  Write `l_i = alpha * l_i + p.sum(axis=-1)` (PyTorch: `p.sum(dim=-1)`)."),
    "code.mistake.tiled_alpha_inverted": (
        "Your rescale factor is inverted: `exp(m_new - m_i)` makes the old sums larger when a block raises the max, "
        "instead of smaller.  Write `alpha = np.exp(m_i - m_new)` (PyTorch: `torch.exp(m_i - m_new)`): at most 1, "
        "and 0 at the first block, where `m_i` is -inf."),
    "code.mistake.tiled_block_max": (
        "Your block's `p` is taken relative to the block's own max, while `l_i` and `acc` are relative to the "
        "running max: when a block's max is below the running max, the two scales differ.  Write "
        "`p = np.exp(s - m_new[..., None])` (PyTorch: `torch.exp(s - m_new.unsqueeze(-1))`)."),
    "code.mistake.tiled_block_softmax": (
        "Your code divided each block's `p` by the block's own sum (a softmax per block), so every block weighs "
        "the same whatever its scores, and `l_i` no longer sums the exponentials.  Keep `p = exp(s - m_new)` as it "
        "is: the one division is `out = acc / l_i` after the last block."),
    "code.mistake.tiled_divide_per_block": (
        "Your code divided the accumulator by `l_i` at every block, so the next block rescales and adds to an "
        "average as if it were a sum.  Keep `acc = alpha * acc + p @ v_block` a sum, and divide once after the "
        "last block: `out = acc / l_i[..., None]` (PyTorch: `acc / l_i.unsqueeze(-1)`)."),
    "code.mistake.tiled_no_final_divide": (
        "Your `out` is the accumulator itself: the sum of `exp(s - m_i)·v` was never normalised.  Divide once "
        "after the last block: `out = acc / l_i[..., None]` (PyTorch: `acc / l_i.unsqueeze(-1)`)."),
    "code.mistake.tiled_lse_no_m": (
        "Your `lse` is `log(l_i)` alone, but `l_i` sums `exp(s - m_i)`, relative to the running max: add the max "
        "back, `lse = m_i + np.log(l_i)` (PyTorch: `m_i + torch.log(l_i)`)."),
    "code.mistake.softmax_grad_elementwise": (
        "Your `d_scores` is `P * dP`, as if the softmax worked entry by entry; each weight depends on its whole "
        "row of scores, which adds a row term: `d_scores = P * (dP - (dP * P).sum(axis=-1, keepdims=True))` "
        "(PyTorch: `.sum(dim=-1, keepdim=True)`)."),
    "code.mistake.softmax_grad_diagonal": (
        "Your `d_scores` is `P * (1 - P) * dP`: only the diagonal of the softmax's Jacobian, as if each weight "
        "depended on its own score alone.  Each weight depends on its whole row: "
        "`d_scores = P * (dP - (dP * P).sum(axis=-1, keepdims=True))` (PyTorch: `.sum(dim=-1, keepdim=True)`)."),
    "code.mistake.softmax_grad_axis": (
        "Your row term `(dP * P).sum(...)` is summed over the queries (axis -2); the softmax runs along the keys, "
        "so sum along the last axis: `(dP * P).sum(axis=-1, keepdims=True)` (PyTorch: `.sum(dim=-1, keepdim=True)`)."),
    "code.mistake.grad_no_scale": (
        "Your `d_q` and `d_k` miss the `1/√d` of `S = q·kᵀ/√d`: write `d_q = d_scores @ k / math.sqrt(d)` and "
        "`d_k = d_scores.swapaxes(-1, -2) @ q / math.sqrt(d)` (PyTorch: `d_scores.transpose(-2, -1) @ q`)."),
    "code.mistake.d_scores_scaled": (
        "Your `d_scores` already has the `1/√d` in it: it is the gradient of `q·kᵀ`, not of the scaled scores `S`.  "
        "Return `d_scores` before the division, and divide only `d_q` and `d_k` by `math.sqrt(d)`."),
    "code.mistake.d_k_not_transposed": (
        "Your `d_k` is `d_scores @ q`, but `d_scores` has one row per query ([L_q, L_k]): transpose it to get one "
        "row per key, `d_k = d_scores.swapaxes(-1, -2) @ q / math.sqrt(d)` (PyTorch: `d_scores.transpose(-2, -1)`)."),
    "code.mistake.d_k_order": (
        "Your `d_k` is `q @ d_scoresᵀ`, its factors in the wrong order ([L_q, L_q], not one row per key).  Write "
        "`d_k = d_scores.swapaxes(-1, -2) @ q / math.sqrt(d)` (PyTorch: `d_scores.transpose(-2, -1) @ q`)."),
    "code.mistake.d_k_order_transposed": (
        "Your `d_k` is `qᵀ @ d_scores`: [d, L_k], the transpose of the gradient.  Write "
        "`d_k = d_scores.swapaxes(-1, -2) @ q / math.sqrt(d)` (PyTorch: `d_scores.transpose(-2, -1) @ q`), "
        "[L_k, d] like `k`."),
    "code.mistake.d_v_not_transposed": (
        "Your `d_v` is `P @ d_out`; from `out = P @ v` the gradient of `v` takes `P` transposed: "
        "`d_v = P.swapaxes(-1, -2) @ d_out` (PyTorch: `P.transpose(-2, -1) @ d_out`), [L_k, d_v] like `v`."),
    "code.mistake.masked_grad_leak": (
        "Your `d_scores` is not 0 where the mask is False: a masked weight is 0, so its gradient "
        "`P * (dP - row)` is 0 too.  Multiply by `P` everywhere: `d_scores = P * (dP - row)`."),
}

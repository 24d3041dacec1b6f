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
    "code.mistake.mask_upper": "Your causal mask keeps the wrong triangle: each query was given its own key and the keys after it (the future) instead of those before it. Keep key j ≤ i: `np.tril(np.ones((L_q, L_k), dtype=bool))` / `torch.ones(L_q, L_k, dtype=torch.bool).tril()` (True = may attend); `triu` is the other triangle.",
    "code.mistake.mask_diagonal": "Your causal mask also blocks the diagonal: each query lost its own key, and the first query, with no key before it, was left none at all. Keep key j ≤ i: `np.tril(np.ones((L_q, L_k), dtype=bool))` / `torch.ones(L_q, L_k, dtype=torch.bool).tril()` (`k=-1` / `diagonal=-1` would drop the diagonal).",
    "code.mistake.causal_ignored": "Your code left out the causal mask with `is_causal=True`: every query also saw the keys after it. When the flag is set, build it, `np.tril(np.ones((L_q, L_k), dtype=bool))` / `torch.ones(L_q, L_k, dtype=torch.bool).tril()` (True = may attend), and mask with it (AND it with any key padding).",
    "code.mistake.causal_always": "Your code applied the causal mask with `is_causal=False` too: read the flag (`if is_causal:` around the causal part); without it only the key padding blocks.",
    "code.mistake.padding_ignored": "Your masks leave out the key padding: every query may still attend the padding keys. Block their columns too: `allowed = causal & ~key_padding_mask[:, None, None, :]`.",
    "code.mistake.mask_or": "Your code combined the causal mask and the key padding with OR: a key passed when either allowed it, so the padding keys before a query and the real keys after it got through. A key is allowed only when both allow it: `allowed = causal & ~key_padding_mask[:, None, None, :]`.",
    "code.mistake.padding_polarity": "Your code read `key_padding_mask` as True = keep; it is True = padding (nn.MultiheadAttention's polarity), so the real keys were blocked and the padding attended. The real keys are `~key_padding_mask`.",
    "code.mistake.padding_rows": "Your code applied the key padding to the query rows (`key_padding_mask[:, None, :, None]`); it marks keys, so it blocks a padding key's column in every row: `key_padding_mask[:, None, None, :]`, [B, 1, 1, L_k]. A padding query's own row is still computed (the loss drops it later).",
    "code.mistake.allowed_inverted": "Your `allowed` is True where the query may not attend (the polarity of nn.MultiheadAttention's bool attn_mask); this kata's, like scaled_dot_product_attention's bool attn_mask, is True = may attend: return the complement (`~blocked`).",
    "code.mistake.additive_bool": "Your additive mask is the booleans cast to floats: 1.0 where the query may attend, 0.0 where it may not. Added to the scores it blocks nothing. Write 0.0 where allowed and -inf where not: `np.where(allowed, 0.0, -np.inf)` / `torch.zeros(B, 1, L, L).masked_fill(~allowed, float('-inf'))`.",
    "code.mistake.mask_large_negative": "Your additive mask holds {fill} where a query may not attend; the kata's convention, SDPA's float attn_mask, is -inf. For a query that may attend to some key the weights come out the same (exp underflows to 0); a query with no key at all (a left-padded prompt's padding rows) gets weights over the keys it may not attend instead of zeros: the same {fill}, added to its whole row, cancels in the softmax (and -1e9 in float32 swamps the scores: uniform weights). Write `np.where(allowed, 0.0, -np.inf)` / `masked_fill(~allowed, float('-inf'))`.",
    "code.mistake.mask_no_head_axis": "Your masks are [B, L, L]: the head axis is missing. The kata's are [B, 1, L, L]: axis 0 the batch, axis 1 the heads (size 1: one mask for every head), axis 2 the queries, axis 3 the keys. Broadcast against the scores [B, H, L, L], a [B, L, L] mask lines its batch axis up with the heads (an error when B ≠ H, the wrong member's mask when B = H): add the axis, `allowed[:, None]` / `allowed.unsqueeze(1)`.",
    "code.mistake.sources_swapped": "Your code took the queries from `memory` and the keys and values from `x`: the weights came out [B, H, L_k, L_q]. In cross-attention the decoder's tokens ask and the encoder's states answer: `q = x @ w_q.T`, `k = memory @ w_k.T`, `v = memory @ w_v.T`.",
    "code.mistake.kv_from_x": "Your code took the keys and values from `x` too: that is the decoder's self-attention. In cross-attention they come from the encoder's states, `k = memory @ w_k.T` and `v = memory @ w_v.T`, so the weights are [B, H, L_q, L_k], one column per memory position.",
    "code.mistake.weights_not_transposed": "Your code multiplied by the weights as given (`x @ w_q`); they are in nn.Linear's layout, [out_features, in_features], so a projection is `x @ w_q.T` (`F.linear(x, w_q)` in PyTorch), and the same for w_k, w_v and w_o.",
    # --- gqa, kv-cache ------------------------------------------------------------------
    # --- flash, backward ----------------------------------------------------------------
}

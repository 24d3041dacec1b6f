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
    # gqa
    "code.mistake.kv_tile_order": "Your code paired the query heads with the K/V heads in tile order [A, B, A, B] (`np.tile`, torch's `k.repeat(1, H // G, 1, 1)`, or K/V head `h % G` for query head h); query head h reads K/V head `h // (H // G)`, the order [A, A, B, B] of `enable_gqa=True`: expand with `np.repeat(k, H // G, axis=1)` / `k.repeat_interleave(H // G, dim=1)` (the same for v).",
    "code.mistake.weights_per_kv_head": "Your code returned the weights one per K/V head, [B, G, L, L]; each query head has its own q, so its own scores and weights: return them per query head, [B, H, L, L], computed after k is expanded to the H query heads.",
    "code.mistake.mask_upper": "Your causal mask is on the wrong triangle: each query sees itself and the keys after it, not those before. Keep the keys j ≤ i: `np.tril(np.ones((L, L), dtype=bool))` / `torch.ones(L, L, dtype=torch.bool).tril()` marks the keys a query may attend to.",
    "code.mistake.mask_diagonal": "Your causal mask also blocks each query's own key (it keeps only j < i), so the first query has no key left; keep the diagonal: `np.tril(ones)` / `ones.tril()` with the default `k=0` / `diagonal=0` marks the keys to keep, `np.triu(ones, k=1)` / `ones.triu(diagonal=1)` the keys to block.",
    # shared with other katas (mha, sdpa): the lead keeps one copy of each
    "code.mistake.no_scaling": "Your code did not divide the scores by √d_k; write `scores = q @ k.swapaxes(-1, -2) / math.sqrt(d_k)` (PyTorch: `k.transpose(-2, -1)`), d_k the size of q's last axis.",
    "code.mistake.kq_transposed": "Your code computed the scores as K·Qᵀ, so rows are keys and columns queries; compute `q @ k.swapaxes(-1, -2)` (PyTorch: `q @ k.transpose(-2, -1)`): one row per query, one column per key.",
    "code.mistake.softmax_columns": "Your code took the softmax over the queries' axis (`axis=-2` / `dim=-2`), so each key's column sums to 1; take it over the keys, the last axis (`axis=-1` / `dim=-1`), so that each query's row sums to 1.",
    "code.mistake.times_k": "Your code multiplied the weights by K instead of V; the output is `weights @ v`.",
    "code.mistake.no_mask": "Your code applied no mask, so every query attends to every key, later ones too; before the softmax, fill the scores the mask blocks with -inf: `np.where(allowed, scores, -np.inf)` / `scores.masked_fill(~allowed, float(\"-inf\"))`.",
    "code.mistake.mask_inverted": "Your code blocked the keys the mask allows and kept the ones it blocks; with True = may attend, fill the scores where the mask is False: `np.where(allowed, scores, -np.inf)` / `scores.masked_fill(~allowed, float(\"-inf\"))`.",
    "code.mistake.heads_split_reshape": "Your code split the heads with a plain reshape, [B, L, D] -> [B, H, L, d_k], which mixes positions and heads; reshape to [B, L, H, d_k], then swap the middle axes: `t.reshape(B, L, H, d_k).transpose(0, 2, 1, 3)` / `t.view(B, L, H, d_k).transpose(1, 2)`.",
    "code.mistake.heads_merge_reshape": "Your code merged the heads with a plain reshape, [B, H, L, d_k] -> [B, L, D], which mixes positions and heads; swap the axes back first: `t.transpose(0, 2, 1, 3).reshape(B, L, D)` / `t.transpose(1, 2).reshape(B, L, D)`.",
    "code.mistake.no_out_proj": "Your code returned the merged heads without the output projection; multiply them by W_O as the other projections are (`context @ w_o.T` in nn.Linear's layout, plus the bias when there is one).",
    # kv-cache
    "code.mistake.decode_top_left": "Your code aligned the causal mask top-left (`tril(ones(T, P + T))`, or `is_causal=True`), so new token i sees keys 0 … i only, with a cache not even its own; new token i sits at position P + i: keep the keys j ≤ P + i, `np.tril(np.ones((T, P + T), dtype=bool), k=P)` / `torch.ones(T, P + T, dtype=torch.bool).tril(diagonal=P)` (torch's `causal_lower_right`).",
    "code.mistake.cache_not_appended": "Your code attended over the cache alone and returned it unchanged: the new tokens' keys and values were never appended, so no new token sees itself. Append them after the cached rows, `np.concatenate([k_cache, k_new], axis=2)` / `torch.cat([k_cache, k_new], dim=2)` (the same for v), attend over those and return them.",
    "code.mistake.cache_reprojected": "Your code multiplied the cached rows by w_k and w_v again, as if the cache held the earlier tokens' inputs; it holds their keys and values, already projected and split into heads: project only x_new and append its rows to the cache as it is.",
    "code.mistake.cache_prepended": "Your code put the new tokens' keys and values before the cached rows, so key j is no longer token j and the mask j ≤ P + i keeps the wrong keys; append them after the cache: `np.concatenate([k_cache, k_new], axis=2)` / `torch.cat([k_cache, k_new], dim=2)`.",
    "code.mistake.cache_kv_swapped": "Your code used the values' cache as keys and the keys' cache as values (the two read the wrong way round); append k_new to `k_cache` and v_new to `v_cache`, in the signature's order: `decode_step(x_new, w_q, w_k, w_v, w_o, num_heads, k_cache, v_cache)`.",
    "code.mistake.cache_returned_swapped": "Your code returned the two caches in the wrong order; return `(out, k_cache, v_cache)`, the keys' cache first.",
    # --- flash, backward ----------------------------------------------------------------
}

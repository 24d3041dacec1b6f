"""The sentences of ``attn-tutor code`` (the katas), merged into :data:`tutor.base.messages.EN`.

Kept apart only to keep one catalogue file small enough to read; the keys
start with ``code.``.  ``code.mistake.<key>`` says what a learner's code did
and what to change, in their terms (a line of code where it helps).
"""

from __future__ import annotations

EN_CODE: dict[str, str] = {
    # --- commands -------------------------------------------------------------------
    "code.no_such_kata": "no kata '{kata}' (the katas: {katas})",
    "cli.code.help": "Write attention as code: katas that run your own implementation (NumPy or PyTorch) and name the bug",
    "cli.code.kata": "the kata: mha, sdpa, masks, cross, gqa, kv-cache, flash or backward (`attn-tutor code list`)",
    "cli.code.torch": "the PyTorch flavour (default: NumPy)",
    "cli.code.force": "overwrite the file / show the solution before the kata has passed",
    "cli.code.output": "the file to write (default: KATA.py, or KATA_torch.py with --torch, in this folder)",
    "cli.code.list.help": "List the katas, done (passed at least once) or pending",
    "cli.code.start.help": "Write a kata's skeleton: the signature, every shape and convention, TODOs (never overwrites without --force)",
    "cli.code.show.help": "Show a kata's reference solution (once the kata has passed, or with --force)",
    "cli.code.check.help": "Run YOUR file on the kata's cases, in a child process with limits (the one place attn-tutor runs code: the file named here), and name the mistake of any case it fails. Exit code 0: every case passed; 1: a case failed; 2: the file cannot be run as the kata",
    "cli.code.file": "your Python file (it defines the kata's function, or its PyTorch class)",
    "cli.code.kata_opt": "the kata (default: the file's module-level KATA = \"...\")",
    "cli.code.python": "the Python interpreter to run your file with (default: the one running attn-tutor); e.g. one that has torch",
    "cli.code.watch": "check again each time the file is saved; Ctrl-C ends with a summary",
    "cli.code.time_limit": "seconds each case may run before it is stopped as a hang",
    "code.kata.mha": "the multi-head attention module: QKV projection, heads, scaled dot-product attention, W_O",
    "code.kata.sdpa": "scaled dot-product attention with a boolean mask and is_causal, returning out and weights",
    "code.kata.masks": "the causal + key-padding mask, boolean and additive",
    "code.kata.cross": "cross-attention: queries from x, keys and values from memory (L_q ≠ L_k)",
    "code.kata.gqa": "grouped K/V heads (num_kv_heads): repeat_interleave, not repeat",
    "code.kata.kv-cache": "one decode step: append to the KV cache, causal mask aligned bottom-right",
    "code.kata.flash": "FlashAttention's online softmax over key blocks, never forming [L_q, L_k]",
    "code.kata.backward": "the backward pass by hand: d_Q, d_K, d_V and the softmax's gradient",
    "code.list.done": "done",
    "code.list.pending": "pending",
    "code.list.review": "review due",
    "code.list.next": "Start one: attn-tutor code start KATA [--torch], then attn-tutor code check KATA.py --watch",
    "code.start.written": "wrote {file}: the {kata} kata's skeleton. Fill in the TODOs, then run: attn-tutor code check {file} --watch",
    "code.show.locked": "the {kata} kata has not passed yet: solve it first (attn-tutor code check FILE), or add --force to see the reference solution now",
    "code.unsaved": "the result is not saved in the progress store: {reason}",
    "code.file.missing": "{file}: no such file",
    "code.file.not_file": "{file}: not a file",
    "code.file.unreadable": "{file}: cannot read it: {reason}",
    "code.file.no_kata": "{file} names no kata: add a line KATA = \"mha\" at its top, or pass --kata (the katas: {katas})",
    "code.file.syntax": "{file}, line {line}, column {col}: not valid Python: {message}: {text}",
    "code.file.missing_name": "{file} defines neither {numpy} (NumPy) nor class {torch} (PyTorch), which the {kata} kata calls; it defines: {defined}",
    "code.file.load_error": "{file} raised while it was imported: {exception}",
    "code.file.load_hang": "{file} did not finish importing within {seconds} seconds: stopped",
    "code.file.load_crash": "the Python running {file} died while importing it (exit code {code})",
    "code.file.no_python": "cannot start the Python interpreter {python}: {reason}",
    "code.flavour.numpy": "NumPy",
    "code.flavour.torch": "PyTorch",
    "code.check.title": "{file}: the {kata} kata, {flavour} flavour",
    "code.wrong_entries": "{name}: {n} of {total} entries wrong",
    "code.yours_marked": "{name}, yours (* = wrong):",
    "code.expected_here": "expected:",
    "code.mistake_line": "mistake: {message}",
    "code.same_as_above": "the same mistake as above",
    "code.one_of": "each of these mistakes gives your numbers:",
    "code.hang": "case {case} ran past its time limit: stopped (an endless loop? a wait on input?); the cases after it were not run",
    "code.crash": "the Python running your file died during case {case} (exit code {code}: out of memory, or killed); the cases after it were not run",
    "code.printed.stdout": "your program printed (standard output):",
    "code.printed.stderr": "your program wrote on standard error:",
    "code.more_lines": "… and {n} more lines",
    "code.passed": "PASS: all {n:cases} passed.",
    "code.failed": "FAIL: {passed} of {n:cases} passed.",
    "code.follow_ups": "An interviewer would ask next:",
    "code.follow_up.drill": "attn-tutor drill concepts --topic {topic}",
    "code.watch.checking": "--- checking {file}",
    "code.watch.waiting": "--- waiting for {file} to change (Ctrl-C ends the watch)",
    "code.watch.summary": "watch ended: {checks} checks, {passes} passed; the last one {last}",
    "code.watch.last_passed": "passed",
    "code.watch.last_failed": "did not pass",
    "count.cases.one": "{count} case",
    "count.cases.other": "{count} cases",
    # --- the verdict on a case ---------------------------------------------------------
    "code.exception": "your code raised {exception}",
    "code.output_count": "return {n:values} ({names}); yours returned {found:values}",
    "code.output_type": "{name} should be an array {shape}; yours returned {found}",
    "code.shape": "{name} should be {expected}; yours is {found}.",
    "code.unknown": "no mistake this tool knows gives these numbers: {name}{index} should be {expected}, yours is {found} ({n:entries} of {name} wrong)",
    "code.two_mistakes": "two mistakes at once: {first} And: {second}",
    "code.memory": "your code allocated {peak} at most on this case; a full [L_q, L_k] matrix of scores is {full}: the online softmax never forms it (walk the keys in blocks of block_size)",
    # --- mha -------------------------------------------------------------------------
    "code.mistake.no_scaling": "the scores are not scaled: divide them by √d_k, `scores = q @ k.T / math.sqrt(d_k)` (d_k = D / num_heads, the size of one head)",
    "code.mistake.scale_sqrt_d_model": "the scores are divided by √d_model; the scale is the size of one head: `/ math.sqrt(d_k)` with `d_k = D // num_heads`",
    "code.mistake.scale_d_k": "the scores are divided by d_k; divide by its square root: `/ math.sqrt(d_k)`",
    "code.mistake.kq_transposed": "the scores are K·Qᵀ, each query's scores in a column; compute `q @ k.transpose(-2, -1)` (NumPy: `q @ k.swapaxes(-1, -2)`): row i is query i",
    "code.mistake.softmax_columns": "the softmax runs over the queries' axis; normalise each query's row of scores over the keys: `softmax(scores, dim=-1)` (NumPy: `axis=-1`)",
    "code.mistake.times_k": "the weights multiply K; the output is the weights times V: `out = weights @ v`",
    "code.mistake.qkv_order": "Q, K and V are taken from the fused projection in the order {order}; qkv_weight's rows are Q's, then K's, then V's: `q, k, v = qkv.reshape(B, L, 3, H, d_k)` split on axis 2 in that order",
    "code.mistake.qkv_interleaved": "the fused projection is read head by head (`view(B, L, H, 3, d_k)`); its rows are Q's, K's, V's, each split into heads: `view(B, L, 3, H, d_k)`",
    "code.mistake.heads_split_reshape": "the heads are split by a plain reshape of [B, L, D] to [B, H, L, d_k], which mixes tokens and heads; reshape to [B, L, H, d_k], then swap the axes: `q.view(B, L, H, d_k).transpose(1, 2)` (NumPy: `.reshape(B, L, H, d_k).transpose(0, 2, 1, 3)`)",
    "code.mistake.heads_merge_reshape": "the heads are merged by a plain reshape of [B, H, L, d_k] to [B, L, D], which mixes tokens and heads; swap the axes back first: `context.transpose(1, 2).reshape(B, L, D)` (NumPy: `.transpose(0, 2, 1, 3).reshape(B, L, D)`)",
    "code.mistake.mask_inverted": "the mask's polarity is inverted: True means the query may attend to that key; block where it is False: `scores.masked_fill(~mask, float('-inf'))` (NumPy: `np.where(mask, scores, -np.inf)`)",
    "code.mistake.mask_added": "the boolean mask is added to the scores as numbers (+1 where allowed, +0 where not), which blocks nothing; fill the blocked scores with -inf: `scores.masked_fill(~mask, float('-inf'))`",
    "code.mistake.no_mask": "the mask is not applied; block the scores where it is False before the softmax",
    "code.mistake.mask_after_softmax": "the blocked weights are zeroed after the softmax, so the allowed ones no longer sum to 1; mask the scores before the softmax",
    "code.mistake.empty_row_nan": "a query that may attend to no key gets NaN weights: its scores are all -inf and the softmax divides 0 by 0; give that row zero weights (e.g. `torch.nan_to_num(weights)`, or divide only where the row's sum is above 0)",
    "code.mistake.empty_row_uniform": "a query that may attend to no key gets equal weights on every key: a large finite fill (-1e9, finfo.min) makes its row uniform; the kata's convention is zero weights there (zero the row after the softmax)",
    "code.mistake.heads_averaged": "the weights are returned averaged over the heads; return every head's, [B, H, L, L] (nn.MultiheadAttention averages unless average_attn_weights=False)",
    "code.mistake.no_out_proj": "the output projection is missing: the concatenated heads go through out_proj, `out = context @ out_weight.T + out_bias` (PyTorch: `self.out_proj(context)`)",
    "code.mistake.no_out_bias": "the output projection's bias is missing: `out = context @ out_weight.T + out_bias`",
    "code.mistake.dropout_in_eval": "dropout is still on after .eval(): the same numbers pass without dropout. Use an `nn.Dropout` module (off in eval), or `F.dropout(weights, p, training=self.training)`; `F.dropout`'s `training` defaults to True",
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

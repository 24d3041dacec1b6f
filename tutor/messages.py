"""Every user-facing sentence, in one catalogue.

Code asks for text by key: ``t("schema.required")``; templates use
``str.format`` fields.  A translation is another dict with the same keys,
registered in :data:`CATALOGS` and chosen with ``ATTN_TUTOR_LANG``; a key a
translation lacks falls back to English.  Notation (``Q K^T``, shapes,
numbers) is not wording and is not translated.
"""

from __future__ import annotations

import os

EN: dict[str, str] = {
    # --- files and YAML ------------------------------------------------------
    "file.unreadable": "cannot read the file: {reason}",
    "file.not_utf8": "the file is not UTF-8 text (byte {offset})",
    "file.too_large": "the file is {size} bytes; the limit is {limit}",
    "yaml.syntax": "not valid YAML: {problem}",
    "yaml.tab": "a tab character where YAML expects spaces",
    "yaml.tab.hint": "indent with spaces; YAML does not allow tabs there",
    "yaml.empty": "the file is empty",
    "yaml.empty.hint": "an exercise needs at least id, title, x and the weights",
    "yaml.duplicate_key": "duplicate key '{key}' (first given at line {first})",
    "yaml.duplicate_key.hint": "keep one of them; YAML keeps only the last, silently",
    "yaml.merge_key": "merge keys (<<) are not supported",
    "yaml.merge_key.hint": "reuse a whole value with an alias instead, e.g. w_k: *w_q",
    "yaml.alias_expansion": "aliases expand to more than {limit} values",
    "yaml.alias_expansion.hint": "the file is refused before it is read in full",
    "yaml.recursive_alias": "an alias refers to the value that contains it",
    "yaml.tag": "expected a plain value, found the YAML tag {tag}",
    "yaml.tag.hint": "remove the tag; values are read by the rules of the format",
    "yaml.key_type": "expected a plain key, found {found}",
    "yaml.top_level": "expected a mapping of fields at the top level, found {found}",
    # --- schema --------------------------------------------------------------
    "schema.required": "required field is missing",
    "schema.unknown": "unknown field",
    "schema.unknown.hint": "did you mean '{suggestion}'?",
    "schema.unknown.hint.none": "see `attn-tutor schema` for the fields",
    "schema.expected": "expected {expected}, found {found}",
    "schema.empty": "expected at least one {item}, found an empty list",
    "expected.list": "a list",
    "expected.matrix": "a matrix (a list of rows)",
    "expected.row": "a row (a list of numbers)",
    "expected.mapping": "a mapping of fields",
    "expected.text": "text",
    "expected.integer": "a whole number",
    "expected.number": "a number (integer, decimal, or a fraction such as \"1/3\")",
    "expected.boolean": "true or false",
    "expected.mask": "none, causal, or a matrix of true/false",
    "expected.slug": "an id of lowercase letters, digits and '-', starting with a letter or digit",
    "expected.difficulty": "a whole number from 1 to 5",
    "expected.positive": "a whole number of at least 1",
    "found.null": "nothing (null)",
    "found.bool": "the boolean {value}",
    "found.number": "the number {value}",
    "found.text": "the text {value!r}",
    "found.list": "a list",
    "found.mapping": "a mapping",
    "hint.yaml11_bool": "{text} is text in YAML 1.2 (YAML 1.1 read it as a boolean); write a number",
    "hint.yaml11_flag": "{text} is text in YAML 1.2 (YAML 1.1 read it as a boolean); write true or false",
    "hint.base60": "YAML 1.1 read 1:20 as base 60; write the number itself",
    "hint.radix": "hexadecimal and octal numbers are not allowed in a matrix",
    "hint.not_finite": "only finite numbers are allowed",
    "hint.too_long": "an entry may have at most {limit} characters",
    "hint.exponent": "exponents are limited to ±{limit}",
    "hint.div_zero": "a fraction cannot divide by zero",
    "hint.quote_fraction": "write fractions as text, e.g. \"1/3\"",
    # --- shapes and forms ----------------------------------------------------
    "form.both": "give either 'heads' (per-head form) or 'num_heads' with w_q, w_k, w_v (fused form), not both",
    "form.neither": "no weights: give 'heads' (per-head form) or 'num_heads' with w_q, w_k, w_v (fused form)",
    "form.fused_missing": "the fused form needs {field}",
    "form.fused_only": "{field} belongs to the fused form; in the per-head form put b_q/b_k/b_v inside each head",
    "form.needs_fused": "{field} needs the fused form (num_heads with w_q, w_k, w_v)",
    "form.b_o_alone": "b_o is the bias of the output projection, but there is no w_o",
    "form.kv_tokens": "kv_tokens labels the rows of x_kv, but there is no x_kv",
    "shape.ragged": "row {row} has {found} entries but row 1 has {expected}",
    "shape.rows": "{field} has {found} rows but {other} has {expected} columns ({name})",
    "shape.len": "{field} has {found} entries but {expected_what} is {expected}",
    "shape.divisible": "{field} has {found} columns, which num_heads = {heads} does not divide",
    "shape.head_dims": "{what} is {found} in this head but {expected} in head 0; every head must have the same {what}",
    "shape.w_o_rows": "w_o has {found} rows but the heads concatenate to {expected} columns (num_heads·d_v)",
    "shape.mask": "mask is {found} but must be [L × L_k] = [{L} × {L_k}]",
    "limit": "{what} is {found}, above the limit of {limit}",
    # --- catalogue -----------------------------------------------------------
    "catalog.not_found": "no exercise '{name}': not a bundled id, nor a file",
    "catalog.not_found.hint": "run `attn-tutor list` to see the ids",
    "catalog.duplicate_id": "exercise id '{id}' is defined twice: {first} and {second}",
    # --- steps ---------------------------------------------------------------
    "step.q.title": "Queries Q",
    "step.k.title": "Keys K",
    "step.v.title": "Values V",
    "step.scores.title": "Scores Q·Kᵀ",
    "step.scaled.title": "Scaled scores",
    "step.masked.title": "Masked scores",
    "step.weights.title": "Attention weights (row-wise softmax)",
    "step.head_output.title": "Head output",
    "step.concat.title": "Concatenate the heads",
    "step.output.title": "Output projection",
    "step.q.why": "Each token asks a question: its row of Q is what it looks for in the other tokens.",
    "step.k.why": "Each token advertises what it offers: a query matches a key through their dot product.",
    "step.v.why": "What a token passes on when it is attended to; kept separate from K so that how much a token matters and what it contributes are learned apart.",
    "step.k.why.cross": "In cross-attention K and V come from the other sequence (x_kv): the queries look into it.",
    "step.scores.why": "Entry (i, j) is the dot product q_i·k_j: how well query i matches key j. Rows are queries, columns are keys.",
    "step.scaled.why": "If the entries of q and k have variance 1, q·k has variance d_k; dividing by sqrt(d_k) brings it back to 1 so the softmax does not saturate into a near one-hot row with vanishing gradients. It uses the head's d_k, not d_model.",
    "step.masked.why": "Blocked pairs get -inf, so exp(-inf) = 0 and they take no weight; the softmax renormalises over the keys that remain.",
    "step.masked.why.full": "Row {rows} may attend to no key at all: its weights are all zero and its output row is zero (PyTorch's nn.MultiheadAttention gives NaN there; scaled_dot_product_attention gives zeros).",
    "step.weights.why": "Softmax along each row (over the keys, axis -1) turns scores into weights that are positive and sum to 1: how much query i takes from each key.",
    "step.head_output.why": "Each output row is a weighted average of the rows of V, so each column stays between the smallest and largest value of that column of V.",
    "step.concat.why": "The heads are placed side by side, head 0 first: [L × h·d_v]. Each head looked at the input through its own projections.",
    "step.output.why": "W_O mixes the heads linearly and maps back to d_out; it adds no non-linearity (that comes from the feed-forward block).",
    "step.output.why.nohead": "W_O is a linear map to d_out; it adds no non-linearity (that comes from the feed-forward block).",
    # --- explain ---------------------------------------------------------------
    "explain.head": "Head {head}",
    "explain.layer": "Whole layer",
    "explain.exercise": "Exercise {id}",
    "explain.sizes": "L = {L}, L_k = {L_k}, d_model = {d_model}, heads = {heads}, d_k = {d_k}, d_v = {d_v}, d_out = {d_out}",
    "explain.mask.causal": "mask: causal (query i sees keys j ≤ i)",
    "explain.mask.matrix": "mask: given matrix (True = may attend)",
    "explain.mask.padding": "key padding: {keys} may not be attended",
    "explain.exact": "exact",
    "explain.decimal": "decimal",
    "explain.heatmap": "Attention weights, head {head} (darker = more weight)",
    "explain.flow": "Dimension flow",
    "explain.flow.each_head": "(the same for each of the {heads} heads)",
    "explain.columns": "columns {first}–{last} of {total}",
    "explain.masked_entry": "masked",
    "explain.no_head": "there is no head {head}; this exercise has heads 0 to {last}",
    "explain.exact_list": "Exact entries",
    "explain.precision": "precision must be between 0 and 15, found {found}",
    "list.title": "Bundled exercises",
    "list.col.id": "id",
    "list.col.title": "title",
    "list.col.mask": "mask",
    "list.col.heads": "heads",
    "list.empty": "no exercises found",
    "mask.none": "none",
    "mask.causal": "causal",
    "mask.matrix": "matrix",
    "mask.padding": "padding",
    # --- cli -------------------------------------------------------------------
    "cli.help": "Hand-calculate multi-head self-attention exactly, step by step, and drill it.",
    "cli.explain.help": "Print the worked solution of an exercise (a bundled id or a YAML path).",
    "cli.list.help": "List the bundled exercises.",
    "cli.opt.head": "Show only this head (0-based); layer steps are still shown.",
    "cli.opt.precision": "Decimal places shown.",
    "cli.opt.format": "Output format.",
    "cli.error": "error: {message}",
    "cli.interrupted": "interrupted",
    "cli.bad_format": "unknown format '{found}'; choose one of {choices}",
    # --- practice, stats (issue 4) ---------------------------------------------
    # --- diagnose, check (issue 4) ----------------------------------------------
    # --- validate, new, schema, packs, handouts (issue 5) ----------------------
}

CATALOGS: dict[str, dict[str, str]] = {"en": EN}


def language() -> str:
    """The catalogue in use: ``ATTN_TUTOR_LANG`` if it names one, else English."""
    lang = os.environ.get("ATTN_TUTOR_LANG", "en")
    return lang if lang in CATALOGS else "en"


def t(key: str, /, **fields: object) -> str:
    """The sentence for ``key`` in the current language, with ``fields`` filled in.

    Raises ``KeyError`` for an unknown key (a programming error, caught by tests).
    """
    template = CATALOGS[language()].get(key) or EN[key]
    return template.format(**fields) if fields else template

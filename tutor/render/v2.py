"""The lines an explanation's header adds for format v2: the causal alignment, grouped K/V heads, the cache, the bias."""

from __future__ import annotations

from ..base.messages import t
from ..exact.numbers import frac_text
from ..exercise.record import Exercise, alibi_slope


def header_lines(ex: Exercise) -> list[str]:
    """Sentences (from the catalogue) describing the v2 parts of ``ex``; empty for a v1 exercise."""
    out = []
    if ex.mask_kind == "causal_lower_right":
        out.append(t("explain.mask.causal_lower_right", offset=ex.L_k - ex.L))
    elif ex.mask_kind == "causal" and ex.L != ex.L_k:
        out.append(t("explain.mask.causal_top_left"))
    if ex.grouped:
        out.append(t("explain.v2.grouped", G=ex.num_kv_heads, H=ex.num_heads, ratio=ex.num_heads // ex.num_kv_heads))
    if ex.has_cache:
        out.append(t("explain.v2.cache", L_past=ex.L_past, labels=", ".join(ex.past_labels), L=ex.L))
    if ex.alibi:
        out.append(t("explain.v2.alibi", slopes=", ".join(frac_text(alibi_slope(h, ex.num_heads)) for h in range(ex.num_heads))))
    elif ex.has_bias:
        out.append(t("explain.v2.attn_bias"))
    return out

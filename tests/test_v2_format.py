"""Format v2 in exercise files: grouped K/V heads, a KV cache, causal alignment, an additive bias (issue 12).

Each mistake in a v2 field is one problem at its line and column; a valid
file becomes the record the engines read (values worked out by hand here).
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from tutor.base.errors import ExerciseError
from tutor.exercise.load import parse_exercise

HEAD = "id: t\ntitle: T\n"  # lines 1-2


def problems(text: str) -> list[tuple[int | None, int | None, str, str]]:
    with pytest.raises(ExerciseError) as info:
        parse_exercise(HEAD + text, "f.yaml")
    return [(p.line, p.column, p.field, p.message) for p in info.value.problems]


MQA = """\
num_heads: 2
num_kv_heads: 1
x: [[1, 2], [0, 1]]
w_q: [[1, 0], [0, 1]]
w_k: [[1], [1]]
w_v: [[1], [0]]
"""


def test_fused_mqa_shares_one_kv_head_between_both_query_heads():
    ex = parse_exercise(HEAD + MQA)
    assert ex.num_heads == 2 and ex.num_kv_heads == 1 and ex.grouped
    assert [ex.kv_head(h) for h in range(2)] == [0, 0]
    assert ex.heads[0].w_k == ex.heads[1].w_k == ((1,), (1,))  # both query heads read K/V head 0
    assert ex.kv_heads is not None and ex.kv_heads[0].w_v == ((1,), (0,))


def test_fused_gqa_expands_in_repeat_interleave_order():
    text = ("num_heads: 4\nnum_kv_heads: 2\nx: [[1, 0]]\nw_q: [[1, 0, 0, 0], [0, 1, 0, 0]]\n"
            "w_k: [[1, 2], [3, 4]]\nw_v: [[5, 6], [7, 8]]\n")
    ex = parse_exercise(HEAD + text)
    # query heads 0, 1 read K/V head 0 (column 0); heads 2, 3 read K/V head 1 (column 1): [A, A, B, B]
    assert [h.w_k for h in ex.heads] == [((1,), (3,)), ((1,), (3,)), ((2,), (4,)), ((2,), (4,))]
    assert [h.w_v for h in ex.heads] == [((5,), (7,)), ((5,), (7,)), ((6,), (8,)), ((6,), (8,))]


def test_per_head_form_with_kv_heads():
    text = ("x: [[1, 0]]\nheads:\n  - {w_q: [[1], [0]]}\n  - {w_q: [[0], [1]]}\n"
            "kv_heads:\n  - {w_k: [[1], [1]], w_v: [[2], [0]], b_v: [1]}\n")
    ex = parse_exercise(HEAD + text)
    assert ex.num_kv_heads == 1 and ex.heads[1].w_v == ((2,), (0,)) and ex.heads[1].b_v == (1,)


def test_decode_step_with_a_cache_and_lower_right_mask():
    text = ("cache:\n  - {k: [[1], [2]], v: [[1], [0]]}\npast_tokens: [The, cat]\nx: [[1, 1]]\ntokens: [sat]\n"
            "mask: causal_lower_right\nheads:\n  - {w_q: [[1], [0]], w_k: [[0], [1]], w_v: [[1], [1]]}\n")
    ex = parse_exercise(HEAD + text)
    assert ex.L == 1 and ex.L_past == 2 and ex.L_k == 3
    assert ex.key_labels == ("The", "cat", "sat")
    assert ex.mask_kind == "causal_lower_right" and ex.mask == ((True, True, True),)  # j <= 0 + 3 - 1


def test_causal_with_a_cache_is_top_left():
    text = ("cache:\n  - {k: [[1], [2]], v: [[1], [0]]}\nx: [[1, 1]]\nmask: causal\n"
            "heads:\n  - {w_q: [[1], [0]], w_k: [[0], [1]], w_v: [[1], [1]]}\n")
    assert parse_exercise(HEAD + text).mask == ((True, False, False),)  # query 0 sees key 0 only


def test_lower_right_in_cross_attention_and_upper_left():
    text = ("x: [[1], [2]]\nx_kv: [[1], [0], [1]]\nmask: {m}\nheads:\n  - {{w_q: [[1]], w_k: [[1]], w_v: [[1]]}}\n")
    assert parse_exercise(HEAD + text.format(m="causal_lower_right")).mask == ((True, True, False), (True, True, True))
    upper = parse_exercise(HEAD + text.format(m="causal_upper_left"))
    assert upper.mask_kind == "causal" and upper.mask == ((True, False, False), (True, True, False))


def test_key_padding_with_causal_combines():
    text = ("x: [[1], [2], [3]]\nmask: causal\nkey_padding_mask: [false, true, false]\n"
            "heads:\n  - {w_q: [[1]], w_k: [[1]], w_v: [[1]]}\n")
    ex = parse_exercise(HEAD + text)
    assert ex.allowed() == ((True, False, False), (True, False, False), (True, False, True))


def test_alibi_bias_is_slope_times_j_minus_i():
    text = "x: [[1, 0], [0, 1]]\nalibi: true\nheads:\n  - {w_q: [[1], [1]], w_k: [[1], [1]], w_v: [[1], [1]]}\n"
    ex = parse_exercise(HEAD + text)
    m = Fraction(1, 256)  # one head: 2^(-8·1/1)
    assert ex.alibi and ex.bias == (((0, m), (-m, 0)),)


def test_attn_bias_one_matrix_for_every_head():
    text = MQA + 'attn_bias: [[0, "-1/2"], [1, 0]]\n'
    ex = parse_exercise(HEAD + text)
    assert ex.bias is not None and len(ex.bias) == 2 and ex.bias[1] == ((0, Fraction(-1, 2)), (1, 0))


# --- mistakes, each at its line and column --------------------------------------------------------------------


def test_kv_heads_not_dividing_num_heads():
    found = problems(MQA.replace("num_heads: 2", "num_heads: 4").replace("num_kv_heads: 1", "num_kv_heads: 3")
                     .replace("w_q: [[1, 0], [0, 1]]", "w_q: [[1, 0, 1, 0], [0, 1, 0, 1]]"))
    assert found[0][:3] == (4, 15, "num_kv_heads") and "does not divide num_heads = 4" in found[0][3]
    assert len(found) == 1  # w_k and w_v are not blamed for a G that cannot be


def test_fused_w_k_width_must_be_kv_heads_times_d_k():
    found = problems(MQA.replace("w_k: [[1], [1]]", "w_k: [[1, 1], [1, 1]]"))
    assert found == [(7, 6, "w_k", "w_k has 2 columns but with num_kv_heads = 1 it must have num_kv_heads·d_k = 1·1 = 1")]


def test_kv_heads_count_and_weights_in_a_head():
    text = ("x: [[1, 0]]\nnum_kv_heads: 1\nheads:\n  - {w_q: [[1], [0]], w_k: [[1], [1]]}\n  - {w_q: [[0], [1]]}\n"
            "kv_heads:\n  - {w_k: [[1], [1]], w_v: [[2], [0]]}\n  - {w_k: [[1], [1]], w_v: [[2], [0]]}\n")
    found = problems(text)
    assert found[0][:3] == (9, 3, "kv_heads") and found[0][3] == "kv_heads has 2 entries but num_kv_heads is 1"


def test_a_k_v_weight_inside_a_head_with_kv_heads():
    text = ("x: [[1, 0]]\nheads:\n  - {w_q: [[1], [0]], w_k: [[1], [1]]}\n  - {w_q: [[0], [1]]}\n"
            "kv_heads:\n  - {w_k: [[1], [1]], w_v: [[2], [0]]}\n")
    assert problems(text) == [(5, 28, "heads[0].w_k", "w_k is given in this head, but its K/V come from kv_heads[1]")]


def test_cache_width_differs_from_d_k():
    text = ("cache:\n  - {k: [[1, 0], [2, 0]], v: [[1], [0]]}\nx: [[1, 1]]\n"
            "heads:\n  - {w_q: [[1], [0]], w_k: [[0], [1]], w_v: [[1], [1]]}\n")
    assert problems(text) == [(4, 9, "cache[0].k", "cache k has 2 columns but must have d_k = 1")]


def test_cache_rows_and_past_tokens():
    text = ("cache:\n  - {k: [[1], [2]], v: [[1]]}\nx: [[1, 1]]\n"
            "heads:\n  - {w_q: [[1], [0]], w_k: [[0], [1]], w_v: [[1], [1]]}\n")
    assert problems(text) == [(4, 24, "cache[0].v",
                               "cache v has 1 row but L_past is 2, as most of the cache (and past_tokens, if given) says")]
    text = ("cache:\n  - {k: [[1], [2]], v: [[1], [0]]}\npast_tokens: [a]\nx: [[1, 1]]\n"
            "heads:\n  - {w_q: [[1], [0]], w_k: [[0], [1]], w_v: [[1], [1]]}\n")
    assert problems(text) == [(5, 14, "past_tokens", "past_tokens has 1 entry but the cache has 2 rows (L_past)")]


def test_every_problem_of_a_cache_at_once():
    """A wrong count, a wrong width and a wrong row count: each reported in one pass, at its place."""
    text = ("cache:\n  - {k: [[1, 0], [2, 0]], v: [[1]]}\n  - {k: [[1], [2]], v: [[1], [0]]}\nx: [[1, 1]]\n"
            "heads:\n  - {w_q: [[1], [0]], w_k: [[0], [1]], w_v: [[1], [1]]}\n")
    assert [p[2] for p in problems(text)] == ["cache", "cache[0].k", "cache[0].v"]


def test_num_kv_heads_refused_brings_no_follow_on_width_errors():
    text = ("num_heads: 2\nnum_kv_heads: 0\nx: [[1, 0], [0, 1]]\nw_q: [[1, 0, 1, 0], [0, 1, 0, 1]]\n"
            "w_k: [[1, 0], [0, 1]]\nw_v: [[1, 0], [0, 1]]\n")
    assert [p[2] for p in problems(text)] == ["num_kv_heads"]


def test_past_tokens_without_a_cache_and_cache_in_cross_attention():
    assert problems("past_tokens: [a]\nx: [[1]]\nheads:\n  - {w_q: [[1]], w_k: [[1]], w_v: [[1]]}\n")[0][:3] == (
        3, 14, "past_tokens")
    found = problems("cache:\n  - {k: [[1]], v: [[1]]}\nx: [[1]]\nx_kv: [[1]]\nheads:\n  - {w_q: [[1]], w_k: [[1]], w_v: [[1]]}\n")
    assert found == [(4, 3, "cache", "a cache is for self-attention (a decode step), but x_kv is given")]


def test_key_padding_with_a_cache_counts_every_key():
    text = ("cache:\n  - {k: [[1], [2]], v: [[1], [0]]}\nx: [[1, 1]]\nkey_padding_mask: [false, true]\n"
            "heads:\n  - {w_q: [[1], [0]], w_k: [[0], [1]], w_v: [[1], [1]]}\n")
    assert problems(text) == [(6, 19, "key_padding_mask",
                               "key_padding_mask has 2 entries but L_k = 3 (the cached keys and the new ones)")]


def test_bias_mistakes():
    assert problems(MQA + "attn_bias: [[0, 1]]\n") == [(9, 12, "attn_bias", "attn_bias is [1 × 2] but must be [L × L_k] = [2 × 2]")]
    assert problems(MQA + "attn_bias: [[[0, 1], [0, 0]]]\n")[0][2:] == (
        "attn_bias", "attn_bias has 1 entry but there are 2 heads: one matrix per head, or one matrix for all")
    assert problems(MQA + "alibi: true\nattn_bias: [[0, 1], [1, 0]]\n")[0][:3] == (9, 8, "alibi")
    three = "num_heads: 1\nx: [[1]]\nw_q: [[1]]\nw_k: [[1]]\nw_v: [[1]]\nalibi: true\n".replace("num_heads: 1", "num_heads: 3")
    three = three.replace("w_q: [[1]]", "w_q: [[1, 1, 1]]").replace("w_k: [[1]]", "w_k: [[1, 1, 1]]").replace(
        "w_v: [[1]]", "w_v: [[1, 1, 1]]")
    ex = parse_exercise("id: three\ntitle: t\n" + three.replace("x: [[1]]", "x: [[1], [1]]"))
    # every head count has the paper's slopes (issue 23): the bias of query 2 on key 1 is -m_h
    assert [b[1][0] for b in ex.bias] == [Fraction(-1, 16), Fraction(-1, 256), Fraction(-1, 4)]


def test_alignment_is_a_warning_when_queries_and_keys_are_as_many():
    from tutor.exercise.load import validate_text

    v = validate_text(HEAD + "x: [[1], [2]]\nmask: causal_lower_right\nheads:\n  - {w_q: [[1]], w_k: [[1]], w_v: [[1]]}\n")
    assert v.ok and [w.field for w in v.warnings] == ["mask"]
    assert "same as causal" in v.warnings[0].message


def test_a_refused_number_gets_no_advice_on_how_to_write_it():
    """1e20 is beyond the entry limit: the error says so; the YAML 1.1 warning (write 100000000000000000000)
    would advise writing a number that is refused anyway."""
    from tutor.exercise.load import validate_text

    v = validate_text("id: a\ntitle: t\nx: [[1e20, 0]]\nheads:\n  - {w_q: [[1], [0]], w_k: [[0], [1]], w_v: [[1], [1]]}\n")
    assert [p.field for p in v.problems] == ["x[0][0]"] and v.warnings == ()
    v = validate_text("id: a\ntitle: t\nx: [[1e3, 0]]\nheads:\n  - {w_q: [[1], [0]], w_k: [[0], [1]], w_v: [[1], [1]]}\n")
    assert v.problems == () and [w.field for w in v.warnings] == ["x[0][0]"]


def test_a_list_where_a_k_v_head_or_a_cache_entry_goes_asks_for_a_mapping():
    """'kv_heads[0]: expected a list, found a list' said nothing: each entry is a mapping ({w_k, w_v}, {k, v})."""
    text = MQA.replace("num_kv_heads: 1", "num_kv_heads: 1") + "kv_heads: [[1]]\n"
    found = [p for p in problems(text) if p[2] == "kv_heads[0]"]
    assert found and found[0][3] == "expected a mapping of fields, found a list"
    found = problems("cache: [[1]]\nx: [[1, 1]]\nheads:\n  - {w_q: [[1], [0]], w_k: [[0], [1]], w_v: [[1], [1]]}\n")
    assert (found[0][2], found[0][3]) == ("cache[0]", "expected a mapping of fields, found a list")


def test_an_unknown_mask_names_the_v2_alignments_too():
    found = problems("mask: causal_lower_left\nx: [[1, 1]]\nheads:\n  - {w_q: [[1], [0]], w_k: [[0], [1]], w_v: [[1], [1]]}\n")
    assert "causal_upper_left, causal_lower_right" in found[0][3]


# --- past_x: the cached tokens' inputs, and the cache checked against them (issue 20, D) ---------------------

DECODE = "heads:\n  - {w_q: [[1, 0], [0, 1]], w_k: [[1, 1], [0, 1]], w_v: [[0, 1], [1, 0]]}\nx: [[1, 1]]\n"  # lines 3-5


def test_past_x_consistent_with_the_cache_is_kept():
    # past_x·W_K: [1, -1]·[[1, 1], [0, 1]] = [1, 0]; [0, 1] -> [0, 1].  past_x·W_V swaps the columns: [-1, 1], [1, 0]
    ex = parse_exercise(HEAD + DECODE + "past_x: [[1, -1], [0, 1]]\ncache:\n  - {k: [[1, 0], [0, 1]], v: [[-1, 1], [1, 0]]}\n")
    assert ex.past_x == ((1, -1), (0, 1)) and ex.L_past == 2


def test_a_cache_that_is_not_the_projection_of_past_x_is_refused_at_its_first_wrong_row():
    text = DECODE + "past_x: [[1, -1], [0, 1]]\ncache:\n  - k: [[1, 0], [0, 1]]\n    v: [[-1, 1], [0, 2]]\n"  # v: line 9
    assert problems(text) == [(9, 18, "cache[0].v[1]",
        "row 2 of the cache's v is [0, 2], but row 2 of past_x · W_V is [1, 0]: the cache holds the earlier tokens' values, "
        "projected with this K/V head's own weights")]


def test_the_projection_counts_the_bias_and_each_k_v_head_its_own_weights():
    """MQA with b_k: the one K/V head's cache is past_x·W_K + b_K; both query heads read it."""
    text = ("num_heads: 2\nnum_kv_heads: 1\nx: [[1, 0]]\nw_q: [[1, 0], [0, 1]]\nw_k: [[2], [1]]\nw_v: [[1], [1]]\n"
            "b_k: [5]\nmask: causal_lower_right\npast_x: [[1, 1]]\ncache:\n  - {k: [[3]], v: [[2]]}\n")
    found = problems(text)
    assert [(p[2], p[3].split(":")[0]) for p in found] == [("cache[0].k[0]", "row 1 of the cache's k is [3], but row 1 of past_x · W_K + b_K is [8]")]
    assert parse_exercise(HEAD + text.replace("k: [[3]]", "k: [[8]]")).L_k == 2


def test_past_x_without_a_cache_or_of_another_size():
    assert problems(DECODE + "past_x: [[1, 0]]\n")[0][2:] == (
        "past_x", "past_x gives the inputs of cached tokens, but there is no cache")
    cache = "cache:\n  - {k: [[1, 0], [0, 1]], v: [[-1, 1], [1, 0]]}\n"
    assert problems(DECODE + "past_x: [[1, -1]]\n" + cache)[0][2:] == (
        "past_x", "past_x has 1 row but the cache has 2 rows (L_past)")
    assert problems(DECODE + "past_x: [[1, -1, 0], [0, 1, 0]]\n" + cache)[0][2:] == (
        "past_x", "past_x has 3 columns but d_model is 2: the earlier tokens have the width of x")

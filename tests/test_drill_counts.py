"""`drill counts`: the formulas against real layers, the answers typed in every accepted form, the mistakes named.

Parameter counts are checked against the arrays of the NumPy core's
:class:`tutor.numeric.MultiHeadAttention` (and, in test_drill_counts_torch.py, against torch's
modules, FLOP counter and tensor sizes).
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from tutor.base.errors import AnswerError
from tutor.drills import counts
from tutor.drills.record import count_tolerance, grade, parse_count
from tutor.numeric import MultiHeadAttention


def numpy_layer(layer: counts.Layer) -> MultiHeadAttention:
    """A NumPy-core layer of these sizes (multi-head only: the core has no grouped K/V heads)."""
    D, H, d = layer.d_model, layer.num_heads, layer.d_k
    rng = np.random.default_rng(0)
    bias = (lambda n: rng.standard_normal(n)) if layer.bias else (lambda n: None)
    return MultiHeadAttention(rng.standard_normal((D, H * d)), rng.standard_normal((D, H * d)),
                              rng.standard_normal((D, H * layer.d_v)), H, b_q=bias(H * d), b_k=bias(H * d),
                              b_v=bias(H * layer.d_v), w_o=rng.standard_normal((H * layer.d_v, D)), b_o=bias(D))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(("d_model", "heads", "d"), [(64, 8, 8), (48, 4, 16), (32, 2, 8), (512, 8, 64)])
def test_parameters_equal_the_numpy_layers_arrays(bias, d_model, heads, d):
    layer = counts.Layer(d_model, heads, heads, d, d, bias)
    core = numpy_layer(layer)
    arrays = [core.w_q, core.w_k, core.w_v, core.w_o, core.b_q, core.b_k, core.b_v, core.b_o]
    assert sum(counts.parameters(layer).values()) == sum(a.size for a in arrays if a is not None)


def test_the_parameter_parts_follow_grouped_heads():
    """W_K and W_V shrink with num_kv_heads; W_Q and W_O do not (a hand count: 4096·32·128 = 16,777,216)."""
    mha = counts.parameters(counts.Layer(4096, 32, 32, 128, 128, False))
    gqa = counts.parameters(counts.Layer(4096, 32, 8, 128, 128, False))
    assert mha["W_Q"] == gqa["W_Q"] == mha["W_O"] == gqa["W_O"] == 16_777_216
    assert gqa["W_K"] == gqa["W_V"] == 4_194_304 == mha["W_K"] // 4


@pytest.mark.parametrize(("text", "unit", "value"), [
    ("1048576", "params", 1048576), ("1,048,576", "params", 1048576), ("1_048_576", "params", 1048576),
    ("1 048 576", "params", 1048576), ("6.4e9", "flops", 6.4e9), ("6.4 billion", "flops", 6.4e9),
    ("16 GiB", "bytes", 16 * 2**30), ("16GiB", "bytes", 16 * 2**30), ("16 GB", "bytes", 16e9),
    ("512 MiB", "bytes", 512 * 2**20), ("7B", "params", 7e9), ("7B", "bytes", 7), ("2 bytes", "bytes", 2),
    ("3.5M", "params", 3.5e6), ("1.2 TFLOPs", "flops", 1.2e12), ("4 KiB", "bytes", 4096),
])
def test_counts_are_read_in_every_form(text, unit, value):
    assert parse_count(text, unit) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "12 parsecs", "-5", "1e999999", "2^20"])
def test_unreadable_counts_are_refused_with_a_sentence(text):
    with pytest.raises(AnswerError) as info:
        parse_count(text, "bytes")
    assert "\n" not in str(info.value) and str(info.value)


def _question(maker, seed):
    return maker(random.Random(seed), "t")


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("maker", [counts.params_question, counts.flops_question, counts.memory_question,
                                   counts.kv_question])
def test_every_named_mistake_is_recognised_and_differs_from_the_answer(maker, seed):
    q = _question(maker, seed)
    assert grade(q, str(q.answer)).outcome == "correct"
    assert grade(q, f"{q.answer:,}").outcome == "correct"
    if count_tolerance(q):
        assert grade(q, f"{q.answer * 1.005:.6e}").outcome == "correct"  # within 1%
    else:  # a mistake lands within 1%: only the exact count is right
        assert grade(q, f"{q.answer * 1.005:.6e}").outcome == "wrong"
    assert grade(q, f"{q.answer * 1.02:.6e}").outcome == "wrong"
    values = [v.value for v in q.variants]
    assert q.answer not in values and len(set(values)) == len(values)
    for v in q.variants:
        verdict = grade(q, str(v.value))
        assert (verdict.outcome, verdict.diagnosis) == ("wrong", v.key)


def test_a_known_mistake_is_named():
    """GQA cache with num_heads instead of num_kv_heads: 4 times too much, and said so."""
    q = next(q for s in range(200) for q in [_question(counts.kv_question, s)]
             if q.config["num_kv_heads"] not in (1, q.config["num_heads"]))
    wrong = counts.kv_cache_bytes(q.config["layers"], q.config["B"], q.config["L"], q.config["num_heads"],
                                  q.config["d_k"], q.config["d_v"], q.config["bytes_per_element"])
    verdict = grade(q, str(wrong))
    assert verdict.diagnosis == "drill.counts.kv.num_heads"
    assert verdict.details == ("That uses num_heads; the cache holds num_kv_heads heads of K and of V.",)


def test_the_kv_cache_of_the_issues_example():
    """32 layers, 4k context, GQA with 8 K/V heads of 128, float16, one sequence: 2·32·4096·8·128·2 bytes."""
    assert counts.kv_cache_bytes(32, 1, 4096, 8, 128, 128, 2) == 536_870_912 == 512 * 2**20


def test_show_answers_json_carries_the_configuration_and_the_answer(cli):
    code, out, err = cli("drill", "counts", "--seed", 3, "--count", 8, "--show-answers", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    for item in doc["questions"]:
        ratio = item["part"] in ("intensity", "time") if "part" in item else False  # issue 23: FLOPs per byte, ms
        assert item["kind"] == "count" and isinstance(item["answer"], (int, float) if ratio else int)
        assert item["quantity"] == item["topic"]
        assert item["explain"]

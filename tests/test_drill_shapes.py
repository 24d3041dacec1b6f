"""The production trace and `drill shapes` without torch: the trace against a plain NumPy forward run on
real arrays, the configurations a layer can have, shapes typed in every accepted form, and the
explanation of a wrong shape, axis by axis (torch parity: test_drill_shapes_torch.py)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from tutor.base.errors import AnswerError
from tutor.drills import shapes
from tutor.drills.record import explain_shape, grade, parse_shape
from tutor.numeric.trace import AttentionConfig, production_trace


def numpy_forward(c: AttentionConfig) -> dict[str, np.ndarray]:
    """The forward in plain NumPy, arrays and all (np.repeat along the head axis is repeat_interleave)."""
    rng = np.random.default_rng(0)
    B, Lq, Lk, D, H, Hkv, dk, dv = c.B, c.L_q, c.L_k, c.d_model, c.num_heads, c.num_kv_heads, c.d_k, c.d_v
    x = rng.standard_normal((B, Lq, D))
    src = rng.standard_normal((B, Lk, c.d_kv)) if c.cross else x
    p = {"x": x}
    if c.fused:
        qkv = x @ rng.standard_normal((D, H * dk + Hkv * dk + Hkv * dv))
        q, k, v = np.split(qkv, [H * dk, H * dk + Hkv * dk], axis=-1)
    else:
        q = x @ rng.standard_normal((D, H * dk))
        k = src @ rng.standard_normal((c.d_kv, Hkv * dk))
        v = src @ rng.standard_normal((c.d_kv, Hkv * dv))
    p.update(q_proj=q, k_proj=k, v_proj=v)
    p["q_heads"] = q.reshape(B, Lq, H, dk).transpose(0, 2, 1, 3)
    p["k_heads"] = k.reshape(B, Lk, Hkv, dk).transpose(0, 2, 1, 3)
    p["v_heads"] = v.reshape(B, Lk, Hkv, dv).transpose(0, 2, 1, 3)
    keys, values = p["k_heads"], p["v_heads"]
    if Hkv < H:
        keys = p["k_repeated"] = np.repeat(keys, H // Hkv, axis=1)
        values = p["v_repeated"] = np.repeat(values, H // Hkv, axis=1)
    mask = None
    if c.padding:
        p["key_padding_mask"] = np.zeros((B, Lk), dtype=bool)
    if c.causal:
        mask = np.tril(np.ones((Lq, Lk), dtype=bool))
    if c.padding:
        pad = ~p["key_padding_mask"][:, None, None, :]
        mask = pad if mask is None else mask & pad
    if mask is not None:
        p["attn_mask"] = mask
    scores = q_scores = p["q_heads"] @ keys.swapaxes(-1, -2) / math.sqrt(dk)
    if mask is not None:
        scores = np.where(mask, q_scores, -np.inf)
    p["scores"] = scores
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p["weights"] = e / e.sum(axis=-1, keepdims=True)
    p["head_outputs"] = p["weights"] @ values
    p["merged"] = p["head_outputs"].transpose(0, 2, 1, 3).reshape(B, Lq, H * dv)
    p["output"] = p["merged"] @ rng.standard_normal((H * dv, D))
    return p


CONFIGS = [
    AttentionConfig(2, 5, 5, 16, 4, 4, 4, 4, 16),
    AttentionConfig(2, 5, 5, 16, 4, 2, 4, 4, 16, fused=True, causal=True, padding=True),
    AttentionConfig(3, 4, 6, 12, 3, 1, 4, 2, 10, cross=True, padding=True),
    AttentionConfig(1, 3, 3, 24, 6, 3, 4, 8, 24, causal=True),
    AttentionConfig(2, 7, 7, 8, 2, 2, 4, 4, 8, fused=True, padding=True),
]


@pytest.mark.parametrize("c", CONFIGS)
def test_the_trace_is_the_shapes_of_a_numpy_forward(c):
    arrays = numpy_forward(c)
    named = {p.name: p for p in production_trace(c) if p.name in shapes.ASKED}
    assert set(named) == set(arrays)
    for name, p in named.items():
        assert p.shape == arrays[name].shape, name
        assert len(p.dims) == len(p.shape)


def test_the_trace_is_in_forward_order_and_each_point_names_its_inputs():
    c = AttentionConfig(2, 5, 5, 16, 4, 2, 4, 4, 16, fused=True, causal=True, padding=True)
    trace = production_trace(c)
    seen: set[str] = set()
    for p in trace:
        assert set(p.inputs) <= seen, p.name
        seen.add(p.name)
    assert [p.name for p in trace][:2] == ["x", "qkv"] and trace[-1].name == "output"
    assert {p.name: p.symbolic for p in trace}["qkv"] == "[B, L_q, (num_heads + 2·num_kv_heads)·d_k]"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"num_kv_heads": 3}, "not a multiple of num_kv_heads"),
    ({"L_k": 6}, "self-attention has L_k = L_q"),
    ({"d_k": 0}, "at least 1: d_k"),
    ({"cross": True, "fused": True, "L_k": 6}, "for self-attention only"),
    ({"cross": True, "causal": True, "L_k": 6}, "for self-attention only"),
])
def test_a_configuration_no_layer_has_is_refused(kwargs, message):
    sizes = dict(B=2, L_q=5, L_k=5, d_model=16, num_heads=4, num_kv_heads=2, d_k=4, d_v=4, d_kv=16)
    sizes.update(kwargs)
    with pytest.raises(ValueError, match=message):
        AttentionConfig(**sizes)


@pytest.mark.parametrize(("text", "shape"), [
    ("[2, 8, 5, 7]", [2, 8, 5, 7]), ("2x8x5x7", [2, 8, 5, 7]), ("(2,8,5,7)", [2, 8, 5, 7]),
    ("2 8 5 7", [2, 8, 5, 7]), ("2×8×5×7", [2, 8, 5, 7]), ("torch.Size([2, 8])", [2, 8]), ("(3,)", [3]),
    (" [ 2 , 8 ] ", [2, 8]),
])
def test_shapes_are_read_in_every_form(text, shape):
    assert parse_shape(text) == shape


@pytest.mark.parametrize("text", ["", "[2, -8]", "2.5 3", "B, L", "[[2, 3]]", "２ ３"])
def test_unreadable_shapes_are_refused_with_a_sentence(text):
    with pytest.raises(AnswerError) as info:
        parse_shape(text)
    assert str(info.value).startswith("cannot read")


def test_a_wrong_shape_says_which_axis_is_which():
    dims, sizes = ("B", "num_heads", "L_q", "L_k"), {"B": 2, "num_heads": 8, "L_q": 5, "L_k": 7}
    others = [("k_heads", (2, 8, 7, 4)), ("q_proj", (2, 5, 32))]
    assert explain_shape(dims, (2, 8, 5, 7), (2, 5, 8, 7), sizes, others, "scores") == [
        "order", "The right sizes, in the wrong order.",
        "Axis 1 is num_heads = 8; you wrote 5 (that is L_q).", "Axis 2 is L_q = 5; you wrote 8 (that is num_heads)."]
    assert explain_shape(dims, (2, 8, 5, 7), (2, 5, 32), sizes, others, "scores") == [
        "other_point", "That is the shape of q_proj.", "It has 4 axes; you gave 3."]
    assert explain_shape(dims, (2, 8, 5, 7), (2, 8, 5, 9), sizes, others, "scores") == [
        "axes", "Axis 3 is L_k = 7; you wrote 9."]


@pytest.mark.parametrize("seed", range(25))
def test_every_question_accepts_its_answer_and_refuses_a_shuffle(seed):
    for q in shapes.questions(seed, 4):
        if q.kind == "shape":
            assert grade(q, str(q.answer)).outcome == "correct"
            assert grade(q, "x".join(map(str, q.answer))).outcome == "correct"
            if len(set(q.answer)) > 1:
                verdict = grade(q, str(list(reversed(q.answer))))
                assert verdict.outcome == "wrong" and verdict.details
        else:
            right = next(c for c in q.choices if c.right)
            assert grade(q, right.key).outcome == "correct" and len(q.choices) == 4
            assert right.text == next(p.op for p in production_trace(_config(q)) if p.name == q.json["point"])


def _config(q) -> AttentionConfig:
    c = q.config
    return AttentionConfig(c["B"], c["L_q"], c["L_k"], c["d_model"], c["num_heads"], c["num_kv_heads"], c["d_k"],
                           c["d_v"], c["d_kv"], cross=c["attention"] == "cross", fused=c["fused"],
                           causal="causal" in c["mask"], padding="padding" in c["mask"])


@pytest.mark.parametrize("seed", range(200))
def test_configurations_are_sensible(seed):
    c = shapes.random_config(random.Random(seed))
    assert c.num_heads % c.num_kv_heads == 0 and c.B > 1
    assert not (c.cross and (c.causal or c.fused))
    if c.num_kv_heads not in (1, c.num_heads):
        assert "k_repeated" in {p.name for p in production_trace(c)}

"""A matrix grouped query heads share (K, V and their gradients) is asked once in practice and shown once
in explain --backward and its Markdown handout, under its K/V head."""

from __future__ import annotations

import json

from tutor.exercise.catalog import resolve
from tutor.practice import select
from tutor.steps import solve


def test_practice_asks_a_shared_k_v_once_under_the_first_head_of_its_group():
    sol = solve(resolve("gqa-four-heads-2x4"), backward=True)
    keys = [(s.id, s.head) for s in select(sol)]
    for id in ("k", "v", "d_k", "d_v", "d_w_k", "d_w_v"):
        assert [h for i, h in keys if i == id] == [0, 2], id  # K/V head 1 (query heads 1, 2), 2 (3, 4)
    assert [h for i, h in keys if i == "q"] == [0, 1, 2, 3]
    assert [h for i, h in keys if i == "k"] == [0, 2]
    # a session on one head asks that head's K (its K/V head's)
    assert [(s.id, s.head) for s in select(sol, ["k", "d_k"], head=1)] == [("k", 1), ("d_k", 1)]


def test_practice_labels_a_shared_step_by_its_k_v_head(cli):
    code, out, _ = cli("practice", "mqa-two-heads-3x4", input="quit\n")
    assert code == 0
    assert "steps to do: 14" in out  # 7 per head and 2 layer steps, less head 2's K and V
    assert "K (K/V head 1)" in out and "V (K/V head 1)" in out and "K (head 2)" not in out


def test_explain_backward_shows_a_group_s_k_v_gradients_once(cli):
    code, out, _ = cli("explain", "gqa-four-heads-2x4", "--backward", env={"COLUMNS": "120"})
    assert code == 0
    back = out.split("Backward pass")[1]
    assert back.count("Gradient of K (") == 2 and back.count("Gradient of W_V (") == 2
    assert "K/V head 1 (query heads 1, 2)" in back and "K/V head 2 (query heads 3, 4)" in back
    code, out, _ = cli("explain", "gqa-four-heads-2x4", "--backward", "--format", "json")
    d_k = [s for s in json.loads(out)["steps"] if s["id"] == "d_k"]
    assert [(s["head"], s["kv_head"], s["shared_by"]) for s in d_k] == [(None, 0, [0, 1]), (None, 1, [2, 3])]


def test_the_markdown_handout_puts_the_backward_pass_after_the_forward(cli):
    code, out, _ = cli("explain", "two-head-causal-3x4", "--backward", "--format", "markdown")
    assert code == 0
    forward, _, back = out.partition("## Backward pass")
    assert back, out[:200]
    assert "Gradient" not in forward and "## Whole layer" in forward
    assert back.index("Upstream gradient") < back.index("**Head 1**") < back.index("**Head 2**") < back.index(
        "Gradient of the input X")

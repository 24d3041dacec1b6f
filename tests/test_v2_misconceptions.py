"""The misconceptions of format v2, named by `check` on solution files whose values are computed here, by hand.

Each wrong solution is what a learner holding the misconception writes; the
values come from NumPy on the exercise's numbers (copied from the bundled
file), never from attn-tutor's engines.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

SQRT2 = np.sqrt(2)


def diagnoses(cli, tmp_path, text: str) -> tuple[int, list[str]]:
    path = tmp_path / "sol.yaml"
    path.write_text(text)
    r = cli("check", str(path), "--format", "json")
    doc = json.loads(r.out)
    keys = [d["key"] for s in doc["steps"] for d in s["diagnoses"]]
    return doc["exit_code"], keys


def rows(m) -> str:
    return "[" + ", ".join("[" + ", ".join(f"{v:.6f}" if isinstance(v, float) else str(v) for v in r) + "]" for r in m) + "]"


def softmax(a):
    e = np.exp(a - np.max(a, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_kv_heads_in_tile_order(cli, tmp_path):
    # gqa-four-heads-2x4: query head 2 (index 1) reads K/V head 1 (index 0) in repeat_interleave order;
    # in tile order ([A, B, A, B]) it would read K/V head 2 (index 1)
    x = np.array([[1, 0, 1, 0], [0, 1, 1, 1]])
    w_k = [np.array([[1], [0], [1], [0]]), np.array([[0], [1], [0], [1]])]
    right, tiled = x @ w_k[0], x @ w_k[1]
    assert not np.array_equal(right, tiled)
    code, keys = diagnoses(cli, tmp_path, f"exercise: gqa-four-heads-2x4\nheads:\n  - k: {rows(right)}\n  - k: {rows(tiled)}\n")
    assert code == 1 and keys == ["kv_tile_order"]


def test_top_left_alignment_for_a_decode_step(cli, tmp_path):
    # decode-one-token-cache-3: q = [1, 1]; K = [cache; x·W_K] = [[1, 0], [0, 1], [1, 1], [1, 2]]
    q = np.array([1, 1]) @ np.eye(2)
    K = np.vstack([[[1, 0], [0, 1], [1, 1]], np.array([[1, 1]]) @ np.array([[1, 1], [0, 1]])])
    scaled = (q @ K.T) / SQRT2
    top_left = np.array([True, False, False, False])  # j <= i with i = 0: only the first key
    weights = softmax(np.where(top_left, scaled, -np.inf))
    assert weights.tolist() == [1.0, 0.0, 0.0, 0.0]
    code, keys = diagnoses(cli, tmp_path, f"exercise: decode-one-token-cache-3\nweights: {rows([weights.tolist()])}\n")
    assert code == 1 and "decode_top_left" in keys


def test_cache_rows_recomputed_with_the_projection(cli, tmp_path):
    cache_k = np.array([[1, 0], [0, 1], [1, 1]])
    w_k = np.array([[1, 1], [0, 1]])
    k_new = np.array([[1, 1]]) @ w_k
    reprojected = np.vstack([cache_k @ w_k, k_new])  # the cached keys multiplied by W_K again
    code, keys = diagnoses(cli, tmp_path, f"exercise: decode-one-token-cache-3\nk: {rows(reprojected.tolist())}\n")
    assert code == 1 and keys == ["cache_reprojected"]


def _alibi_head1():
    """alibi-causal-3x2, head 1: q = x·W_Q[:, :2], k = x·W_K[:, :2], slope 1/16, causal."""
    x = np.array([[1, 0], [0, 1], [1, 1]])
    q = x @ np.array([[1, 0], [0, 1]])
    k = x @ np.array([[1, 0], [0, 1]])
    scaled = q @ k.T / SQRT2
    i, j = np.indices((3, 3))
    bias = (j - i) / 16
    causal = j <= i
    return scaled, bias, causal


def test_bias_added_after_the_softmax(cli, tmp_path):
    scaled, bias, causal = _alibi_head1()
    weights = softmax(np.where(causal, scaled, -np.inf)) + np.where(causal, bias, 0.0)  # the bias on the weights
    code, keys = diagnoses(cli, tmp_path, f"exercise: alibi-causal-3x2\nheads:\n  - weights: {rows(weights.tolist())}\n")
    assert code == 1 and "bias_after_softmax" in keys


@pytest.mark.parametrize("step", ["biased", "weights"])
def test_alibi_distance_with_the_wrong_sign(cli, tmp_path, step):
    scaled, bias, causal = _alibi_head1()
    biased = scaled - bias  # m·(i − j) instead of m·(j − i)
    value = biased if step == "biased" else softmax(np.where(causal, biased, -np.inf))
    code, keys = diagnoses(cli, tmp_path, f"exercise: alibi-causal-3x2\nheads:\n  - {step}: {rows(value.tolist())}\n")
    assert code == 1 and "alibi_sign" in keys


def test_the_right_values_pass(cli, tmp_path):
    scaled, bias, causal = _alibi_head1()
    weights = softmax(np.where(causal, scaled + bias, -np.inf))
    code, keys = diagnoses(cli, tmp_path, f"exercise: alibi-causal-3x2\nheads:\n  - weights: {rows(weights.tolist())}\n")
    assert (code, keys) == (0, [])

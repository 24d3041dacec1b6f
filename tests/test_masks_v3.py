"""Issue 23, masks: ALiBi's slopes for every head count, sliding windows, attention sinks.

ALiBi's slopes are checked against the paper's reference code written out
here (Press et al. 2022, ofirpress/attention_with_linear_biases, ``get_slopes``),
not against attn-tutor's function; exercises are run end to end and their
numbers compared with PyTorch 2.13 (``F.scaled_dot_product_attention`` with
the same mask or float ``attn_mask``).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from tutor.exercise.record import alibi_exponents, alibi_slope

from .test_torch_parity import require_torch

torch = require_torch()
import torch.nn.functional as F  # noqa: E402


def get_slopes(n: int) -> list[float]:
    """The reference code of Press et al. 2022 (``get_slopes``), as published."""
    def get_slopes_power_of_2(n: int) -> list[float]:
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest_power_of_2) + get_slopes(2 * closest_power_of_2)[0::2][:n - closest_power_of_2]


# --- ALiBi for every head count ---------------------------------------------------------------------


@pytest.mark.parametrize("n", range(1, 17))
def test_alibi_slopes_are_the_reference_codes(n):
    ours = [2.0 ** -float(e) for e in alibi_exponents(n)]
    assert ours == pytest.approx(get_slopes(n), rel=1e-12, abs=0)  # the reference multiplies floats: 2^-8 comes out 1 ulp off


@pytest.mark.parametrize("n", range(1, 9))
def test_alibi_slopes_are_rational_up_to_the_head_limit(n):
    for h, ref in enumerate(get_slopes(n)):
        assert alibi_slope(h, n) == Fraction(ref)  # every reference slope is a power of two, exact in a float


def test_three_heads_are_a_sixteenth_a_256th_and_a_quarter():
    assert [alibi_slope(h, 3) for h in range(3)] == [Fraction(1, 16), Fraction(1, 256), Fraction(1, 4)]


def test_a_slope_that_is_not_rational_is_refused_not_rounded():
    with pytest.raises(ValueError, match="not rational"):
        alibi_slope(8, 9)  # head 9 of 9: 2^(-1/2), the first slope of 16 heads


def _sdpa(q, k, v, mask):
    """SDPA in float64 for one head: ``q [L, d]``, ``k [L_k, d]``, ``v [L_k, d_v]``, ``mask`` bool or float ``[L, L_k]``."""
    t = [torch.tensor(np.asarray(a, dtype=np.float64))[None, None] for a in (q, k, v)]
    m = torch.tensor(np.asarray(mask))[None, None]
    return F.scaled_dot_product_attention(*t, attn_mask=m)[0, 0].numpy()


def _json(cli, *argv):
    r = cli("explain", *argv, "--format", "json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def _values(doc, step, head):
    (s,) = [s for s in doc["steps"] if s["id"] == step and s["head"] == head]
    return np.array([[np.nan if v is None else v for v in row] for row in s["value"]], dtype=np.float64)


def test_three_heads_of_alibi_end_to_end_against_torch(cli):
    doc = _json(cli, "alibi-three-heads-3x2")
    x = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float64)
    w_q = np.array([[1, 0, 1], [0, 1, 1]])
    w_k = np.array([[0, 1, 1], [1, 1, 0]])
    w_v = np.array([[1, 0, 1], [0, 1, 1]])
    slopes = get_slopes(3)
    i, j = np.arange(3)[:, None], np.arange(3)[None, :]
    for h in range(3):
        bias = np.where(j <= i, slopes[h] * (j - i), -np.inf)  # [L, L_k]: ALiBi's bias, -inf above the diagonal
        want = _sdpa(x @ w_q[:, h:h + 1], x @ w_k[:, h:h + 1], x @ w_v[:, h:h + 1], bias)
        assert np.allclose(_values(doc, "head_output", h), want, atol=1e-12)
    assert "slopes 1/16, 1/256, 1/4" in cli("explain", "alibi-three-heads-3x2").out
    assert doc["exercise"]["alibi_slopes"] == ["1/16", "1/256", "1/4"]


def test_the_power_of_two_formula_on_three_heads_is_named(cli, tmp_path):
    # head 3 of 3: the paper's slope 1/4; the geometric formula 2^(-8·3/3) gives 1/256
    q = np.array([[1, 1, 2]]).T  # [L, 1]: x·W_Q[:, 2]
    k = np.array([[1, 0, 1]]).T  # [L, 1]: x·W_K[:, 2]
    i, j = np.arange(3)[:, None], np.arange(3)[None, :]
    biased = q @ k.T + 2.0 ** -8 * (j - i)
    (tmp_path / "sol.yaml").write_text(
        "exercise: alibi-three-heads-3x2\nheads:\n  - {}\n  - {}\n  - biased: "
        + json.dumps(biased.tolist()) + "\n")
    doc = json.loads(cli("check", str(tmp_path / "sol.yaml"), "--format", "json").out)
    keys = [d["key"] for s in doc["steps"] for d in s["diagnoses"]]
    assert doc["exit_code"] == 1 and "alibi_geometric" in keys


def test_new_writes_alibi_for_three_heads(cli, tmp_path):
    out = tmp_path / "a.yaml"
    r = cli("new", "--alibi", "--heads", "3", "--seed", "1", "-o", str(out))
    assert r.code == 0, r.err
    assert "1/16, 1/256, 1/4" in out.read_text()
    assert cli("validate", str(out)).code == 0


# --- the sliding window and attention sinks ---------------------------------------------------------


def torch_window(L_q: int, L_k: int, W: int, S: int = 0) -> torch.Tensor:
    """The window built with torch's own ops, as xformers materialises a local causal mask with sinks:
    ``tril(diagonal=shift)`` then ``triu(diagonal=shift - W + 1)``, the first S columns kept up to the diagonal."""
    shift = L_k - L_q
    ones = torch.ones(L_q, L_k, dtype=torch.bool)
    mask = ones.tril(diagonal=shift) & ones.triu(diagonal=shift - W + 1)
    if S:
        mask[:, :S] = ones.tril(diagonal=shift)[:, :S]
    return mask


@pytest.mark.parametrize("L_q, L_k, W, S", [(5, 5, 2, 0), (5, 5, 2, 1), (6, 6, 3, 2), (1, 5, 3, 0), (2, 7, 3, 1),
                                            (4, 4, 1, 0), (3, 3, 5, 0), (3, 6, 2, 4)])
def test_the_window_masks_are_torch_s(L_q, L_k, W, S):
    from tutor.exercise.record import sliding_window
    from tutor.numeric.masks import sliding_window_mask

    want = torch_window(L_q, L_k, W, S).numpy()
    assert np.array_equal(sliding_window_mask(L_q, L_k, W, S), want)
    assert np.array_equal(np.array(sliding_window(L_q, L_k, W, S)), want)


def test_the_mirror_s_sdpa_with_the_window_is_torch_s():
    from tutor.numeric.functional import scaled_dot_product_attention
    from tutor.numeric.masks import sliding_window_mask

    rng = np.random.default_rng(23)
    q, k, v = rng.normal(size=(2, 3, 2, 4)), rng.normal(size=(2, 3, 6, 4)), rng.normal(size=(2, 3, 6, 5))
    mask = sliding_window_mask(2, 6, 3, 1)  # [L_q, L_k]: a decode step of two tokens over four cached ones
    T = [torch.tensor(a) for a in (q, k, v)]
    for m in (mask, np.where(mask, 0.0, -np.inf)):  # the boolean attn_mask and the float one
        want = F.scaled_dot_product_attention(*T, attn_mask=torch.tensor(m)).numpy()
        np.testing.assert_allclose(scaled_dot_product_attention(q, k, v, attn_mask=m), want, rtol=1e-12, atol=1e-12)


def test_the_shared_window_vector_blocks_exactly_our_keys():
    """v3-layernorm-window (torch, float64): given its q, k, v, our mask and the mirror's SDPA give its weights
    and head output (the norm that made q, k, v is another helper's part)."""
    from pathlib import Path

    from tutor.numeric.functional import attention_with_weights
    from tutor.numeric.masks import sliding_window_mask

    path = Path(__file__).parent / "data" / "v3-cases.json"
    if not path.exists():
        pytest.skip("the shared v3 vectors are not on this machine")
    (case,) = [c for c in json.loads(path.read_text())["cases"] if c["exercise"]["id"] == "v3-layernorm-window"]
    W = case["exercise"]["mask"]["sliding_window"]
    head = case["expected"]["heads"][0]
    q, k, v = (np.array(head[n]) for n in ("q", "k", "v"))
    L = len(q)
    mask = sliding_window_mask(L, L, W)
    assert np.array_equal(np.array(head["weights"]) == 0, ~mask)  # torch's zeros are exactly the blocked keys
    out, weights = attention_with_weights(q, k, v, attn_mask=mask)
    np.testing.assert_allclose(weights, head["weights"], atol=1e-12)
    np.testing.assert_allclose(out, head["head_output"], atol=1e-12)


def _bundled_torch(name: str, W: int, S: int):
    """The bundled exercise's head output recomputed in torch, its numbers copied here from the file."""
    if name == "sliding-window-sinks-4x2":
        x = np.array([[1, 0], [0, 1], [1, 1], [1, 0]], dtype=np.float64)
        q, k, v = x @ np.eye(2), x @ np.array([[1, 1], [0, 1]]), x @ np.array([[1, 0], [1, 1]])
    else:  # decode-sliding-window-cache-3: the cache, then the new row
        past = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float64)
        x = np.array([[1, 1]], dtype=np.float64)
        q = x
        k = np.vstack([past, x])
        v = np.vstack([past @ np.array([[1, 1], [0, 1]]), x @ np.array([[1, 1], [0, 1]])])
    return _sdpa(q, k, v, torch_window(len(q), len(k), W, S).numpy())


@pytest.mark.parametrize("name, W, S", [("sliding-window-sinks-4x2", 2, 1), ("decode-sliding-window-cache-3", 2, 0)])
def test_bundled_windows_end_to_end_against_torch(cli, name, W, S):
    doc = _json(cli, name)
    np.testing.assert_allclose(_values(doc, "head_output", 0), _bundled_torch(name, W, S), atol=1e-12)
    masked = _values(doc, "masked", 0)
    assert np.array_equal(np.isnan(masked), ~torch_window(*masked.shape, W, S).numpy())  # -inf is null in JSON
    assert doc["exercise"]["mask"] == "sliding_window"
    assert (doc["exercise"]["sliding_window"], doc["exercise"]["sinks"]) == (W, S)


def test_the_decode_step_is_the_last_row_of_the_windowed_full_forward():
    from tutor.exercise.catalog import resolve
    from tutor.exercise.record import unrolled
    from tutor.steps import solve

    ex = resolve("decode-sliding-window-cache-3")
    full = unrolled(ex)
    assert full is not None and full.mask == tuple(map(tuple, torch_window(4, 4, 2).tolist()))
    assert solve(full).step("head_output", 0).exact[-1] == solve(ex).step("head_output", 0).exact[0]


def test_explain_teaches_the_rolling_buffer(cli):
    out = " ".join(cli("explain", "decode-sliding-window-cache-3").out.split())
    # W = 2 slots, position p in slot p mod 2: after "on" (position 3) slot 0 holds "sat" (2), slot 1 "on" (3)
    assert "holds slot 0: sat, slot 1: on; The, cat left the window" in out
    assert "never grows past W entries" in out


def test_the_rolling_buffer_is_a_simulated_one():
    from tutor.exercise.record import window_slots

    for W in (1, 2, 3, 4):
        for S in (0, 1, 2):
            buffer: dict[int, int] = {}
            for p in range(12):  # write position p: sinks kept apart, the window's slot p mod W overwritten
                buffer[p % W] = p
                sinks = tuple(range(min(S, p + 1)))
                assert window_slots(p, W, S) == (sinks, tuple(sorted(buffer.items()))), (W, S, p)


def _check_keys(cli, tmp_path, text: str) -> tuple[int, list[str]]:
    (tmp_path / "sol.yaml").write_text(text)
    doc = json.loads(cli("check", str(tmp_path / "sol.yaml"), "--format", "json").out)
    return doc["exit_code"], [d["key"] for s in doc["steps"] for d in s["diagnoses"]]


@pytest.mark.parametrize("mistake, keep", [
    ("window_wide", lambda i, j: j <= i and (i - 2 <= j or j < 1)),
    ("window_narrow", lambda i, j: j <= i and (i - 1 < j or j < 1)),
    ("window_acausal", lambda i, j: abs(i - j) < 2 or j < 1),
    ("sinks_forgotten", lambda i, j: i - 2 < j <= i),
])
def test_window_mistakes_are_named(cli, tmp_path, mistake, keep):
    x = np.array([[1, 0], [0, 1], [1, 1], [1, 0]], dtype=np.float64)  # sliding-window-sinks-4x2, W = 2, S = 1
    scaled = (x @ (x @ np.array([[1, 1], [0, 1]])).T) / np.sqrt(2)
    mask = np.array([[keep(i, j) for j in range(4)] for i in range(4)])
    a = np.where(mask, scaled, -np.inf)
    weights = np.exp(a - a.max(1, keepdims=True))
    weights /= weights.sum(1, keepdims=True)
    code, keys = _check_keys(cli, tmp_path, "exercise: sliding-window-sinks-4x2\nweights: "
                             + json.dumps(np.round(weights, 6).tolist()) + "\n")
    assert code == 1 and mistake in keys


def test_the_right_window_passes_check(cli, tmp_path):
    weights = _bundled_torch("sliding-window-sinks-4x2", 2, 1)  # head output; the weights come from the same mask
    code, keys = _check_keys(cli, tmp_path, "exercise: sliding-window-sinks-4x2\nhead_output: "
                             + json.dumps(np.round(weights, 6).tolist()) + "\n")
    assert (code, keys) == (0, [])


@pytest.mark.parametrize("mask, message", [
    ("{sliding_window: 0}", "mask.sliding_window: expected a whole number of at least 1"),
    ("{sliding_window: 2, sink: 1}", "mask.sink: unknown field (did you mean 'sinks'?)"),
    ("{sinks: 1}", "mask.sliding_window: required field is missing"),
    ("{sliding_window: 2, sinks: -1}", "mask.sinks: expected a whole number of at least 1"),
])
def test_a_bad_window_is_one_line_and_exit_2(cli, tmp_path, mask, message):
    path = tmp_path / "w.yaml"
    path.write_text("id: w\ntitle: w\nx: [[1, 0], [0, 1]]\nheads:\n  - {w_q: [[1], [0]], w_k: [[1], [0]], w_v: [[1], [0]]}\n"
                    f"mask: {mask}\n")
    r = cli("validate", str(path))
    assert r.code == 2 and message in r.out and "Traceback" not in r.out + r.err


def test_a_window_on_cross_attention_is_refused_and_a_covering_one_is_a_warning(cli, tmp_path):
    base = "id: w\ntitle: w\nx: [[1, 0], [0, 1]]\nheads:\n  - {w_q: [[1], [0]], w_k: [[1], [0]], w_v: [[1], [0]]}\n"
    (tmp_path / "c.yaml").write_text(base + "x_kv: [[1, 0]]\nmask: {sliding_window: 2}\n")
    r = cli("validate", str(tmp_path / "c.yaml"))
    assert r.code == 2 and "a sliding window needs positions of one sequence, but x_kv is given" in r.out
    (tmp_path / "h.yaml").write_text(base + "mask: {sliding_window: 16}\n")  # the key limit: a covering window
    r = cli("validate", str(tmp_path / "h.yaml"))
    assert r.code == 0 and "every key is inside the window, so the mask is the causal one" in " ".join((r.out + r.err).split())
    (tmp_path / "h.yaml").write_text(base + "mask: {sliding_window: 99999999999}\n")  # beyond it: refused, exit 2
    r = cli("validate", str(tmp_path / "h.yaml"))
    assert r.code == 2 and "mask.sliding_window: sliding_window is 99999999999, above the limit of 16" in r.out


def test_new_writes_a_window_with_sinks_and_a_windowed_decode_step(cli, tmp_path):
    import yaml

    r = cli("new", "--tokens", "5", "--window", "2", "--sinks", "1", "--seed", "4")
    assert r.code == 0, r.err
    assert yaml.safe_load(r.out)["mask"] == {"sliding_window": 2, "sinks": 1}
    out = tmp_path / "d.yaml"
    r = cli("new", "--tokens", "2", "--cache", "4", "--window", "3", "--seed", "4", "-o", str(out))
    assert r.code == 0, r.err
    doc = yaml.safe_load(out.read_text())
    assert doc["mask"] == {"sliding_window": 3} and len(doc["past_tokens"]) == 4
    assert cli("validate", str(out)).code == 0
    for args, option in ((["--sinks", "1"], "--sinks"), (["--window", "2", "--cross", "2"], "--window"),
                         (["--window", "2", "--mask", "padding"], "--window")):
        r = cli("new", *args)
        assert r.code == 2 and option in r.err and r.out == ""


# --- drill masks: windows -------------------------------------------------------------------------


def test_drill_window_questions_are_answered_by_code_and_their_mistakes_named():
    import random

    from tutor.drills import masks
    from tutor.drills.record import grade

    s = masks.Scenario("window_sinks", 1, 5, 5, "top_left", (5,), False, 0, 2, 1)
    seen, matrix = masks.window_questions(s, random.Random(1), "w")[:2]
    by_hand = [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 1, 1, 0], [1, 0, 0, 1, 1]]  # W = 2, S = 1
    wide = [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 0, 1, 1, 1]]

    def typed(rows):
        conv = matrix.json["convention"]
        cell = {"sdpa_bool": lambda a: str(a), "mha_bool": lambda a: str(1 - a), "additive": lambda a: "0" if a else "-inf"}
        return "; ".join(" ".join(cell[conv](a) for a in row) for row in rows)

    assert grade(matrix, typed(by_hand)).outcome == "correct"
    assert grade(matrix, typed(wide)).diagnosis == "drill.masks.window_wide"
    assert seen.answer == 3 and grade(seen, "3").outcome == "correct"  # q5 sees <s>, k4, k5
    verdict = grade(seen, "2")  # the window one key too narrow, or the sink forgotten: both give 2
    assert verdict.diagnosis == "drill.masks.window_narrow" and "drill.masks.sinks_forgotten" in verdict.also


def test_drill_rolling_buffer_question():
    import random

    from tutor.drills import masks
    from tutor.drills.record import grade

    s = masks.Scenario("window_cache", 1, 1, 5, "bottom_right", (5,), False, 0, 3)
    *_, buffer = masks.window_questions(s, random.Random(2), "w")
    P, W = buffer.config["position"], buffer.config["sliding_window"]
    right = next(c for c in buffer.choices if c.right)
    assert right.text == str(P - W) and grade(buffer, right.key).outcome == "correct"


@pytest.mark.parametrize("seed", range(12))
def test_the_masks_drill_draws_windows_and_every_answer_is_accepted(seed):
    from tutor.drills import masks
    from tutor.drills.record import grade

    qs = masks.questions(seed, 12)
    assert any(q.topic == "sliding_window" for q in qs)
    for q in qs:
        if q.kind == "matrix":
            conv = q.json["convention"]
            text = "; ".join(" ".join("-inf" if v == float("-inf") else str(int(v)) for v in row) for row in q.answer)
            assert grade(q, text).outcome == "correct", (conv, q.id)
        elif q.kind == "count":
            assert grade(q, str(q.answer)).outcome == "correct"


def test_new_like_a_window_keeps_the_window(cli):
    import yaml

    r = cli("new", "--like", "sliding-window-sinks-4x2", "--seed", "2")
    assert r.code == 0, r.err
    assert yaml.safe_load(r.out)["mask"] == {"sliding_window": 2, "sinks": 1}

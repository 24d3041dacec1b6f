"""The backward pass through RoPE (issue 23): d_Q_rot, d_K_rot and d_Q, d_K turned back, against torch autograd.

The rotation is written in torch (``tests/test_rope.py``'s :func:`torch_rope`), the layer's loss is
``Σ upstream ∘ output``, and every gradient is read off ``.grad``; attn-tutor's exact entries (their floats and
their 40-digit values) and its NumPy core (``verify``) must agree with it.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from tutor.answers import parse_entry
from tutor.answers.grading import judge
from tutor.exercise.load import exercise_from_data
from tutor.production import verify
from tutor.steps import KINDS, keys, solve

torch = pytest.importorskip("torch")
from tests.test_rope import torch_rope  # noqa: E402  (after the torch guard: it needs torch)

I4 = [[int(i == j) for j in range(4)] for i in range(4)]
CASES = {
    "interleaved": {
        "id": "rb-interleaved", "title": "RoPE backward, interleaved pairs",
        "x": [[1, 0, 1], [0, 1, 1], [1, 0, 1], [0, 1, 1]],
        "heads": [{"w_q": [[1, 0], [0, 1], [0, 1]], "w_k": [[1, 0], [1, 1], [0, 0]], "w_v": [[1, 0], [0, 1], [1, 1]]}],
        "upstream": [[1, 0], [0, 1], [1, -1], [2, 0]],
        "rope": {"base": 10000, "pairing": "interleaved"},
    },
    "half_causal": {
        "id": "rb-half", "title": "RoPE backward, rotate_half pairs, causal",
        "x": [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]],
        "heads": [{"w_q": I4, "w_k": [[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]], "w_v": I4}],
        "upstream": [[1, 0, 0, 0], [0, 2, 0, -1], [1, 0, 1, 0]],
        "mask": "causal", "rope": {"base": 10000, "pairing": "half"},
    },
    "decode": {
        "id": "rb-decode", "title": "RoPE backward, a decode step with rotated cached keys",
        "x": [[1, 0, 1], [0, 1, 1]],
        "heads": [{"w_q": [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]], "w_k": [[0, 1, 0, 1], [1, 0, 1, 0], [0, 0, 1, 1]],
                   "w_v": [[1, 0], [0, 1], [1, 1]]}],
        "cache": [{"k": [["1/2", -1, 0, 2], [1, "3/4", -1, 0]], "v": [[1, 2], [0, -1]]}],
        "upstream": [[1, -1], [0, 2]],
        "mask": "causal_lower_right", "rope": {"base": 10000, "pairing": "half"},
    },
}


def _t(m) -> torch.Tensor:
    return torch.tensor([[float(Fraction(str(e))) for e in r] for r in m], dtype=torch.float64)


def torch_grads(data: dict) -> dict[str, np.ndarray]:
    """Every gradient of ``Σ upstream ∘ head_output`` by torch autograd: the rotation written in torch, then SDPA."""
    from torch.nn.attention.bias import causal_lower_right

    x = _t(data["x"]).requires_grad_()
    h = data["heads"][0]
    W = {w: _t(h[w]).requires_grad_() for w in ("w_q", "w_k", "w_v")}
    q, k_new, v_new = x @ W["w_q"], x @ W["w_k"], x @ W["w_v"]
    for m in (q, k_new):
        m.retain_grad()
    base, pairing = float(data["rope"]["base"]), data["rope"]["pairing"]
    past = len(data["cache"][0]["k"]) if "cache" in data else 0
    L = q.shape[0]
    q_rot = torch_rope(q, list(range(past, past + L)), base, pairing)
    k_rot_new = torch_rope(k_new, list(range(past, past + L)), base, pairing)
    if past:
        k_cache = _t(data["cache"][0]["k"]).requires_grad_()  # stored rotated: not turned again
        k_rot = torch.cat([k_cache, k_rot_new])
        v = torch.cat([_t(data["cache"][0]["v"]), v_new])
        mask = causal_lower_right(L, past + L)
    else:
        k_rot, v, mask = k_rot_new, v_new, None
    for m in (q_rot, k_rot):
        m.retain_grad()
    out = torch.nn.functional.scaled_dot_product_attention(q_rot[None], k_rot[None], v[None], attn_mask=mask,
                                                           is_causal=data.get("mask") == "causal")[0]
    (out * _t(data["upstream"])).sum().backward()
    d_k = k_new.grad if not past else torch.cat([k_cache.grad, k_new.grad])
    return {"d_q_rot": q_rot.grad.numpy(), "d_k_rot": k_rot.grad.numpy(), "d_q": q.grad.numpy(), "d_k": d_k.numpy(),
            "d_w_q": W["w_q"].grad.numpy(), "d_w_k": W["w_k"].grad.numpy(), "d_w_v": W["w_v"].grad.numpy(),
            "d_x": x.grad.numpy()}


def _head(step_id: str) -> int | None:
    return None if KINDS[step_id].scope == "layer" else 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_gradient_through_rope_matches_torch_autograd(case):
    data = CASES[case]
    sol = solve(exercise_from_data(data), backward=True)
    want = torch_grads(data)
    assert np.abs(want["d_q_rot"]).max() > 0.01  # the case reaches the rotation (a constant d_weights would not)
    for id, expected in want.items():
        step = sol.step(id, _head(id))
        np.testing.assert_allclose(np.array(step.value), expected, atol=1e-12, err_msg=id)
        precise = np.array([[float(e.precise_value(40)) for e in row] for row in step.exact])
        np.testing.assert_allclose(precise, expected, atol=1e-13, err_msg=id)
    verify(sol)  # the NumPy core's backward (production) agrees too


def test_the_steps_come_in_order_and_d_q_reads_d_q_rot():
    ex = exercise_from_data(CASES["half_causal"])
    ids = [k[0] for k in keys(ex, backward=True)]
    assert ids.index("d_q_rot") < ids.index("d_q") < ids.index("d_k_rot") < ids.index("d_k") < ids.index("d_w_q")
    assert KINDS["d_q"].inputs(ex, 0) == (("d_q_rot", 0),) and KINDS["d_k"].inputs(ex, 0) == (("d_k_rot", 0),)
    plain = exercise_from_data({k: v for k, v in CASES["half_causal"].items() if k != "rope"})
    assert "d_q_rot" not in [k[0] for k in keys(plain, backward=True)]
    assert KINDS["d_q"].inputs(plain, 0) == (("d_scaled", 0), ("k", 0))


def test_exact_entries_grade_as_exact_and_a_float_does_not_pass_for_them():
    """The texts of d_Q_rot and d_Q parse in the answer grammar and equal the entries; a 12-digit decimal is
    not taken for an exact answer (the comparison is at high precision, as the forward's softmax)."""
    sol = solve(exercise_from_data(CASES["interleaved"]), backward=True)
    for id in ("d_q_rot", "d_q", "d_k", "d_w_q"):
        step = sol.step(id, _head(id))
        e = step.exact[1][0]
        assert "cos(" in str(e) or "sin(" in str(e), (id, str(e))
        assert judge(parse_entry(str(e)), e).right, id
        assert not judge(parse_entry(f"{step.value[1][0] + 1e-9:.12f}"), e).right, id


def test_a_cached_key_row_of_d_k_is_d_k_rot_as_it_is():
    sol = solve(exercise_from_data(CASES["decode"]), backward=True)
    d_k, d_k_rot = sol.step("d_k", 0), sol.step("d_k_rot", 0)
    assert d_k.exact[:2] == d_k_rot.exact[:2]  # the cached keys: stored rotated, not turned back
    assert d_k.exact[2:] != d_k_rot.exact[2:]


def test_the_pairs_are_turned_back_on_paper():
    """``d_Q[t, a] = g_a·cos + g_b·sin``: every worked line with exact operands reads, in the answer grammar, as
    exactly the entry."""
    sol = solve(exercise_from_data(CASES["half_causal"]), backward=True)
    step = sol.step("d_k", 0)
    pieces = KINDS["d_k"].arithmetic(sol, step, 4)
    lines = [p for p in pieces if p.label.startswith("d_K[")]
    assert len(lines) == 12
    # a key's position is n, as the hint and the explanation say (the trial found m·θ here), a query's m
    assert any("n·θ_1 = 2·(1/100) = 1/50" in p.lines[0] for p in pieces)
    assert not any("m·θ" in str(line) for p in pieces for line in p.lines)
    assert step.formula == "d_K = R(nθ)ᵀ·d_K_rot" and sol.step("d_q", 0).formula == "d_Q = R(mθ)ᵀ·d_Q_rot"
    assert any("m·θ_1 = 2·(1/100) = 1/50" in p.lines[0]
               for p in KINDS["d_q"].arithmetic(sol, sol.step("d_q", 0), 4))
    forward_keys = KINDS["k_rot"].arithmetic(sol, sol.step("k_rot", 0), 4)
    assert any("n·θ_1 = 2·(1/100) = 1/50" in p.lines[0] for p in forward_keys)
    work = str(KINDS["d_q"].work(sol, sol.step("d_q", 0), 1, 0))
    assert work.startswith("d_Q_rot[t2, d1]·cos(1) + d_Q_rot[t2, d3]·sin(1) = ")


def test_the_mistake_of_not_turning_the_gradient_back_is_named():
    from tutor.mistakes.diagnose import diagnose

    data = CASES["half_causal"]
    sol = solve(exercise_from_data(data), backward=True)
    want = torch_grads(data)
    for id, head in (("d_q", 0), ("d_k", 0)):
        wrong = want[f"{id}_rot"]  # the gradient of Q_rot (K_rot) taken for that of Q (K)
        assert not np.allclose(wrong, want[id])
        got = [d.key for d in diagnose(sol, id, head, wrong.tolist(), tolerance=1e-6)]
        assert got[:1] == ["rope_grad_not_unrotated"], (id, got)


@pytest.mark.parametrize("fmt", ["rich", "json", "markdown"])
def test_the_bundled_rope_exercises_explain_their_backward_pass(cli, fmt):
    for id in ("rope-relative-4x2", "rope-half-causal-3x4"):
        r = cli("explain", id, "--backward", "--format", fmt, env={"COLUMNS": "120"})
        assert r.code == 0, r.err
        if fmt == "json":
            doc = json.loads(r.out)
            ids = [s["id"] for s in doc["steps"]]
            assert {"d_q_rot", "d_k_rot", "d_q", "d_k"} <= set(ids)
        elif fmt == "markdown":
            assert r"d_Q = R(m\theta)^\top d_{Q_\text{rot}}" in r.out
            assert r"d_K = R(n\theta)^\top d_{K_\text{rot}}" in r.out
        else:
            assert "d_Q = R(mθ)ᵀ·d_Q_rot" in r.out and "Gradient of Q (d_Q_rot turned back)" in r.out


def test_in_chinese_too(cli):
    r = cli("--lang", "zh", "explain", "rope-half-causal-3x4", "--backward", env={"COLUMNS": "120"})
    assert r.code == 0, r.err
    assert "Q 的梯度（把 d_Q_rot 转回去）" in r.out and "正交矩阵" in r.out


def test_check_names_the_gradient_left_rotated_in_a_solution_file(cli, tmp_path):
    data = CASES["half_causal"]
    ex_path = tmp_path / "half.yaml"
    ex_path.write_text(json.dumps(data), encoding="utf-8")
    wrong = torch_grads(data)["d_q_rot"]
    rows = "[" + ", ".join("[" + ", ".join(f"{v:.6f}" for v in r) + "]" for r in wrong) + "]"
    sol_path = tmp_path / "sol.yaml"
    sol_path.write_text(f"exercise: {ex_path}\nheads:\n  - d_q: {rows}\n", encoding="utf-8")
    r = cli("check", str(sol_path), "--format", "json")
    doc = json.loads(r.out)
    assert doc["exit_code"] == 1, r.out
    assert [d["key"] for s in doc["steps"] for d in s["diagnoses"]] == ["rope_grad_not_unrotated"]


# --- --tiled with RoPE: the online softmax over Q_rot·K_rotᵀ/√d_k ----------------------------------------------


def _torch_scores(ex) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(scaled scores [L, L_k] with -inf where blocked, V, SDPA's output, logsumexp)`` of head 1, by torch."""
    x = torch.tensor(np.array(ex.x, dtype=object).astype(np.float64))
    h = ex.heads[0]
    q, k, v = (x @ torch.tensor(np.array(getattr(h, w), dtype=object).astype(np.float64)) for w in ("w_q", "w_k", "w_v"))
    base, pairing = float(ex.rope.base), ex.rope.pairing
    q_rot, k_rot = torch_rope(q, list(ex.query_positions), base, pairing), torch_rope(k, list(ex.key_positions), base, pairing)
    s = q_rot @ k_rot.T / np.sqrt(q.shape[-1])
    if ex.allowed() is not None:
        s = s.masked_fill(~torch.tensor(ex.allowed()), float("-inf"))
    out = torch.nn.functional.scaled_dot_product_attention(q_rot[None], k_rot[None], v[None],
                                                           attn_mask=torch.tensor(ex.allowed())[None]
                                                           if ex.allowed() is not None else None)[0]
    return s.numpy(), v.numpy(), out.numpy(), torch.logsumexp(s, dim=-1).numpy()


@pytest.mark.parametrize("name", ["rope-relative-4x2", "rope-half-causal-3x4"])
def test_tiled_with_rope_matches_torch_block_by_block(name):
    """o is SDPA's output over the rotated Q and K, lse torch.logsumexp of their scaled scores, and every block's
    running max, sum and accumulator the float walk of torch's scores; the exact check (l·exp(m) = Σ exp(s_j))
    holds term by term."""
    from tutor.exercise.catalog import resolve
    from tutor.flash.walk import online_floats, tiled

    ex = resolve(name)
    S, V, out, lse = _torch_scores(ex)
    for block in [*range(1, ex.L_k + 1), 16]:
        for r in tiled(ex, block):
            assert r.equal
            np.testing.assert_allclose([x.value() for x in r.o], out[r.row], rtol=1e-12, atol=1e-12)
            assert abs(float(r.lse.precise_value(40)) - lse[r.row]) < 1e-12
            f = online_floats(list(S[r.row]), V.tolist(), block)
            for b, fb in zip(r.blocks, f["blocks"], strict=True):
                assert abs(b.m.value() - fb["m"]) < 1e-12 and abs(b.l.value() - fb["l"]) < 1e-12
                np.testing.assert_allclose([a.value() for a in b.acc], fb["acc"], rtol=1e-12, atol=1e-12)


def test_the_running_max_of_rope_scores_is_decided_exactly():
    """``1`` against ``cos(1/10^9)`` (= 1 − 5·10^-19): equal as floats, told apart exactly."""
    from tutor.exact.rotary import Trig
    from tutor.flash.walk import exp_greater, exp_sign

    one = Trig.of(Fraction(1))
    c, _ = Trig.cos_sin(Fraction(1, 10**9))
    assert c.value() == one.value()
    assert exp_greater(one, c, 1) and not exp_greater(c, one, 1)
    assert exp_sign(one - one, 1) == 0


def test_check_names_an_online_softmax_mistake_on_rope_scores(cli, tmp_path):
    from tutor.exercise.catalog import resolve

    from .test_tiled import _file, _walk

    ex = resolve("rope-relative-4x2")
    S, V, _, _ = _torch_scores(ex)
    scores = list(S[1])  # query b1: its max moves at block 2 of size 1 (√2 after −√2·sin(1))
    for switch, key in (({}, None), ({"rescale_l": False}, "tiled_no_rescale_l")):
        blocks, o = _walk(scores, V.tolist(), 1, **switch)
        path = tmp_path / "tiled.yaml"
        path.write_text(_file(blocks, o, exercise="rope-relative-4x2", query="b1"))
        code, out, err = cli("check", str(path), "--format", "json")
        if key is None:
            assert code == 0, out + err
        else:
            assert code == 1, out + err
            assert [d["key"] for d in json.loads(out)["tiled"]["diagnoses"]] == [key]


def test_practice_of_the_new_steps_hints_grades_and_names_the_mistake(cli):
    """``practice --steps d_q_rot,d_q`` on the bundled exercise: the hints are RoPE's, the right answers (typed at 4
    places) are taken, and d_Q_rot typed for d_Q is named."""
    from tutor.exercise.catalog import resolve

    sol = solve(resolve("rope-half-causal-3x4"), backward=True)

    def typed(id: str) -> str:
        return "; ".join(" ".join(f"{v:.4f}" for v in row) for row in sol.step(id, 0).value)

    stdin = f"{typed('d_q_rot')}\nhint\n{typed('d_q_rot')}\n{typed('d_q')}\n"
    code, out, err = cli("practice", "rope-half-causal-3x4", "--steps", "d_q_rot,d_q", input=stdin)
    assert code == 0, err
    assert "Turn each pair of d_Q_rot back by its query's angle m·θ_i" in out
    assert "Gradient of Q (d_Q_rot turned back)" in out
    assert "You took the gradient of the rotated matrix for that of the projection" in out
    assert "Steps right: 2 of 2" in out


def test_grouped_kv_heads_with_rope_sum_d_k_rot_over_the_group_then_turn_it_back():
    """Two query heads reading one K/V head: d_W_K, each d_W_Q and d_X against torch autograd."""
    data = {"id": "rb-gqa", "title": "RoPE backward, grouped K/V heads", "x": [[1, 0, 1], [0, 1, 1], [1, 1, 0]],
            "num_kv_heads": 1,
            "heads": [{"w_q": [[1, 0], [0, 1], [1, 1]]}, {"w_q": [[0, 1], [1, 0], [1, -1]]}],
            "kv_heads": [{"w_k": [[1, 0], [1, 1], [0, 1]], "w_v": [[1, 0], [0, 1], [1, 1]]}],
            "upstream": [[1, 0, 0, 1], [0, 1, 2, 0], [1, -1, 0, 1]],
            "mask": "causal", "rope": {"base": 10000, "pairing": "interleaved"}}
    sol = solve(exercise_from_data(data), backward=True)
    x = _t(data["x"]).requires_grad_()
    Wk, Wv = _t(data["kv_heads"][0]["w_k"]).requires_grad_(), _t(data["kv_heads"][0]["w_v"])
    Wq = [_t(h["w_q"]).requires_grad_() for h in data["heads"]]
    k_rot = torch_rope(x @ Wk, [0, 1, 2], 10000.0, "interleaved")
    outs = [torch.nn.functional.scaled_dot_product_attention(torch_rope(x @ W, [0, 1, 2], 10000.0, "interleaved")[None],
                                                             k_rot[None], (x @ Wv)[None], is_causal=True)[0]
            for W in Wq]
    (torch.cat(outs, -1) * _t(data["upstream"])).sum().backward()
    np.testing.assert_allclose(np.array(sol.step("d_w_k", 0).value), Wk.grad.numpy(), atol=1e-12)
    for h in (0, 1):
        np.testing.assert_allclose(np.array(sol.step("d_w_q", h).value), Wq[h].grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(np.array(sol.step("d_x", None).value), x.grad.numpy(), atol=1e-12)
    verify(sol)


def test_a_rope_exercise_past_the_backward_work_limit_is_refused_in_one_line(cli, tmp_path):
    """16 tokens, d_model = 3, d_k = 2: 12,288 is within the limit without RoPE, 24,576 with its factor d_k."""
    data = {"id": "rb-big", "title": "too big with RoPE", "x": [[1, 0, 1]] * 16,
            "heads": [{"w_q": [[1, 0], [0, 1], [1, 1]], "w_k": [[1, 0], [1, 1], [0, 1]], "w_v": [[1, 0], [0, 1], [1, 1]]}],
            "rope": {"base": 10000, "pairing": "interleaved"}}
    path = tmp_path / "big.yaml"
    path.write_text(json.dumps(data), encoding="utf-8")
    r = cli("explain", str(path), "--backward")
    assert r.code == 2 and "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert "num_heads·L·L_k²·d_model·d_k = 16,384" in r.err and "1·16·16²·3·2 = 24,576" in r.err


def test_practice_gives_the_exercises_upstream_at_d_output(cli):
    """Step 1, d_output = upstream: the hint says the upstream is given, so the prompt shows it (the trial found
    only the forward output, the upstream revealed by ``show`` alone, counted as missed); typed, it is right."""
    from tutor.exercise.catalog import resolve
    from tutor.practice.worked import inputs_for

    ex = resolve("rope-relative-4x2")
    assert ex.upstream is not None
    sol = solve(ex, backward=True)
    given = inputs_for(sol, sol.step("d_output", None))
    upstream = [g for g in given if str(g.name) == "upstream"]
    assert len(upstream) == 1 and upstream[0].value == ((1, 0), (0, 1), (1, -1), (2, 0))  # the YAML's upstream
    code, out, err = cli("practice", "rope-relative-4x2", "--steps", "d_output",
                         input="1 0; 0 1; 1 -1; 2 0\n", env={"COLUMNS": "100"})
    assert code == 0, err
    assert "upstream [4×2]" in out and "Steps right: 1 of 1 (1 at the first try); shown: 0" in out
    # without an upstream the step's input is the forward output alone, and the formula says all ones
    plain = solve(resolve("single-head-3x4"), backward=True)
    assert [str(g.name) for g in inputs_for(plain, plain.step("d_output", None))] == ["head_1"]


def test_practice_writes_the_worked_entry_with_one_minus_sign(cli):
    """Hint 2's worked entry is written as explain writes its worked lines (−, √, ·), not the answer grammar's
    ``(-0.133061)`` beside hint 1's ``−g_a·sin`` (the trial); a label in brackets is kept as it is."""
    from tutor.exact.numbers import notation_of_work

    assert notation_of_work("d_Q[x-ray, d1] = (-0.1331)·sin(1) + 2*sqrt(2) ≈ -0.05") == \
        "d_Q[x-ray, d1] = (−0.1331)·sin(1) + 2√2 ≈ −0.05"
    code, out, err = cli("practice", "rope-relative-4x2", "--steps", "d_q", input="0 0; 0 0; 0 0; 0 0\nhint\nhint\nquit\n",
                         env={"COLUMNS": "200"})
    assert code == 0, err
    worked = out[out.index("one entry worked out"):].splitlines()[1]
    assert "(−0.133061)·sin(0)" in worked and "-" not in worked.replace("d_Q_rot", "")
    # a diagnosis quoting a worked entry writes it the same way (the trial's mix of - and −); the learner's own
    # text ("you wrote") is kept as typed
    typed = "0.137541 -0.133061; -0.049974 0.022211; 0.075129 -0.224123; -0.363332 -0.5"
    code, out, err = cli("practice", "rope-relative-4x2", "--steps", "d_q", input=f"{typed}\nquit\n",
                         env={"COLUMNS": "200"})
    assert code == 0, err
    said = next(line for line in out.splitlines() if "should be" in line)
    assert said.startswith("Diagnosis: d_Q[b3, d2] should be −d_Q_rot[b3, d1]·sin(3) + d_Q_rot[b3, d2]·cos(3) = "
                           "−0.400758·sin(3) + 0.236785·cos(3) ≈ −0.2910; you wrote -0.5."), said


# --- fix-rope F12: the gradient turned forward by R(mθ) instead of back by R(mθ)ᵀ --------------------------------


def _turned_forward(data: dict, want: dict[str, np.ndarray], id: str) -> np.ndarray:
    """What a learner who turns d_Q_rot (d_K_rot) forward writes for d_Q (d_K), in torch: the forward rotation of
    tests/test_rope.py applied to autograd's d_Q_rot; a cached key's row (stored rotated) is copied, as the right
    d_K does."""
    past = len(data["cache"][0]["k"]) if "cache" in data else 0
    g = torch.tensor(want[f"{id}_rot"], dtype=torch.float64)
    kept = past if id == "d_k" else 0
    L = g.shape[0] - kept
    turned = torch_rope(g[kept:], list(range(past, past + L)), float(data["rope"]["base"]), data["rope"]["pairing"])
    return torch.cat([g[:kept], turned]).numpy()


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_gradient_turned_forward_is_named(case):
    """practice --backward's diagnosis: d_Q (d_K) turned by R(mθ) is named as such, not as "not turned back"."""
    from tutor.mistakes.diagnose import diagnose

    data = CASES[case]
    sol = solve(exercise_from_data(data), backward=True)
    want = torch_grads(data)
    for id in ("d_q", "d_k"):
        wrong = _turned_forward(data, want, id)
        if np.allclose(wrong, want[id], atol=1e-9):  # only rows at position 0 (or cached): nothing to tell
            continue
        got = [d.key for d in diagnose(sol, id, 0, wrong.tolist(), tolerance=1e-6)]
        assert got == ["rope_grad_turned_forward"], (case, id, got)


def test_check_names_the_gradient_turned_forward_in_a_solution_file(cli, tmp_path):
    """The trial's d_Q (rounded to 4 places from torch), in English and in Chinese."""
    data = {**CASES["half_causal"], "id": "rope-half-causal-3x4"}
    wrong = _turned_forward(data, torch_grads(data), "d_q")
    rows = "[" + ", ".join("[" + ", ".join(f"{v:.4f}" for v in r) + "]" for r in wrong) + "]"
    sol_path = tmp_path / "sol.yaml"
    sol_path.write_text(f"exercise: {tmp_path / 'half.yaml'}\nheads:\n  - d_q: {rows}\n", encoding="utf-8")
    (tmp_path / "half.yaml").write_text(json.dumps(CASES["half_causal"]), encoding="utf-8")
    r = cli("check", str(sol_path), "--format", "json")
    doc = json.loads(r.out)
    assert doc["exit_code"] == 1, r.out
    assert [d["key"] for s in doc["steps"] for d in s["diagnoses"]] == ["rope_grad_turned_forward"]
    r = cli("--lang", "zh", "check", str(sol_path), env={"COLUMNS": "200"})
    assert "你把梯度往前转了" in r.out, r.out

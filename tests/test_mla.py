"""Multi-head latent attention, hand-sized (issue 23, item 5): the ``mla`` field, the latent ``c_kv``, K and V
read from it, and the absorbed route (``q_absorbed``, ``scores_absorbed``) equal to ``Q·Kᵀ`` exactly.

Values are checked three ways: worked out by hand in the tests (the bundled exercise), against PyTorch
(explicit K/V up-projections in torch and ``scaled_dot_product_attention``) on generated exercises, and the
two routes against each other, as exact fractions.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from tutor.exact.numbers import Rat
from tutor.exercise import exercise_from_data
from tutor.exercise.catalog import resolve
from tutor.steps import keys, solve

BUNDLED = "mla-latent-two-heads-3x4"
REPO = Path(__file__).resolve().parent.parent


def rationals(step) -> list[list[Fraction]]:
    """A step's exact entries as fractions (each one must be rational)."""
    out = []
    for row in step.exact:
        assert all(isinstance(e, Rat) for e in row), step.key
        out.append([e.q for e in row])
    return out


# --- the bundled exercise, worked out by hand ------------------------------------------------------------------


def test_the_bundled_exercise_by_hand():
    """X = [[1,0,1,0],[0,1,0,1],[1,1,0,0]], W_DKV = [[1,0],[0,1],[1,1],[0,1]]:
    c_KV row I = [1+1, 1] = [2, 1]; like = [0, 1+1] = [0, 2]; tea = [1, 1].
    Head 1: W_UK = [[1,0],[1,-1]] so K row I = 2·[1,0] + 1·[1,-1] = [3,-1], like = 2·[1,-1] = [2,-2],
    tea = [1,0] + [1,-1] = [2,-1]; W_UV = I so V = c_KV.  Q = X·W_Q = [[2,1],[0,1],[1,1]].
    Q·W_UKᵀ: W_UKᵀ = [[1,1],[0,-1]], row I = [2, 2-1] = [2,1], like = [0,-1], tea = [1, 0].
    Scores row I = [2·3-1, 2·2-2, 2·2-1] = [5, 2, 3]; by the latent [2·2+1·1, 0+1·2, 2+1] = [5, 2, 3].
    Head 2: Q = [[1,1],[1,0],[1,1]], W_UK = [[0,1],[1,1]]: K = [[1,3],[2,2],[1,2]], Q_abs = [[1,2],[0,1],[1,2]],
    scores = [[4,4,3],[1,2,1],[4,4,3]]."""
    sol = solve(resolve(BUNDLED))
    assert rationals(sol.step("c_kv", None)) == [[2, 1], [0, 2], [1, 1]]
    assert rationals(sol.step("k", 0)) == [[3, -1], [2, -2], [2, -1]]
    assert rationals(sol.step("v", 0)) == [[2, 1], [0, 2], [1, 1]]
    assert rationals(sol.step("q_absorbed", 0)) == [[2, 1], [0, -1], [1, 0]]
    assert rationals(sol.step("scores", 0)) == [[5, 2, 3], [-1, -2, -1], [2, 0, 1]]
    assert rationals(sol.step("scores_absorbed", 0)) == [[5, 2, 3], [-1, -2, -1], [2, 0, 1]]
    assert rationals(sol.step("k", 1)) == [[1, 3], [2, 2], [1, 2]]
    assert rationals(sol.step("v", 1)) == [[2, 1], [0, -2], [1, 0]]
    assert rationals(sol.step("q_absorbed", 1)) == [[1, 2], [0, 1], [1, 2]]
    assert rationals(sol.step("scores_absorbed", 1)) == [[4, 4, 3], [1, 2, 1], [4, 4, 3]]


def test_the_latent_comes_first_and_each_head_reads_it():
    ex = resolve(BUNDLED)
    order = keys(ex)
    assert order[0] == ("c_kv", None)
    assert order[1:9] == [("q", 0), ("k", 0), ("v", 0), ("scores", 0), ("q_absorbed", 0), ("scores_absorbed", 0),
                          ("scaled", 0), ("masked", 0)]
    from tutor.steps import inputs
    assert inputs(ex, ("k", 1)) == (("c_kv", None),) and inputs(ex, ("v", 0)) == (("c_kv", None),)
    assert inputs(ex, ("scaled", 0)) == (("scores_absorbed", 0),)  # the scaling reads the absorbed route


def test_the_heads_hold_the_products_so_k_is_the_same_either_way():
    """Each head's w_k is W_DKV·W_UK: X·(W_DKV·W_UK) = (X·W_DKV)·W_UK, computed here by hand for head 1:
    W_DKV·W_UK = [[1,0],[1,-1],[1+1, 0-1],[1,-1]] = [[1,0],[1,-1],[2,-1],[1,-1]]."""
    ex = resolve(BUNDLED)
    assert ex.heads[0].w_k == ((1, 0), (1, -1), (2, -1), (1, -1))
    assert ex.mla is not None and ex.mla.d_c == 2


# --- the cache per token, and the words -----------------------------------------------------------------------


def test_explain_counts_the_cache_per_token_and_says_why(cli):
    r = cli("explain", BUNDLED)
    assert r.code == 0, r.err
    text = " ".join(r.out.split())
    assert "c_KV holds d_c = 2 numbers" in text
    assert "num_heads·(d_k + d_v) = 2·(2 + 2) = 8: 4 times as many" in text
    assert "d_c + d_R numbers, against 2·num_heads·d_k" in text
    assert "no number can show that mistake; what it loses is the memory: 8 numbers per token here instead of 2" in text and "decoupled RoPE" in text
    assert "exactly (both computed as fractions and compared)" in text
    assert "Latent (shared by every head)" in text
    assert text.index("Latent c_KV = X·W_DKV") < text.index("Head 1")  # the latent before the heads read it
    assert "c_kv [B, L_k, d_c] = [1, 3, 2]" in text  # the production view is the latent's


def test_explain_in_chinese(cli):
    r = cli("--lang", "zh", "explain", BUNDLED)
    assert r.code == 0, r.err
    text = "".join(r.out.split())
    assert "多头潜在注意力" in text and "c_KV存d_c=2个数" in text and "是它的4倍" in text


def test_json_has_the_latent_once_and_the_absorbed_steps_per_head(cli):
    r = cli("explain", BUNDLED, "--format", "json")
    assert r.code == 0, r.err
    steps = json.loads(r.out)["steps"]
    ids = [(s["id"], s["head"]) for s in steps]
    assert ids.count(("c_kv", None)) == 1 and ids[0] == ("c_kv", None)
    assert ("q_absorbed", 1) in ids and ("scores_absorbed", 0) in ids
    mla = json.loads(r.out)["exercise"]["mla"]
    assert mla["d_c"] == 2 and mla["heads"][0]["w_uk"] == [["1", "0"], ["1", "-1"]]
    absorbed = next(s for s in steps if (s["id"], s["head"]) == ("scores_absorbed", 1))
    explicit = next(s for s in steps if (s["id"], s["head"]) == ("scores", 1))
    assert absorbed["exact"] == explicit["exact"]


def test_the_backward_pass_is_refused_in_one_line(cli):
    r = cli("explain", BUNDLED, "--backward")
    assert r.code == 2
    assert r.err.strip().count("\n") == 0 and "not built" in r.err and "Traceback" not in r.err


def test_new_like_and_practice_fresh_refuse_the_latent_in_one_line(cli):
    for argv in (("new", "--like", BUNDLED, "--seed", "1"), ("practice", BUNDLED, "--fresh")):
        r = cli(*argv, input="quit\n")
        assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
        assert "fresh numbers for its latent are not drawn yet" in r.err


@pytest.mark.parametrize("seed", range(4))
def test_the_production_view_has_the_shapes_the_latent_run_makes(seed):
    from tutor.production import exercise_trace, run_exercise

    ex = generated(seed)
    run = run_exercise(ex)
    shapes = {s.name: s.shape for s in exercise_trace(ex)}
    assert shapes["c_kv"] == (1, *run.c_kv.shape)
    assert shapes["q_absorbed"] == (1, *run.q_absorbed.shape)
    assert shapes["k_heads"] == (1, *run.k.shape) and shapes["v_heads"] == (1, *run.v.shape)
    assert shapes["scores"] == (1, *run.scores.shape) and shapes["merge"] == (1, *run.context.shape)


def test_the_untransposed_w_uk_is_named_by_check(cli, tmp_path):
    """Q·W_UK for head 1 (W_UK = [[1,0],[1,-1]]): row I = [2+1, -1] = [3,-1], like = [1,-1], tea = [2,-1]."""
    solution = tmp_path / "sol.yaml"
    solution.write_text(f"exercise: {BUNDLED}\nheads:\n  - q_absorbed: [[3, -1], [1, -1], [2, -1]]\n  - {{}}\n",
                        encoding="utf-8")
    r = cli("check", solution)
    assert r.code == 1
    assert "You multiplied Q by W_UK as it is" in " ".join(r.out.split())


# --- the file: every mistake in one line, exit 2 -------------------------------------------------------------

GOOD = (REPO / "exercises" / f"{BUNDLED}.yaml").read_text(encoding="utf-8")

BAD = {
    "w_dkv_rows": (("w_dkv: [[1, 0], [0, 1], [1, 1], [0, 1]]", "w_dkv: [[1, 0], [0, 1], [1, 1]]"),
                   "mla.w_dkv is [3 × 2], but x has 4 columns"),
    "d_c": (("d_c: 2", "d_c: 1"), "mla.d_c is 1, but w_dkv has 2 columns"),
    "w_uk_cols": (("- w_uk: [[1, 0], [1, -1]]", "- w_uk: [[1, 0, 1], [1, -1, 1]]"),
                  "w_uk of head 1 (mla.heads) is [2 × 3], but the heads' d_k is 2 (the columns of w_q)"),
    "w_uk_rows": (("- w_uk: [[1, 0], [1, -1]]", "- w_uk: [[1, 0]]"),
                  "w_uk of head 1 (mla.heads) is [1 × 2], but the latent has d_c = 2"),
    "count": (("    - w_uk: [[0, 1], [1, 1]]\n      w_uv: [[1, 1], [0, -1]]\n", ""),
              "mla.heads and heads differ in length (1 against 2)"),
    "w_k_in_head": (("  - w_q: [[0, 1], [1, 0], [1, 0], [0, 0]]\n",
                     "  - w_q: [[0, 1], [1, 0], [1, 0], [0, 0]]\n    w_k: [[0, 1], [1, 0], [1, 0], [0, 0]]\n"),
                    "w_k is given in head 2, but with mla its keys and values come from the latent"),
    "cache": (("mask: causal", "mask: causal\ncache: [{k: [[1, 0]], v: [[1, 0]]}, {k: [[1, 0]], v: [[1, 0]]}]"),
              "cache is not built together with mla yet"),
    "grouped": (("mask: causal", "mask: causal\nnum_kv_heads: 1"), "num_kv_heads is not built together with mla"),
    "unknown": (("  d_c: 2", "  d_c: 2\n  w_dk: 1"), "mla.w_dk: unknown field (did you mean 'w_dkv'?)"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_mla_field_is_one_line_naming_the_shapes(cli, tmp_path, case):
    (old, new), said = BAD[case]
    assert old in GOOD
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD.replace(old, new), encoding="utf-8")
    r = cli("explain", path)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err  # one problem, said once
    assert said in lines[0] and "Traceback" not in r.err


def test_the_fused_form_is_refused_with_mla(cli, tmp_path):
    path = tmp_path / "fused.yaml"
    path.write_text("id: f\ntitle: t\nx: [[1, 0], [0, 1]]\nnum_heads: 1\nw_q: [[1, 0], [0, 1]]\n"
                    "mla: {w_dkv: [[1], [0]], heads: [{w_uk: [[1, 0]], w_uv: [[1, 0]]}]}\n", encoding="utf-8")
    r = cli("explain", path)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "mla needs the per-head form" in r.err



@pytest.mark.parametrize("field, said", [("norm: rmsnorm", "mla: norm with mla is not built"),
                                         ("residual: true", "residual: residual with mla is not built")])
def test_the_pre_norm_block_with_mla_is_refused_in_one_line(cli, tmp_path, field, said):
    """The merge of the pre-norm block and MLA: c_KV would have to be read off X_norm, and the block's run has no
    latent; refused at the field, exit 2, rather than numbers that leave the norm or the latent out."""
    path = tmp_path / "mla-block.yaml"
    text = (REPO / "exercises" / f"{BUNDLED}.yaml").read_text(encoding="utf-8")
    path.write_text(text.replace("\nmask: causal\n", f"\nmask: causal\n{field}\n"), encoding="utf-8")
    r = cli("explain", path)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and said in r.err and "Traceback" not in r.err, r.err

# --- generated exercises: torch, the NumPy mirror, and the two routes --------------------------------------------


def _frac(rng: np.random.Generator, r: int, c: int) -> list[list[str]]:
    return [[f"{int(n)}/{int(d)}" for n, d in zip(rn, rd)]
            for rn, rd in zip(rng.integers(-3, 4, (r, c)), rng.integers(1, 4, (r, c)))]


def generated(seed: int):
    """A random MLA exercise: 1-3 heads, d_c 1 or 2, d_k 1-3, self- or cross-attention, a causal mask or none."""
    rng = np.random.default_rng(seed)
    L, H, d_c, d_k, d_v = (int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 3)),
                           int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    d_model = int(rng.integers(2, 5))
    cross = bool(rng.integers(0, 2))
    L_k, d_kv = (int(rng.integers(1, 4)), int(rng.integers(1, 4))) if cross else (L, d_model)
    data = {
        "id": f"mla-{seed}", "title": "generated", "x": _frac(rng, L, d_model),
        "heads": [{"w_q": _frac(rng, d_model, d_k)} for _ in range(H)],
        "mla": {"w_dkv": _frac(rng, d_kv, d_c),
                "heads": [{"w_uk": _frac(rng, d_c, d_k), "w_uv": _frac(rng, d_c, d_v)} for _ in range(H)]},
    }
    if cross:
        data["x_kv"] = _frac(rng, L_k, d_kv)
    elif rng.integers(0, 2):
        data["mask"] = "causal"
    if rng.integers(0, 2):
        data["w_o"] = _frac(rng, H * d_v, 2)
    return exercise_from_data(data)


SEEDS = range(12)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_absorbed_scores_are_the_explicit_ones_exactly(seed):
    ex = generated(seed)
    sol = solve(ex)
    for h in range(ex.num_heads):
        assert rationals(sol.step("scores_absorbed", h)) == rationals(sol.step("scores", h))
        assert sol.step("q_absorbed", h).shape == (ex.L, ex.mla.d_c)


@pytest.mark.parametrize("seed", SEEDS)
def test_parity_with_torch(seed):
    """torch: c = x_kv @ W_DKV, K_h = c @ W_UK_h, V_h = c @ W_UV_h, Q_h = x @ W_Q_h, then
    F.scaled_dot_product_attention (is_causal for a causal mask), heads concatenated, W_O; and the absorbed
    scores (Q_h @ W_UK_hᵀ) @ cᵀ against Q_h @ K_hᵀ.  The exact engine and the NumPy mirror both agree."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    from tutor.production.run import run_exercise

    ex = generated(seed)
    sol = solve(ex)

    def t(m):
        return torch.tensor([[float(v) for v in row] for row in m], dtype=torch.float64)

    c = t(ex.kv) @ t(ex.mla.w_dkv)
    q = torch.stack([t(ex.x) @ t(h.w_q) for h in ex.heads])  # [H, L, d_k]
    k = torch.stack([c @ t(w) for w in ex.mla.w_uk])  # [H, L_k, d_k]
    v = torch.stack([c @ t(w) for w in ex.mla.w_uv])  # [H, L_k, d_v]
    out = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=ex.mask_kind == "causal")[0]
    absorbed = torch.stack([q[h] @ t(ex.mla.w_uk[h]).T @ c.T for h in range(ex.num_heads)])
    np.testing.assert_allclose(absorbed.numpy(), (q @ k.transpose(-2, -1)).numpy(), rtol=1e-12, atol=1e-12)
    merged = out.transpose(0, 1).reshape(ex.L, -1)
    final = merged @ t(ex.w_o) if ex.w_o is not None else merged
    np.testing.assert_allclose(np.array(sol.step("c_kv", None).value), c.numpy(), rtol=1e-12, atol=1e-12)
    for h in range(ex.num_heads):
        np.testing.assert_allclose(np.array(sol.step("k", h).value), k[h].numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.array(sol.step("scores_absorbed", h).value), absorbed[h].numpy(),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.array(sol.step("head_output", h).value), out[h].numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.array(sol.final.value), final.numpy(), rtol=1e-12, atol=1e-12)
    run = run_exercise(ex)
    assert run.c_kv is not None and run.scores_absorbed is not None
    np.testing.assert_allclose(run.output, final.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(run.scores_absorbed, absorbed.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_verify_reads_every_step_off_the_latent_run(seed):
    from tutor.production import verify

    verify(solve(generated(seed)))  # raises EngineMismatchError at the first step the engines disagree on

"""Issue 23's polish: the bundled label in Chinese, the order of ``list``, the scores' title, the RoPE
mistakes ``validate`` names as invisible, and ``new --mla``."""

from __future__ import annotations

import pytest


def test_explain_in_chinese_says_bundled_in_chinese(cli):
    code, out, _ = cli("explain", "single-head-3x4", "--lang", "zh", env={"COLUMNS": "200"})
    assert code == 0
    assert "练习 single-head-3x4（内置：single-head-3x4.yaml）" in out and "bundled" not in out


def test_explain_in_english_keeps_the_bundled_tag(cli):
    code, out, _ = cli("explain", "single-head-3x4", env={"COLUMNS": "200"})
    assert code == 0 and "Exercise single-head-3x4  (bundled:single-head-3x4.yaml)" in out


def test_a_file_given_by_path_shows_its_path_in_chinese_too(cli, tmp_path):
    from .conftest import EXERCISES

    f = tmp_path / "mine.yaml"
    f.write_text((EXERCISES / "single-head-3x4.yaml").read_text(encoding="utf-8").replace(
        "id: single-head-3x4", "id: mine-3x4"), encoding="utf-8")
    code, out, _ = cli("explain", str(f), "--lang", "zh", env={"COLUMNS": "300"})
    assert code == 0 and f"练习 mine-3x4（{f}）" in out


def test_every_tag_of_a_bundled_exercise_is_a_concept_of_the_learning_order():
    """A tag outside :data:`LEARNING_ORDER` is not counted, so a new concept must be placed there."""
    from tutor.exercise.catalog import LEARNING_ORDER, bundled

    missing = {(ex.id, tag) for ex in bundled() for tag in ex.tags if tag not in LEARNING_ORDER}
    assert not missing


def test_list_puts_the_plain_decode_step_before_the_sliding_windows_rolling_cache(cli):
    import json

    code, out, _ = cli("list", "--format", "json")
    ids = [r["id"] for r in json.loads(out)]
    assert code == 0
    assert ids.index("decode-one-token-cache-3") < ids.index("decode-sliding-window-cache-3")
    # the window's exercises after every plain causal one, the pre-norm block after RoPE's first exercise
    assert ids.index("two-head-causal-3x4") < ids.index("sliding-window-sinks-4x2")
    assert ids.index("prenorm-rmsnorm-3x2") < ids.index("prenorm-layernorm-causal-3x3")


def test_the_scores_title_names_what_is_multiplied(cli):
    """The title beside ``scores = Q_rot·K_rotᵀ`` says Q_rot·K_rotᵀ; MLA's explicit scores say K's origin."""
    from tutor.base.messages import use_language
    from tutor.exercise.catalog import resolve
    from tutor.steps import KINDS

    rope, mla, plain = (resolve(i) for i in ("rope-relative-4x2", "mla-latent-two-heads-3x4", "single-head-3x4"))
    for lang, want in (("en", ("Scores Q_rot·K_rotᵀ", "Explicit scores Q·Kᵀ (K = c_KV·W_UK)", "Scores Q·Kᵀ")),
                       ("zh", ("注意力分数（scores）Q_rot·K_rotᵀ", "显式计算的注意力分数（scores）Q·Kᵀ（K = c_KV·W_UK）",
                               "注意力分数（scores）Q·Kᵀ"))):
        with use_language(lang):
            assert tuple(str(KINDS["scores"].title_of(ex=ex, step=None)) for ex in (rope, mla, plain)) == want
    code, out, _ = cli("explain", "rope-relative-4x2", env={"COLUMNS": "200"})
    assert code == 0 and "6. Scores Q_rot·K_rotᵀ\n   scores = Q_rot·K_rotᵀ" in out and "Scores Q·Kᵀ" not in out


def test_practice_shows_the_rope_scores_title(cli):
    code, out, _ = cli("practice", "rope-relative-4x2", input="skip\n" * 5 + "quit\n", env={"COLUMNS": "200"})
    assert "Step 6 of 9: Scores Q_rot·K_rotᵀ" in out


def test_validate_names_the_rope_mistakes_d_k_2_cannot_catch(cli):
    """With d_k = 2 both pairings make the one pair (0, 1), and θ_0 = 1 with or without the 2: validate says so,
    at the rotations where the mistakes are made; with d_k = 4 (rope-half-causal-3x4) it names neither."""
    from .conftest import EXERCISES

    code, out, err = cli("validate", str(EXERCISES / "rope-relative-4x2.yaml"), env={"COLUMNS": "400"})
    assert code == 0
    text = out + err
    assert ("cannot catch pairing RoPE's dimensions the other way (rotate_half's (i, i + d_k/2) for the interleaved "
            "(2i, 2i+1), or the reverse) at Q_rot, K_rot (d_k = 2: both pairings make the one pair (0, 1))") in text
    assert ("cannot catch using rotate_half with the angles laid out for the interleaved pairs (θ_0, θ_0, θ_1, θ_1, …) "
            "at Q_rot, K_rot (d_k = 2: one pair, (0, 1), and one angle, so both layouts are the same)") in text
    assert "cannot catch turning the interleaved pairs by the angles laid out for rotate_half" in text
    assert "cannot catch leaving the 2 out of RoPE's angle" in text
    assert "counting RoPE's positions from 1" not in text and "rotating V" not in text
    code, out, err = cli("validate", str(EXERCISES / "rope-half-causal-3x4.yaml"), env={"COLUMNS": "400"})
    assert code == 0 and "RoPE" not in out + err
    code, out, err = cli("validate", str(EXERCISES / "rope-relative-4x2.yaml"), "--lang", "zh", env={"COLUMNS": "400"})
    assert "把 RoPE 的维度配对弄反" in out + err and "用 rotate_half，却按交错配对排列角度" in out + err and "（d_k = 2：两种配对方式都只有一对 (0, 1)）" in out + err


def test_the_rope_mistakes_are_made_at_the_rotations_or_at_v():
    from tutor.exercise.catalog import resolve
    from tutor.mistakes.diagnose import MISCONCEPTIONS
    from tutor.mistakes.invisible import CORE_ROPE, origins

    ex = resolve("rope-half-causal-3x4")
    made = {m.key: [k[0] for k in origins(m, ex)] for m in MISCONCEPTIONS if m.key in CORE_ROPE}
    assert made == {"rope_pairing_mixed": ["q_rot", "k_rot"], "rope_positions_from_one": ["q_rot", "k_rot"],
                    "rope_half_interleaved_angles": ["q_rot", "k_rot"], "rope_interleaved_half_angles": ["q_rot", "k_rot"],
                    "rope_theta_without_two": ["q_rot", "k_rot"], "rope_v_rotated": ["v"]}


# --- new --mla ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [["--mla", "2"], ["--mla", "1", "--heads", "2", "--mask", "causal"],
                                  ["--mla", "2", "--cross", "3", "--d-model", "3"],
                                  ["--mla", "2", "--alibi", "--heads", "2", "--mask", "causal"]],
                         ids=["d_c2", "d_c1-causal", "cross", "alibi"])
@pytest.mark.parametrize("seed", [1, 7])
def test_new_mla_writes_a_latent_exercise_whose_absorbed_scores_equal_the_explicit_ones(cli, args, seed):
    from fractions import Fraction

    from tutor.exercise import validate_text
    from tutor.production import verify
    from tutor.steps import solve

    r = cli("new", *args, "--seed", str(seed))
    assert r.code == 0, r.err
    v = validate_text(r.out)
    assert v.ok and v.exercise is not None and v.exercise.mla is not None
    ex = v.exercise
    assert ex.mla.d_c == int(args[1]) and "latent-kv" in ex.tags and f"--mla {args[1]}" in r.out
    sol = solve(ex)  # its build checks the absorbed scores equal to the explicit ones, exactly
    for h in range(ex.num_heads):
        explicit, absorbed = sol.step("scores", h), sol.step("scores_absorbed", h)
        assert explicit.exact == absorbed.exact
        assert all(isinstance(e.q, Fraction) and abs(e.q) <= 12 for row in explicit.exact for e in row)  # small
        k = sol.step("k", h).exact
        assert any(e.q for row in k for e in row)  # K is not all zero
    verify(sol)
    assert cli("new", *args, "--seed", str(seed)).out == r.out  # the same seed writes the same file


@pytest.mark.parametrize("args, words", [(["--rope", "half"], "--rope"), (["--cache", "2"], "--cache"),
                                         (["--norm", "rmsnorm"], "--norm"), (["--residual"], "--residual"),
                                         (["--kv-heads", "1", "--heads", "2"], "--kv-heads"),
                                         (["--mla", "3"], "less than or equal to 2")])
def test_new_refuses_mla_with_what_the_format_refuses_in_one_line(cli, args, words):
    r = cli("new", *(args if "--mla" in args else ["--mla", "2", *args]))
    assert r.code == 2 and words in r.err and "Traceback" not in r.err and len(r.err.strip().splitlines()) <= 2


def test_new_mla_in_chinese_writes_its_comments_and_translation_in_chinese(cli):
    r = cli("new", "--mla", "2", "--seed", "4", "--lang", "zh")
    assert r.code == 0 and "DeepSeek-V2 的多头潜在注意力" in r.out and "宽度 d_c = 2 的潜在 KV（MLA）" in r.out

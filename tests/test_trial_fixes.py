"""Issue 23, what a trial of the v3 features found: each test fails on the code before its fix.

Every expected line is the whole line, written by hand from the file it reads
(line and column counted 1-based in the YAML below).
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
WINDOW = (REPO / "exercises" / "sliding-window-sinks-4x2.yaml").read_text(encoding="utf-8")


def _window_file(tmp_path: Path, mask: str) -> Path:
    """The bundled window exercise (4 tokens, L_k = 4) with ``mask`` on line 42, under another id."""
    text = WINDOW.replace("mask: {sliding_window: 2, sinks: 1}", "mask: " + mask)
    text = text.replace("id: sliding-window-sinks-4x2", "id: trial-window")
    assert text.splitlines()[41] == "mask: " + mask
    p = tmp_path / "w.yaml"
    p.write_text(text, encoding="utf-8")
    return p


# --- 1. a huge window or count of sinks is refused at its field, not an OverflowError in explain -----

HUGE = "99999999999999999999999"


@pytest.mark.parametrize("mask, col, name", [
    ("{sliding_window: " + HUGE + "}", 24, "sliding_window"),
    ("{sliding_window: 2, sinks: " + HUGE + "}", 34, "sinks"),
])
@pytest.mark.parametrize("command", ["validate", "explain"])
def test_a_huge_window_or_sinks_is_one_line_at_its_field_exit_2(cli, tmp_path, mask, col, name, command):
    f = _window_file(tmp_path, mask)
    r = cli(command, str(f))
    assert r.code == 2
    line = (f"{f}:42:{col}: mask.{name}: {name} is {HUGE}, above the limit of 16 (the limits keep an exercise "
            f"small enough for paper and for the exact engine; make {name} at most 16)")
    stream = r.out if command == "validate" else r.err
    assert "Traceback" not in r.err
    assert [ln for ln in stream.splitlines() if f"mask.{name}" in ln] == [line if command == "validate" else "error: " + line]


def test_a_window_of_16_is_still_valid_and_17_is_not(cli, tmp_path):
    assert cli("validate", str(_window_file(tmp_path, "{sliding_window: 16}"))).code == 0
    assert cli("validate", str(_window_file(tmp_path, "{sliding_window: 17}"))).code == 2


def test_sinks_covering_every_key_warn_like_an_oversized_window(cli, tmp_path):
    f = _window_file(tmp_path, "{sliding_window: 2, sinks: 4}")
    r = cli("validate", str(f))
    assert r.code == 0
    assert (f"{f}:42:34: warning: mask.sinks: sinks: 4 is at least L_k = 4: every key is a sink, so the mask is "
            "the causal one (use fewer sinks than L_k to see keys leave the window)") in r.out.splitlines()
    assert "mask.sinks" not in cli("validate", str(_window_file(tmp_path, "{sliding_window: 2, sinks: 3}"))).out


# --- 2. each v3 field says what IT expects, not the mask's list nor "a list" -------------------------


def _with_field(tmp_path: Path, line: str) -> Path:
    """The window exercise without its mask, and ``line`` as its last line (line 44)."""
    lines = [ln for ln in WINDOW.replace("id: sliding-window-sinks-4x2", "id: trial-field").splitlines()
             if not ln.startswith("mask:")]
    p = tmp_path / "f.yaml"
    p.write_text("\n".join(lines + [line]) + "\n", encoding="utf-8")
    assert len(lines) == 43
    return p


FIELDS = [  # (line 44, column, English problem, Chinese problem)
    ("norm: batchnorm", 7, "norm: expected rmsnorm or layernorm, found the text 'batchnorm'",
     "norm: 应为以下之一：rmsnorm、layernorm，实际为文本 'batchnorm'"),
    ("norm: [rmsnorm]", 7, "norm: expected rmsnorm or layernorm, found a list",
     "norm: 应为以下之一：rmsnorm、layernorm，实际为列表"),
    ("norm_placement: sideways", 17, "norm_placement: expected pre or post, found the text 'sideways'",
     "norm_placement: 应为以下之一：pre、post，实际为文本 'sideways'"),
    ("rope: {base: 10000, pairing: diagonal}", 30, "rope.pairing: expected interleaved or half, found the text 'diagonal'",
     "rope.pairing: 应为以下之一：interleaved、half，实际为文本 'diagonal'"),
    ("rope: true", 7, "rope: expected a mapping {base, pairing}, found the boolean true",
     "rope: 应为映射 {base, pairing}，实际为布尔值 true"),
    ("mla: 5", 6, "mla: expected a mapping {d_c, w_dkv, heads}, found the number 5",
     "mla: 应为映射 {d_c, w_dkv, heads}，实际为数字 5"),
]


@pytest.mark.parametrize("line, col, en, zh", FIELDS, ids=[f[0] for f in FIELDS])
def test_each_v3_field_says_what_it_expects_in_english_and_chinese(cli, tmp_path, line, col, en, zh):
    f = _with_field(tmp_path, line)
    for lang, want in (("en", en), ("zh", zh)):
        r = cli("--lang", lang, "validate", str(f))
        assert r.code == 2
        assert r.out.splitlines()[0] == f"{f}:44:{col}: {want}"


def test_a_near_miss_is_suggested_from_the_field_s_own_words(cli, tmp_path):
    f = _with_field(tmp_path, "norm: rmsnrom")
    assert cli("validate", str(f)).out.splitlines()[0] == (
        f"{f}:44:7: norm: expected rmsnorm or layernorm, found the text 'rmsnrom' (did you mean 'rmsnorm'?)")


# --- 3. a help text's [...] is shown, not eaten as rich markup -----------------------------------------


def _bracketed_keys() -> list[str]:
    """Every ``cli.*`` help sentence holding ``[...]`` (typer's own words ``[default: …]`` aside)."""
    from tutor.base.messages import EN

    return [k for k, v in EN.items() if k.startswith("cli.") and not k.startswith("cli.help.") and "[" in v
            and "{" not in v]


def test_the_residual_help_keeps_its_shape_in_english_and_chinese(cli):
    for lang, want in (("en", "Add X to the output (the block's residual; W_O is drawn [heads·d_k, d_model])."),
                       ("zh", "把 X 加到输出上（该块的残差连接；W_O 按 [heads·d_k, d_model] 生成）。")):
        code, out, _ = cli("new", "--help", "--lang", lang, env={"COLUMNS": "300"})
        assert code == 0
        (line,) = [ln for ln in out.splitlines() if ln.lstrip("│ ").startswith("--residual ")]  # its own row, not a mention
        assert line.rstrip(" │").endswith(want)


def test_every_help_sentence_with_brackets_is_shown_whole(cli):
    from tutor.base.catalogs.zh import ZH
    from tutor.base.messages import EN

    from .test_language import _commands

    keys = _bracketed_keys()
    assert "cli.new.residual" in keys
    for lang, catalog in (("en", EN), ("zh", ZH)):
        shown = "".join(cli(*command, "--help", "--lang", lang, env={"COLUMNS": "400"}).out for command in _commands())
        for key in keys:
            assert catalog[key] in shown, key


# --- 4. new --norm layernorm draws rows LayerNorm can divide; --d-model 1 is refused ---------------------


@pytest.mark.parametrize("seed", range(1, 9))
def test_new_layernorm_at_d_model_2_draws_no_constant_row(cli, tmp_path, seed):
    from tutor.exercise import load_exercise

    out = tmp_path / "n.yaml"
    r = cli("new", "--norm", "layernorm", "--d-model", "2", "--seed", str(seed), "-o", str(out))
    assert r.code == 0, r.err
    ex = load_exercise(out)
    assert ex.norm == "layernorm"
    assert all(row[0] != row[1] for row in ex.x)  # each row's variance ((a - b)/2)² is not 0
    assert cli("validate", str(out)).code == 0


def test_new_layernorm_with_d_model_1_is_an_option_error(cli, tmp_path):
    r = cli("new", "--norm", "layernorm", "--d-model", "1", "--seed", "1", "-o", str(tmp_path / "n.yaml"))
    assert (r.code, r.out) == (2, "")
    assert r.err.splitlines()[0] == (
        "error: invalid value for --d-model: --norm layernorm needs --d-model 2 or more, found 1: a row of one "
        "entry is its own mean, so its variance is 0 and LayerNorm would divide by sqrt(0)")
    assert not (tmp_path / "n.yaml").exists()
    assert cli("new", "--norm", "rmsnorm", "--d-model", "1", "--seed", "1", "-o", str(tmp_path / "r.yaml")).code == 0


# --- 5. Markdown: the masked step adds M to the biased scores when there is a bias -----------------------

_CASES = (r", \quad M_{ij} = \begin{cases} 0 & \text{if query } i \text{ may attend key } j \\ -\infty & "
          r"\text{otherwise} \end{cases}$")


@pytest.mark.parametrize("exercise, before", [("alibi-three-heads-3x2", "biased"), ("sliding-window-sinks-4x2", "scaled")])
def test_the_markdown_masked_formula_names_what_the_mask_is_added_to(cli, exercise, before):
    r = cli("explain", exercise, "--format", "markdown")
    assert r.code == 0, r.err
    formulas = [ln for ln in r.out.splitlines() if ln.startswith(r"$\text{masked} = ")]
    assert formulas and set(formulas) == {rf"$\text{{masked}} = \text{{{before}}} + M" + _CASES}
    assert rf"$\text{{{before}}}\,[" in r.out  # the shape line says the same


# --- 6. the sinks' count agrees with its noun: "the first key", "the first 2 keys" ----------------------


def test_the_forgotten_sinks_diagnosis_says_the_first_key(cli, tmp_path):
    import json

    import numpy as np

    x = np.array([[1, 0], [0, 1], [1, 1], [1, 0]], dtype=np.float64)  # sliding-window-sinks-4x2: W = 2, S = 1
    scaled = (x @ (x @ np.array([[1, 1], [0, 1]])).T) / np.sqrt(2)
    a = np.where(np.array([[i - 2 < j <= i for j in range(4)] for i in range(4)]), scaled, -np.inf)  # no sink
    weights = np.exp(a - a.max(1, keepdims=True))
    weights /= weights.sum(1, keepdims=True)
    (tmp_path / "sol.yaml").write_text("exercise: sliding-window-sinks-4x2\nweights: "
                                       + json.dumps(np.round(weights, 6).tolist()) + "\n")
    doc = json.loads(cli("check", str(tmp_path / "sol.yaml"), "--format", "json").out)
    (said,) = [d for s in doc["steps"] for d in s["diagnoses"] if d["key"] == "sinks_forgotten"]
    assert "sees the first key (S = 1)," in json.dumps(said, ensure_ascii=False)


@pytest.mark.parametrize("lang, S, want", [
    ("en", 1, "also sees the first key (S = 1), even"), ("en", 3, "also sees the first 3 keys (S = 3), even"),
    ("zh", 1, "还能看到前 1 个键（S = 1）"), ("zh", 3, "还能看到前 3 个键（S = 3）"),
])
def test_the_sinks_sentences_count_their_keys(lang, S, want):
    from tutor.base.messages import t, use_language

    with use_language(lang):
        assert want in t("diagnose.sinks_forgotten", sinks=S)
        first = "the first key" if S == 1 else f"the first {S} keys"
        assert (f"keeping {first} (S = {S}) visible" if lang == "en" else f"让前 {S} 个键（S = {S}）") \
            in t("step.masked.why.sinks", S=S)

"""Issue 8 on `check` and its neighbours: what a hostile or careless solution file, or a
command line, may no longer do.

B.5  entries with a positive decimal exponent (``1e1``: -1 places) crashed the
     report, and a crash exited 1 ("the solution is wrong");
B.6  NaN (what nn.MultiheadAttention prints for a fully masked query) made the
     whole file unusable; ``oo`` was "must stand alone" when it stood alone;
D.10 ``exercise:`` could name any file on the disk, and the error quoted it;
G.22 ``--export`` overwrote files, and ignored ``--format``;
G.24 ``--format json`` printed nothing on stdout on an error;
G.25 "1 entries right", "1 of 1 given steps are wrong".

Right values are worked out here by hand (the classic exercise's scores are
[[2, 4, 4], [4, 8, 8], [4, 8, 8]]; its scaled scores those over √2).
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from tutor.audit.check import audit
from tutor.audit.solution import NanEntry, read_solution
from tutor.base.decimals import fixed
from tutor.base.errors import ExerciseError
from tutor.base.messages import EN, plural, t
from tutor.cli import EXIT_INTERNAL
from tutor.mistakes.diagnose import num_text
from tutor.render.check import dumps, render
from tutor.render.text import decimal

from .oracle import require_torch


@pytest.fixture
def variables(variables):
    """The report's lines whole: these tests compare content; wrapping at the width is tested in test_terminal.py."""
    return {**variables, "COLUMNS": "400"}

REPO = Path(__file__).resolve().parents[1]
EXERCISES = REPO / "exercises"


def report(text: str, base: Path = EXERCISES):
    return audit(read_solution(text, "sol.yaml", base=base))


def full_report(text: str, base: Path = EXERCISES) -> tuple[int, str, dict]:
    """The exit code, the rendered report and its JSON for a solution text (never raising)."""
    r = report(text, base)
    buf = io.StringIO()
    render(r, Console(file=buf, width=100))
    return r.exit_code, buf.getvalue(), json.loads(dumps(r))


# --- B.5: places <= 0, and no crash ever exits 1 ----------------------------------------------


def test_the_issue_input_is_a_report_not_a_crash(cli, tmp_path):
    sol = tmp_path / "s.yaml"
    sol.write_text("exercise: single-head-3x4\nscores: [[3, 4, 4], [4, 8, 8], [4, 8, 1e1]]\n")
    code, out, err = cli("check", str(sol))
    # 3 for 2 is wrong; 1e1 claims [5, 15], which holds 8
    assert code == 1
    assert "  ✗ wrong    scores  1 of 9 entries off" in out
    assert "[t1, t1]: you wrote 3, the right value is 2" in out
    assert "Traceback" not in err and "error" not in err


@pytest.mark.parametrize("entry", ["1e1", "1e2", "5E0", "2.5e1", "-1E1"])
def test_entries_to_zero_or_fewer_places_in_every_step(entry):
    steps = {"q": (3, 2), "k": (3, 2), "v": (3, 2), "scores": (3, 3), "scaled": (3, 3), "weights": (3, 3),
             "head_output": (3, 2)}
    for step, (r, c) in steps.items():
        rows = [[entry] * c for _ in range(r)]
        rows[0][0] = "0"  # an exact entry beside them: its exact-claim note is written at their places
        text = f"exercise: single-head-3x4\n{step}: {json.dumps(rows)}\n".replace('"', "")
        code, out, doc = full_report(text)
        assert code in (0, 1) and doc["exit_code"] == code
        assert ("✓ correct" if code == 0 else "✗ wrong") in out


def test_an_exact_claim_note_beside_an_entry_to_minus_one_places():
    # head 0's head_output is [[1, 0], [0.0000122, 1.9999756], [0.5144, 1.4569]]; 1e1 claims [5, 15]
    code, out, doc = full_report("exercise: two-head-causal-3x4\nheads:\n  - head_output: [[1e1, 0], [0, 2], [1, 1]]\n")
    assert code == 1
    notes = [m["message"] for s in doc["steps"] for m in s["exact_claims"]]
    # the note suggests a decimal (at least 1 place), never "write 0" or a negative precision
    assert notes == ["[t2, d1]: you wrote 0, an exact claim; the value is 0.000012 — write 0.0 for a rounded value",
                     "[t2, d2]: you wrote 2, an exact claim; the value is 1.999976 — write 2.0 for a rounded value"]


def test_formatters_take_zero_and_negative_places():
    assert fixed(12.5, 2) == "12.50" and fixed(12.4, 0) == "12" and fixed(17.0, -1) == "20"
    assert fixed(-0.001, 2) == "0.00" and fixed(-3.0, -1) == "0" and fixed(1234.0, -2) == "1200"
    assert (fixed(math.inf, 1), fixed(-math.inf, -1), fixed(math.nan, 0)) == ("inf", "-inf", "nan")
    assert num_text(17.3, -1) == "20" and num_text(17.3, 0) == "17" and num_text(0.125, 2) == "0.12"
    assert decimal(-17.3, -1) == "−20" and decimal(0.5, 0) == "0"


_exponent_entries = st.one_of(
    st.builds(lambda m, e: f"{m}e{e}", st.integers(-9, 9), st.integers(-3, 3)),
    st.builds(lambda m, e: f"{m}E{e:+d}", st.sampled_from(["1.5", "2.25", "0.5", "7"]), st.integers(-3, 3)),
    st.integers(-5, 10), st.just("~"), st.just("-inf"), st.just(".nan"),
)


@st.composite
def _solutions(draw):
    shapes = {"q": (3, 2), "scores": (3, 3), "scaled": (3, 3), "weights": (3, 3), "head_output": (3, 2)}
    steps = draw(st.lists(st.sampled_from(sorted(shapes)), min_size=1, max_size=5, unique=True))
    lines = ["exercise: single-head-3x4"]
    for s in steps:
        r, c = shapes[s]
        rows = [[str(draw(_exponent_entries)) for _ in range(c)] for _ in range(r)]
        rows[0][0] = rows[0][0] if rows[0][0] != "~" else "1"
        lines.append(f"{s}: [" + ", ".join("[" + ", ".join(row) + "]" for row in rows) + "]")
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_solutions())
def test_any_exponent_or_nan_gives_a_full_report(text):
    code, _, doc = full_report(text)
    assert code in (0, 1)


def test_a_crash_is_exit_3_in_one_line_never_1(cli, tmp_path, monkeypatch):
    import tutor.audit.check

    def broken(*args, **kwargs):
        raise ValueError("root:x:0:0 (text an exception might hold)")

    monkeypatch.setattr(tutor.audit.check, "audit", broken)
    sol = tmp_path / "s.yaml"
    sol.write_text("exercise: single-head-3x4\nscores: [[2, 4, 4], [4, 8, 8], [4, 8, 8]]\n")
    code, out, err = cli("check", str(sol))
    assert (code, out) == (EXIT_INTERNAL, "") and EXIT_INTERNAL == 3
    assert err.count("\n") == 1 and err.startswith("internal error: ValueError at tutor/")
    assert "Traceback" not in err and "root:x" not in err  # the exception's text is not echoed
    code, out, err = cli("check", str(sol), "--format", "json")
    assert code == 3 and json.loads(out)["error"] == "internal" and json.loads(out)["exit_code"] == 3


def test_exit_1_comes_only_from_the_verdict(cli, monkeypatch):
    import typer

    import tutor.cli.explain as explain

    def exits_1(*args, **kwargs):
        raise typer.Exit(1)

    monkeypatch.setattr(explain, "check_head", exits_1)
    code, _, _ = cli("explain", "single-head-3x4")
    assert code == 2  # a command ending with 1 without a verdict is not "the solution is wrong"


# --- B.6: NaN and oo --------------------------------------------------------------------------------

FULLY_MASKED = "exercise: fully-masked-row-3x3\n"  # query t3 may attend to no key
WEIGHTS_T3 = "weights: [[0.5, 0.5, 0], [0.4011, 0.1978, 0.4011], [{0}, {0}, {0}]]\n"
OUTPUT_T3 = "head_output: [[0.5, 0.5], [0.8022, 0.5989], [{0}, {0}]]\n"


@pytest.mark.parametrize("nan", [".nan", ".NaN", ".NAN", "nan", "NaN", "NAN", "-nan", "'nan'", '".nan"'])
def test_nan_on_a_fully_masked_row_is_wrong_and_explained(nan):
    code, out, doc = full_report(FULLY_MASKED + WEIGHTS_T3.format(nan) + OUTPUT_T3.format(nan))
    assert code == 1
    weights, head_output = doc["steps"]
    assert weights["wrong_cells"] == [[2, 0], [2, 1], [2, 2]] and weights["expected"][2] == [0.0, 0.0, 0.0]
    assert [d["key"] for d in weights["diagnoses"]] == ["nan_empty_row"]
    assert weights["diagnoses"][0]["cells"] == [[2, 0], [2, 1], [2, 2]]
    assert "need_weights=True" in weights["diagnoses"][0]["message"]
    assert "[t3, t1]: you wrote " + nan.strip("'\"") + ", the right value is 0" in out
    # NaN weights give NaN outputs: the head output only carries the error forward
    assert head_output["wrong_cells"] == [[2, 0], [2, 1]] and head_output["follows"] == "carried"
    sums = [f for f in doc["plausibility"] if f["check"] == "row_sums"]
    assert [(f["ok"], f["cells"]) for f in sums] == [(False, [[2, 0], [2, 1], [2, 2]])]
    assert "row t3 of weights has nan, so it has no sum" in sums[0]["message"]
    ranges = [f for f in doc["plausibility"] if f["check"] in ("weights_range", "masked_zero", "column_range")]
    assert all(f["ok"] and f["message"].endswith(", apart from its nan entries") for f in ranges)


def test_the_torch_sentence_is_true():
    torch = require_torch()
    import torch.nn.functional as F

    torch.manual_seed(0)
    x = torch.randn(1, 3, 4)
    blocked = torch.tensor([[False, False, True], [False, False, False], [True, True, True]])  # the exercise's mask
    mha = torch.nn.MultiheadAttention(4, 2, batch_first=True)
    mha.eval()
    with torch.no_grad():
        out, w = mha(x, x, x, attn_mask=blocked, average_attn_weights=False)  # need_weights=True, the default
    assert torch.isnan(w[0, :, 2]).all() and torch.isnan(out[0, 2]).all()
    with torch.inference_mode():  # the inference fast path (eval, no grad, even heads, need_weights=False)
        fast, _ = mha(x, x, x, attn_mask=blocked, need_weights=False)
    assert torch.isnan(fast[0, 2]).all()
    q = x.view(1, 1, 3, 4)
    zero = F.scaled_dot_product_attention(q, q, q, attn_mask=~blocked)
    assert torch.equal(zero[0, 0, 2], torch.zeros(4))


STEPS_TWO_HEADS = {"q": (3, 2), "k": (3, 2), "v": (3, 2), "scores": (3, 3), "scaled": (3, 3), "masked": (3, 3),
                   "weights": (3, 3), "head_output": (3, 2)}


@pytest.mark.parametrize("step", [*STEPS_TWO_HEADS, "concat", "output"])
def test_nan_in_any_step_is_wrong_with_a_true_sentence(step):
    shape = STEPS_TWO_HEADS.get(step, (3, 4))
    rows = [["nan"] + ["~"] * (shape[1] - 1)] + [["~"] * shape[1] for _ in range(shape[0] - 1)]
    matrix = "[" + ", ".join("[" + ", ".join(r) + "]" for r in rows) + "]"
    text = "exercise: two-head-causal-3x4\n" + (f"{step}: {matrix}\n" if step in ("concat", "output")
                                                 else f"heads:\n  - {step}: {matrix}\n")
    code, out, doc = full_report(text)  # every query of a causal mask may attend to a key: NaN is never right
    assert code == 1
    (s,) = doc["steps"]
    assert s["wrong_cells"] == [[0, 0]] and [d["key"] for d in s["diagnoses"]] == ["nan"]
    assert s["diagnoses"][0]["message"].startswith("nan is not a number, and ")
    assert "MultiheadAttention" not in out


def test_nan_is_read_before_the_parser_and_only_as_a_whole_entry():
    sf = read_solution("exercise: single-head-3x4\nq: [[.nan, 1], [nan, 2], [NaN, 2]]\n", "s.yaml", base=EXERCISES)
    assert all(isinstance(row[0], NanEntry) for row in sf.steps[0].entries)
    with pytest.raises(ExerciseError, match="is not a number"):
        read_solution("exercise: single-head-3x4\nq: [[2*nan, 1], [2, 2], [2, 2]]\n", "s.yaml", base=EXERCISES)


@pytest.mark.parametrize("inf", ["-oo", "'-oo'", "-.inf", "-inf"])
def test_minus_oo_is_minus_infinity(inf, tmp_path):
    # the classic exercise with a causal mask: scaled = [[2, 4, 4], [4, 8, 8], [4, 8, 8]] / sqrt(2)
    text = (EXERCISES / "single-head-3x4.yaml").read_text().replace("id: single-head-3x4", "id: causal-classic")
    (tmp_path / "ex.yaml").write_text(text + "mask: causal\n")
    r1, r2, r4 = '"sqrt(2)"', '"2*sqrt(2)"', '"4*sqrt(2)"'
    masked = f"[[{r1}, {inf}, {inf}], [{r2}, {r4}, {inf}], [{r2}, {r4}, {r4}]]"
    code, _, doc = full_report(f"exercise: ex.yaml\nmasked: {masked}\n", base=tmp_path)
    assert code == 0, doc["steps"][0]["wrong_cells"]
    assert report(f"exercise: ex.yaml\nmasked: {masked.replace(inf, 'oo', 1)}\n", tmp_path).exit_code == 1  # +inf


# --- D.10: what `exercise:` may name ---------------------------------------------------------------

SECRET = "hunter2-do-not-quote"


@pytest.fixture
def tree(tmp_path):
    """tmp/tree/ (the solution's folder), tmp/pack/ (an exercise pack), tmp/outside/ (anything else)."""
    classic = (EXERCISES / "single-head-3x4.yaml").read_text()
    for d in ("tree/sub", "pack", "outside"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "tree/sub/ex.yaml").write_text(classic.replace("id: single-head-3x4", "id: sub-ex"))
    (tmp_path / "pack/p.yaml").write_text(classic.replace("id: single-head-3x4", "id: pack-ex"))
    (tmp_path / "outside/ex.yaml").write_text(classic.replace("id: single-head-3x4", "id: outside-ex"))
    (tmp_path / "outside/secret.yaml").write_text(f"secret_key: {SECRET}\n")
    (tmp_path / "outside/secret.txt").write_text(f"{SECRET}\n")
    (tmp_path / "tree/notex.yaml").write_text(f"api_token: {SECRET}\nusers: [{SECRET}]\n")
    (tmp_path / "tree/key.yaml").write_text(f"exercise: single-head-3x4\ntitle: {SECRET}\nq: [[1, 1], [2, 2], [2, 2]]\n")
    (tmp_path / "tree/notes.txt").write_text(f"{SECRET}\n")
    (tmp_path / "tree/dir.yaml").mkdir()
    (tmp_path / "tree/link.yaml").symlink_to(tmp_path / "outside/secret.yaml")
    (tmp_path / "tree/good-link.yaml").symlink_to(tmp_path / "tree/sub/ex.yaml")
    (tmp_path / "tree/outlink").symlink_to(tmp_path / "outside")
    os.mkfifo(tmp_path / "tree/fifo.yaml")
    return tmp_path


def check_names(cli, tree: Path, name: str, *extra: str, **env: str):
    """``check`` of a solution in ``tree/tree/`` naming ``name`` as its exercise, run from ``tree``.

    In this process: which file a name reaches, and what the refusal says, is decided in it; a FIFO
    that were opened would hang the test, which its timeout fails.
    """
    (tree / "tree/s.yaml").write_text(f"exercise: {name}\nq: [[1, 1], [2, 2], [2, 2]]\n")
    return cli("check", "tree/s.yaml", *extra, cwd=tree, env=env)


@pytest.mark.parametrize("name", [
    "sub/ex.yaml", "./sub/ex.yaml", "sub/../sub/ex.yaml", "good-link.yaml", "{tree}/tree/sub/ex.yaml",
    "../pack/p.yaml", "{tree}/pack/p.yaml", "pack-ex", "single-head-3x4",
])
def test_exercise_files_inside_the_tree_a_pack_or_bundled_are_read(cli, tree, name):
    done = check_names(cli, tree, name.format(tree=tree), "--exercises", "pack")
    assert (done.code, done.err) == (0, ""), done.err
    assert "✓ correct" in done.out


def test_a_pack_in_the_environment_counts_as_a_pack(cli, tree):
    for name in ("../pack/p.yaml", "pack-ex"):
        assert check_names(cli, tree, name).code == 2
        assert check_names(cli, tree, name, ATTN_TUTOR_PATH=str(tree / "pack")).code == 0


@pytest.mark.parametrize(("name", "message"), [
    ("../outside/ex.yaml", "is outside the folder of this file"),  # a valid exercise, but outside
    ("../outside/secret.yaml", "is outside the folder of this file"),
    ("{tree}/outside/secret.yaml", "is outside the folder of this file"),
    ("/etc/passwd", "is outside the folder of this file"),
    ("../../../../../../../../etc/passwd", "is outside the folder of this file"),
    ("/no/such/file.yaml", "is outside the folder of this file"),  # whether it exists is not said
    ("link.yaml", "is outside the folder of this file"),  # a symbolic link out of the tree
    ("outlink/secret.yaml", "is outside the folder of this file"),  # a linked folder out of the tree
    ("..", "is outside the folder of this file"),
    ("dir.yaml", "is not a regular file"),
    ("fifo.yaml", "is not a regular file"),  # never opened: no hang
    ("notex.yaml", "is not a valid exercise file (6 problems)"),
    ("key.yaml", "is not a valid exercise file (1 problem)"),  # a solution file (an answer key)
    ("notes.txt", "is not an exercise file: an exercise file's name ends in .yaml or .yml"),
    ("secret", "no exercise has the id 'secret'"),
    ("nothere.yaml", "no exercise file 'nothere.yaml'"),
    ("sub/ex.yaml/x.yaml", "no exercise file 'sub/ex.yaml/x.yaml'"),
    ('"x\\0.yaml"', "is not a usable file name"),  # a NUL character
    ("a/" * 3000 + "x.yaml", "cannot read 'a/a/a/"),  # a name too long for the system
])
@pytest.mark.timeout(60)  # fifo.yaml: never opened, so no hang
def test_other_files_are_refused_without_quoting_them(cli, tree, name, message):
    done = check_names(cli, tree, name.format(tree=tree))
    assert done.code == 2 and done.out == ""
    assert done.err.count("\n") == 1 and message in done.err
    if "{tree}" not in name:  # the report goes back to a student: no folder of the grader's they did not name
        assert str(tree) not in done.err and str(tree.parent) not in done.err, done.err
    for quoted in (SECRET, "secret_key", "api_token", "users", "root:", "Traceback"):
        assert quoted not in done.err
    json_done = cli("check", "tree/s.yaml", "--format", "json", cwd=tree)
    assert json_done.code == 2 and message in json.loads(json_done.out)["errors"][0]["message"]
    assert SECRET not in json_done.out


def test_a_file_in_the_current_folder_is_not_taken_for_an_id(cli, tree):
    (tree / "secret").write_text(f"{SECRET}\n")  # check runs in tmp/, the solution is in tmp/tree/
    done = check_names(cli, tree, "secret")
    assert done.code == 2 and "no exercise has the id 'secret'" in done.err and SECRET not in done.err


# --- G.22: --export ----------------------------------------------------------------------------------


def test_export_refuses_an_existing_file_without_force(cli, tmp_path):
    page = tmp_path / "page.html"
    page.write_text("my notes")
    code, out, err = cli("explain", "single-head-3x4", "--export", str(page))
    assert (code, out) == (2, "") and page.read_text() == "my notes"
    assert err == f"error: {page} already exists; choose another file or add --force to overwrite it\n"
    code, _, err = cli("explain", "single-head-3x4", "--export", str(page), "--force")
    assert code == 0 and page.read_text().startswith("<!DOCTYPE html>") and err == f"wrote {page}\n"


@pytest.mark.timeout(60)  # a FIFO opened for writing would wait for a reader: a hang fails the test
def test_export_to_a_fifo_is_refused_even_with_force(cli, tmp_path):
    os.mkfifo(tmp_path / "page.html")
    done = cli("explain", "single-head-3x4", "--export", "page.html", "--force", cwd=tmp_path)
    assert done.code == 2 and "page.html exists and is a named pipe (FIFO), not a regular file" in done.err


@pytest.mark.parametrize(("file", "fmt", "ok"), [
    ("x.html", "json", False), ("x.html", "markdown", False), ("x.html", "html", True), ("x.html", "rich", True),
    ("x.htm", "json", False), ("x.svg", "html", False), ("x.svg", "rich", True), ("x.md", "markdown", True),
    ("x.md", "html", False), ("x.md", "json", False),
])
def test_export_with_a_format_it_does_not_write_is_a_usage_error(cli, tmp_path, file, fmt, ok):
    code, out, err = cli("explain", "single-head-3x4", "--export", str(tmp_path / file), "--format", fmt)
    assert (code == 0) == ok and (tmp_path / file).exists() == ok
    if not ok:
        assert code == 2 and "would be ignored" in " ".join(err.replace("│", " ").split())
        assert (json.loads(out)["error"] == "usage") if fmt == "json" else out == ""


# --- G.24: --format json on an error ------------------------------------------------------------------


def test_check_json_on_an_unusable_file(cli, tmp_path):
    sol = tmp_path / "s.yaml"
    sol.write_text("exercise: single-head-3x4\nscores: [[2, 4, 4], [4, 8]]\nwat: 1\n")
    for fmt in (["--format", "json"], ["--format=json"]):
        code, out, err = cli("check", str(sol), *fmt)
        assert code == 2
        doc = json.loads(out)
        assert (doc["error"], doc["exit_code"]) == ("input", 2)
        assert [(e["file"], e["line"], e["column"], e["field"]) for e in doc["errors"]] == [
            (str(sol), 2, 21, "scores[1]"), (str(sol), 3, 1, "wat")]
        assert doc["errors"][0]["message"] == "row 2 has 2 entries but row 1 has 3"
        assert [f"error: {e['text']}" for e in doc["errors"]] == err.splitlines()


@pytest.mark.parametrize(("argv", "kind"), [
    (["check", "{tmp}/none.yaml"], "input"),
    (["check"], "usage"),
    (["explain", "no-such-exercise"], "input"),
    (["explain", "single-head-3x4", "--head", "7"], "usage"),
    (["explain", "single-head-3x4", "--blank"], "usage"),
    (["list", "--exercises", "{tmp}/no-such-folder"], "usage"),
    (["validate"], "usage"),
    (["stats"], "input"),  # the progress file is not attn-tutor's
    (["check", "--bogus"], "usage"),
])
def test_every_json_command_prints_an_error_document(cli, home, tmp_path, argv, kind):
    home.mkdir(parents=True, exist_ok=True)
    (home / "progress.sqlite3").write_text("not a database")
    code, out, err = cli(*[a.format(tmp=tmp_path) for a in argv], "--format", "json")
    assert code == 2 and err
    doc = json.loads(out)
    assert doc["error"] == kind and doc["exit_code"] == 2 and doc["errors"]
    assert set(doc["errors"][0]) == {"file", "line", "column", "field", "message", "hint", "severity", "text"}


# --- G.25: counts in sentences -----------------------------------------------------------------------

PLURALS = ("entries|rows|columns|heads|steps|decimals|problems|checks|answers|sessions|hints|characters|digits|"
           "values|levels|bytes|files|keys|queries|tokens|errors|warnings|places")
SINGULARS = ("entry|row|column|head|step|decimal|problem|check|answer|session|hint|character|digit|value|level|"
             "byte|file|key|query|token|error|warning|place")


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def test_no_count_in_the_catalogue_disagrees_with_its_noun():
    """Every template, with every field 1 and then 2 (and as plural() renders its forms)."""
    forms = {k.rsplit(".", 1)[0] for k in EN if k.endswith((".one", ".other"))}
    checked = 0
    for key, template in EN.items():
        base, _, last = key.rpartition(".")
        for n in (1, 2):
            if base in forms and last in ("one", "other"):
                text = plural(base, n, **{f: n for f in _fields(template) if f != "count"})
            elif _fields(template):
                text = t(key, **{f: n for f in _fields(template)})
            else:
                continue
            checked += 1
            wrong = rf"\b1 (?:given |plausibility )?(?:{PLURALS})\b(?!=)" if n == 1 else \
                rf"\b2 (?:given |plausibility )?(?:{SINGULARS})\b(?!=)"  # heads=1 is a field's name and value
            assert not re.search(wrong, text), (key, text)
            assert not re.search(r"\b1 of \d+ [a-z ]+ are\b|\b2 of \d+ [a-z ]+ is\b", text), (key, text)
    assert checked > 400
    for base in forms:
        assert f"{base}.other" in EN and f"{base}.one" in EN, base


def test_counted_nouns_and_sentences():
    assert t("check.step.ok", count=1) == "1 entry right"
    assert t("check.step.off", wrong=1, count=1) == "1 of 1 entry off"
    assert t("check.step.off", wrong=1, count=3) == "1 of 3 entries off"
    assert plural("check.verdict.steps", 1, given=1) == "1 of 1 given step is wrong"
    assert plural("check.verdict.steps", 1, given=3) == "1 of 3 given steps is wrong"
    assert plural("check.verdict.steps", 2, given=3) == "2 of 3 given steps are wrong"
    assert plural("check.verdict.checks", 1, total=4) == "1 of 4 plausibility checks fails"
    assert t("shape.rows", field="w_q", found=1, other="x", expected=1, name="d_model") == \
        "w_q has 1 row but x has 1 column (d_model)"
    assert t("practice.shape", name="Q", shape="[3×1]", rows=3, cols=1) == "Q is [3×1]: 3 rows, 1 column."
    assert t("file.too_large.at", size=1000001, limit=1000000).startswith("the file is 1000001 bytes, over the limit")


def test_one_entry_given_reads_right_in_a_report(cli, tmp_path):
    sol = tmp_path / "s.yaml"
    sol.write_text("exercise: single-head-3x4\nscores: [[3, ~, ~], [~, ~, ~], [~, ~, ~]]\n")
    code, out, _ = cli("check", str(sol))
    assert code == 1
    assert "  ✗ wrong    scores  1 of 1 entry off" in out
    assert out.rstrip().endswith("✗ wrong: 1 of 1 given step is wrong; every plausibility check passes. "
                                 "The first wrong step is scores.")
    sol.write_text("exercise: single-head-3x4\nscores: [[2, ~, ~], [~, ~, ~], [~, ~, ~]]\n")
    code, out, _ = cli("check", str(sol))
    assert code == 0 and "  ✓ correct  scores  1 entry right" in out

"""Issue 23/24 trial findings on `check DIR` and `report` (tutor/audit/batch.py, classview.py, the renderers):
a copied roster variant, the score out of the exercise's steps, variants added up per exercise, the student of
an unusable file, a semicolon CSV, ties, a folder named x.yaml."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import yaml

LIKE = "two-head-causal-3x4"


@pytest.fixture
def variables(variables):
    return {**variables, "COLUMNS": "200"}


def _handouts(cli, tmp_path: Path) -> Path:
    roster = tmp_path / "roster.csv"
    roster.write_text("student,name\nalice,Alice\ndave,Dave\n", encoding="utf-8")
    out = tmp_path / "class"
    assert cli("handouts", "--like", LIKE, "--students", roster, "-o", out).code == 0
    return out


def _q_head0(variant: Path) -> list[list[int]]:
    """Head 1's Q of a variant, X @ W_q's first d_k = 2 columns (the fused form), computed here by hand."""
    ex = yaml.safe_load(variant.read_text(encoding="utf-8"))
    x, w = ex["x"], ex["w_q"]
    return [[sum(x[i][k] * w[k][j] for k in range(len(w))) for j in range(2)] for i in range(len(x))]


def _submission(folder: Path, name: str, student: str, variant: str, q: list[list[int]]) -> Path:
    path = folder / name
    path.write_text(f"student: {student}\nexercise: {variant}\nheads:\n- q: {q}\n", encoding="utf-8")
    return path


def test_a_copied_variant_is_wrong_and_names_whose_it_is(cli, tmp_path):
    """dave hands in alice's variant with alice's right numbers: wrong, in every format and in report."""
    class_dir = _handouts(cli, tmp_path)
    subs = tmp_path / "subs"
    subs.mkdir()
    q = _q_head0(class_dir / f"{LIKE}-alice.yaml")
    _submission(subs, "alice.yaml", "alice", f"{LIKE}-alice", q)
    _submission(subs, "dave.yaml", "dave", f"{LIKE}-alice", q)
    code, out, _ = cli("check", subs, "--exercises", class_dir, "--format", "json")
    doc = json.loads(out)
    alice, dave = doc["submissions"]
    assert alice["verdict"] == "correct" and alice["variant_of"] is None
    assert dave["verdict"] == "wrong" and code == 1
    assert dave["variant_of"] == {"student": "alice", "own": f"{LIKE}-dave"}
    assert dave["comment"] == (f"This is alice's variant ({LIKE}-alice), not yours: yours is {LIKE}-dave. "
                               "No step counts.")
    assert dave["score"] == 0 and dave["steps"] == []
    rows = list(csv.DictReader(io.StringIO(cli("check", subs, "--exercises", class_dir, "--format", "csv").out)))
    assert rows[1]["verdict"] == "wrong" and rows[1]["variant_of"] == "alice"
    rich = cli("check", subs, "--exercises", class_dir).out
    assert "This is alice's variant" in rich
    report = json.loads(cli("report", subs, "--exercises", class_dir, "--format", "json").out)["submissions"]
    assert report["copies"] == [{"student": "dave", "exercise": f"{LIKE}-alice", "variant_of": "alice"}]
    assert "dave handed in two-head-causal-3x4-alice, the variant of alice, not their own." in \
        cli("report", subs, "--exercises", class_dir).out
    # check FILE alone says it too, and exits 1
    code, out, _ = cli("check", subs / "dave.yaml", "--exercises", class_dir)
    assert code == 1 and "so this file is graded wrong" in out
    single = json.loads(cli("check", subs / "dave.yaml", "--exercises", class_dir, "--format", "json").out)
    assert (single["verdict"], single["exit_code"], single["variant_of"]["student"]) == ("wrong", 1, "alice")
    assert cli("check", subs / "alice.yaml", "--exercises", class_dir).code == 0
    # without the index beside the variants, nothing says whose a variant is: the numbers are graded as they are
    (class_dir / f"roster-{LIKE}.csv").unlink()
    alone = json.loads(cli("check", subs, "--exercises", class_dir, "--format", "json").out)
    assert [r["verdict"] for r in alone["submissions"]] == ["correct", "correct"]


def test_variants_add_up_per_exercise_in_report(cli, tmp_path):
    """The roster index says which exercise each variant was drawn like: one row per step, not per variant."""
    class_dir = _handouts(cli, tmp_path)
    subs = tmp_path / "subs"
    subs.mkdir()
    for who in ("alice", "dave"):
        q = _q_head0(class_dir / f"{LIKE}-{who}.yaml")
        _submission(subs, f"{who}.yaml", who, f"{LIKE}-{who}", q)
    steps = json.loads(cli("report", subs, "--exercises", class_dir, "--format", "json").out)["submissions"]["steps"]
    assert steps == [{"exercise": LIKE, "step": "heads[0].q", "given": 2, "right": 2, "share": 1.0}]


def test_the_score_is_out_of_the_exercises_steps(cli, tmp_path):
    """One right step of the 7 of single-head-3x4 is 1/7 (14.29), not 100; the steps given are said apart."""
    (tmp_path / "one.yaml").write_text("exercise: single-head-3x4\nq: [[1, 1], [2, 2], [2, 2]]\n", encoding="utf-8")
    (tmp_path / "two.yaml").write_text("exercise: single-head-3x4\nq: [[1, 1], [2, 2], [2, 2]]\n", encoding="utf-8")
    doc = json.loads(cli("check", tmp_path, "--format", "json").out)
    row = doc["submissions"][0]
    assert (row["score"], row["steps_right"], row["steps_total"], row["steps_given"]) == (14.29, 1, 7, 1)
    assert "1/7 (1 given)" in cli("check", tmp_path).out


def test_an_unusable_file_is_keyed_by_its_student_and_duplicates_are_said(cli, tmp_path):
    (tmp_path / "s1.yaml").write_text("student: ann\nexercise: single-head-3x4\nq: [[1, 1], [2, 2]\n",
                                      encoding="utf-8")  # not YAML below the student line
    (tmp_path / "s2.yaml").write_text("student: ann\nexercise: nope\nq: [[1]]\n", encoding="utf-8")
    code, out, err = cli("check", tmp_path, "--format", "json")
    doc = json.loads(out)
    assert [r["student"] for r in doc["submissions"]] == ["ann", "ann"]
    assert doc["duplicates"] == [{"student": "ann", "files": [str(tmp_path / "s1.yaml"), str(tmp_path / "s2.yaml")]}]
    err = cli("check", tmp_path).err
    assert "ann handed in more than one file" in err
    outside = tmp_path.parent / f"{tmp_path.name}-secret.yaml"
    outside.write_text("student: secret\nexercise: nope\n", encoding="utf-8")
    (tmp_path / "s3.yaml").symlink_to(outside)  # refused by the reader; its student: is not read through it
    rows = json.loads(cli("check", tmp_path, "--format", "json").out)["submissions"]
    assert rows[2]["student"] == "s3" and rows[2]["verdict"] == "unusable"


def test_a_folder_named_like_a_solution_is_a_row(cli, tmp_path):
    (tmp_path / "x.yaml").mkdir()
    (tmp_path / "a.yaml").write_text("exercise: single-head-3x4\nq: [[1, 1], [2, 2], [2, 2]]\n", encoding="utf-8")
    code, out, _ = cli("check", tmp_path, "--format", "json")
    rows = json.loads(out)["submissions"]
    assert [(Path(r["file"]).name, r["verdict"]) for r in rows] == [("a.yaml", "correct"), ("x.yaml", "unusable")]
    assert rows[1]["comment"] == "This is a folder, not a solution file: it could not be graded." and code == 2
    assert json.loads(cli("report", tmp_path, "--format", "json").out)["submissions"]["summary"]["unusable"] == 1


def test_a_semicolon_csv_is_read(cli, tmp_path):
    """European Excel saves a CSV with semicolons: read as the same gradebook."""
    (tmp_path / "a.yaml").write_text("exercise: single-head-3x4\nscores: [[2, 4, 4], [4, 8, 8], [4, 8, 8]]\n"
                                     "scaled: [[2, 4, 4], [4, 8, 8], [4, 8, 8]]\n", encoding="utf-8")
    comma = cli("check", tmp_path, "--format", "csv").out
    rows = list(csv.reader(io.StringIO(comma)))
    out = io.StringIO()
    csv.writer(out, delimiter=";", lineterminator="\r\n").writerows(rows)
    semi = tmp_path / "semi.csv"
    semi.write_text(out.getvalue(), encoding="utf-8")
    (tmp_path / "comma.csv").write_text(comma, encoding="utf-8")
    a = json.loads(cli("report", semi, "--format", "json").out)
    b = json.loads(cli("report", tmp_path / "comma.csv", "--format", "json").out)
    assert a == b and a["submissions"]["mistakes"][0]["key"] == "no_scaling"


def test_a_tie_names_every_most_common_mistake(cli, tmp_path):
    """Two submissions, two different mistakes, one each: both are named as the most common."""
    from tutor.audit.batch import WRONG, Row
    from tutor.audit.classview import class_report
    from tutor.render.report import render_report, report_document

    rows = [Row("a.yaml", "ann", "single-head-3x4", WRONG, "scaled", "scaled", ("no_scaling",), 3, 4,
                steps=(("scaled", False),), mistake_steps=("scaled",)),
            Row("b.yaml", "bob", "single-head-3x4", WRONG, "weights", "weights", ("softmax_columns",), 4, 5,
                steps=(("weights", False),), mistake_steps=("weights",))]
    view = class_report(rows)
    assert [m.key for m in view.most_common] == ["no_scaling", "softmax_columns"]
    doc = report_document(view, None)
    assert doc["submissions"]["assign"]["tied"] == ["no_scaling", "softmax_columns"]
    from rich.console import Console

    from tutor.base.messages import use_language

    with use_language("en"):
        console = Console(file=io.StringIO(), width=300, color_system=None)
        render_report(doc, console)
        text = console.file.getvalue()
    assert "One of the most common mistakes (forgot to divide by √d_k and softmax down the columns): " in text


def test_the_tie_sentence_names_all():
    from tutor.base.messages import use_language
    from tutor.render.report import _assign_sentence

    a = {"mistake": "no_scaling", "tied": ["no_scaling", "softmax_columns"], "exercise": "x", "step": None,
         "tiled": False}
    with use_language("en"):
        said = _assign_sentence(a)
        assert said.startswith("One of the most common mistakes (forgot to divide by √d_k and softmax down the columns)")
        assert _assign_sentence({**a, "tied": ["no_scaling"]}).startswith("The most common mistake: forgot")


def _record(home: Path, answers):
    from tutor.exercise.catalog import resolve
    from tutor.store import Attempt, Store

    family = resolve("single-head-3x4").family
    with Store.open(home / "progress.sqlite3") as store:
        s = store.begin_session("single-head-3x4", mode="matrix", tolerance=None)
        for step, outcome in answers:
            store.record(s, Attempt("single-head-3x4", step, 0, outcome, 1, 0, (), family=family))


def test_a_skill_never_recalled_has_no_retention(cli, tmp_path, home):
    """Only wrong answers to v: FSRS predicts retrievability 1 just after an Again, which the learner never
    earned; the report says the learner never recalled it and shows no retention for it."""
    folder = tmp_path / "progress"
    folder.mkdir()
    _record(home, [("v", "wrong"), ("v", "wrong"), ("scores", "correct"), ("q", "correct")])
    assert cli("stats", "--export", folder / "ann.json").code == 0
    exported = {k["step"]: k for k in json.loads((folder / "ann.json").read_text(encoding="utf-8"))["skills"]}
    assert (exported["v"]["recalled"], exported["q"]["recalled"]) == (0, 1)
    prog = json.loads(cli("report", folder, "--format", "json").out)["progress"]
    skills = {k["step"]: k for k in prog["skills"]}
    assert (skills["v"]["never_recalled"], skills["v"]["retention_min"], skills["v"]["retention_mean"]) == (1, None, None)
    assert skills["q"]["never_recalled"] == 0 and skills["q"]["retention_min"] is not None
    # per exercise, the steps in the contract's order (q, v, scores), not alphabetical (q, scores, v)
    assert [p["step"] for p in prog["practised"]] == ["q", "v", "scores"]
    out = cli("report", folder).out
    assert "never right" in out and "100% / 100%" in out  # q's (lowest / mean), not v's
    v_line = next(line for line in out.splitlines() if line.strip().startswith("v ") and "—" in line)
    assert "%" not in v_line


def test_the_csv_names_steps_as_a_student_reads_them(cli, tmp_path):
    """One notation in the gradebook, heads counted from 1 as the comment counts them; read back by report."""
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "a.yaml").write_text(f"exercise: {LIKE}\nheads:\n- q: [[0, 0], [0, 0], [0, 0]]\n", encoding="utf-8")
    out = cli("check", folder, "--format", "csv").out
    row = next(csv.DictReader(io.StringIO(out)))
    assert row["first_wrong_step"] == "q (head 1)" and row["steps"] == "q (head 1):wrong"
    assert row["comment"].startswith("q (head 1) is the first wrong step")
    sheet = tmp_path / "grades.csv"
    sheet.write_text(out, encoding="utf-8")
    from_csv = json.loads(cli("report", sheet, "--format", "json").out)
    assert from_csv == json.loads(cli("report", folder, "--format", "json").out)
    assert from_csv["submissions"]["steps"][0]["step"] == "heads[0].q"  # JSON: the file's place
    assert "q (head 1)" in cli("report", sheet).out
    zh = cli("check", folder, "--format", "csv", "--lang", "zh").out
    row = next(csv.DictReader(io.StringIO(zh)))
    assert row["first_wrong_step"] == "q（第 1 个头）" and row["comment"].startswith("第一个错误的步骤是 q（第 1 个头）")
    sheet.write_text(zh, encoding="utf-8")
    assert json.loads(cli("report", sheet, "--format", "json").out) == from_csv

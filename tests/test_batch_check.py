"""Issue 24: `check DIR|FILE...` grades a class in one run, `report` shows the class view, `stats --export`
hands a learner's record in.  Through the CLI (exit codes, the CSV read back by Python's csv module, the
JSON), each row held to what `check FILE` says alone."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "check"
BROKEN = REPO / "tests" / "data" / "broken"
GOLDEN_JSON = REPO / "tests" / "data" / "check-json"

RIGHT = "exercise: single-head-3x4\nq: [[1, 1], [2, 2], [2, 2]]\nscores: [[2, 4, 4], [4, 8, 8], [4, 8, 8]]\n"
NO_SCALING = "exercise: single-head-3x4\nscores: [[2, 4, 4], [4, 8, 8], [4, 8, 8]]\nscaled: [[2, 4, 4], [4, 8, 8], [4, 8, 8]]\n"


@pytest.fixture
def variables(variables):
    return {**variables, "COLUMNS": "200"}


def _class(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "class"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text, newline="")))


# --- each row is what `check FILE` says alone ----------------------------------------------------------


@pytest.mark.parametrize("folder", [DATA, BROKEN], ids=["check", "broken"])
def test_every_row_is_the_single_checks_verdict(cli, folder):
    """For every solution fixture (and every file of the broken folder, most of them unusable as solutions):
    the batch row's verdict and exit code are what `check FILE` gives that file alone."""
    code, out, err = cli("check", folder, "--format", "json")
    doc = json.loads(out)
    names = sorted(p.name for p in folder.iterdir() if p.suffix in (".yaml", ".yml"))
    assert [Path(r["file"]).name for r in doc["submissions"]] == names
    alone = {}
    for row in doc["submissions"]:
        single = cli("check", row["file"])
        alone[row["file"]] = single.code
        assert row["exit_code"] == single.code, row["file"]
        assert row["verdict"] == {0: "correct", 1: "wrong", 2: "unusable"}[single.code]
    assert code == max(alone.values())
    assert doc["summary"]["submissions"] == len(names) and doc["summary"]["exit_code"] == code


def test_one_file_keeps_the_json_it_always_had(cli, monkeypatch):
    """`check FILE --format json` of one file: exactly the document of attn-tutor before issue 24 (written by
    commit 818efb4 into tests/data/check-json), not the batch document."""
    monkeypatch.chdir(DATA)
    for path in sorted(DATA.glob("*.yaml")):
        out = cli("check", path.name, "--format", "json").out
        assert out == (GOLDEN_JSON / f"{path.stem}.json").read_text(encoding="utf-8"), path.name


def test_a_tiled_file_gets_the_single_checks_verdict(cli, tmp_path):
    o = "  o: [1.891617, 1.891617]\n"
    right = "exercise: single-head-3x4\ntiled:\n  block_size: 3\n  query: t1\n" + o
    wrong = right.replace("1.891617, 1.891617", "1.5, 1.5")
    folder = _class(tmp_path, {"a.yaml": right, "b.yaml": wrong})
    doc = json.loads(cli("check", folder, "--format", "json").out)
    by = {Path(r["file"]).name: r for r in doc["submissions"]}
    assert [cli("check", folder / n).code for n in ("a.yaml", "b.yaml")] == [0, 1]
    assert (by["a.yaml"]["verdict"], by["b.yaml"]["verdict"]) == ("correct", "wrong")
    assert by["b.yaml"]["first_wrong"] == "tiled" and by["b.yaml"]["steps"] == [{"step": "tiled", "verdict": "wrong"}]


# --- exit codes ---------------------------------------------------------------------------------------


def test_exit_codes_all_right_one_wrong_one_unusable(cli, tmp_path):
    folder = _class(tmp_path, {"a.yaml": RIGHT, "b.yml": RIGHT})
    assert cli("check", folder).code == 0
    (folder / "c.yaml").write_text(NO_SCALING, encoding="utf-8")
    assert cli("check", folder).code == 1
    (folder / "d.yaml").write_text("exercise: no-such-exercise\nq: [[1]]\n", encoding="utf-8")
    code, out, err = cli("check", folder, "--format", "csv")
    assert code == 2 and err == ""  # 2 wins over 1; the unusable file is a row, the run goes on
    rows = _csv(out)
    assert [r["student"] for r in rows] == ["a", "b", "c", "d"]
    assert [r["verdict"] for r in rows] == ["correct", "correct", "wrong", "unusable"]
    assert rows[3]["score"] == "" and "no-such-exercise" in rows[3]["comment"]


def _fails_on(monkeypatch, name: str) -> None:
    """The grader raises a KeyError (attn-tutor's own bug, not the file's) on the file called ``name``."""
    from tutor.audit.batch import Grader

    row = Grader.row

    def failing(self, path, sf):
        if Path(path).name == name:
            raise KeyError("simulated")
        return row(self, path, sf)

    monkeypatch.setattr(Grader, "row", failing)


@pytest.mark.parametrize("fmt", ["rich", "csv", "json"])
def test_a_file_attn_tutor_fails_on_is_a_row_and_the_others_are_graded(cli, tmp_path, monkeypatch, fmt):
    """The run does not end with exit 3: that file is an unusable row whose comment says attn-tutor failed on
    it (one line, no traceback), the others are graded as before, and the exit code is issue 24's, 2."""
    folder = _class(tmp_path, {"a.yaml": RIGHT, "b.yaml": RIGHT, "c.yaml": NO_SCALING})
    _fails_on(monkeypatch, "b.yaml")
    code, out, err = cli("check", folder, "--format", fmt)
    assert code == 2 and err == ""
    assert "Traceback" not in out
    said = "attn-tutor failed on this file: internal error: KeyError at "
    if fmt == "csv":
        rows = _csv(out)
        assert [r["verdict"] for r in rows] == ["correct", "unusable", "wrong"]
        assert rows[1]["comment"].startswith(said) and "\n" not in rows[1]["comment"]
    elif fmt == "json":
        doc = json.loads(out)
        assert [r["verdict"] for r in doc["submissions"]] == ["correct", "unusable", "wrong"]
        assert doc["submissions"][1]["comment"].startswith(said) and doc["summary"]["exit_code"] == 2
    else:
        assert said in " ".join(out.split()) and out.count("internal error") == 1


def test_the_traceback_of_a_file_attn_tutor_fails_on_only_with_debug(cli, tmp_path, monkeypatch):
    folder = _class(tmp_path, {"a.yaml": RIGHT, "b.yaml": RIGHT})
    _fails_on(monkeypatch, "a.yaml")
    code, _, err = cli("check", folder, "--format", "csv", env={"ATTN_TUTOR_DEBUG": "1"})
    assert code == 2 and err.startswith("Traceback") and "KeyError: 'simulated'" in err


def test_checks_help_says_its_exit_codes(cli):
    out = " ".join(cli("check", "--help").out.split())
    assert ("Exit codes: 0 every file right; 1 a file wrong; 2 a file unusable, or one attn-tutor failed on (its "
            "row says so, and the other files are graded all the same); 3 attn-tutor itself failed.") in out


def test_files_and_folders_named_together_and_nothing_to_grade(cli, tmp_path):
    folder = _class(tmp_path, {"a.yaml": RIGHT, "notes.txt": "not a submission", ".hidden.yaml": NO_SCALING})
    (folder / "sub").mkdir()
    (folder / "sub" / "x.yaml").write_text(NO_SCALING, encoding="utf-8")  # not recursive
    extra = tmp_path / "late.yaml"
    extra.write_text(NO_SCALING, encoding="utf-8")
    doc = json.loads(cli("check", folder, extra, "--format", "json").out)
    assert [r["student"] for r in doc["submissions"]] == ["a", "late"]
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = cli("check", empty)
    assert code == 2 and err.startswith("error: no solution files (*.yaml, *.yml, *.yaml.txt) in ")


def test_a_folder_is_read_in_the_order_a_person_sorts_names(cli, tmp_path):
    """s2 before s10 (a gradebook's rows in roster order), not the code points' s10 before s2."""
    folder = _class(tmp_path, {"s10.yaml": RIGHT, "s2.yaml": RIGHT, "S3.yaml": RIGHT, "s1.yml": RIGHT})
    doc = json.loads(cli("check", folder, "--format", "json").out)
    assert [r["student"] for r in doc["submissions"]] == ["s1", "s2", "S3", "s10"]


def test_a_symlink_out_of_the_folder_and_a_huge_file_are_rows(cli, tmp_path):
    secret = tmp_path / "secret.yaml"
    secret.write_text("exercise: single-head-3x4\nq: [[7, 7], [7, 7], [7, 7]]\n", encoding="utf-8")
    folder = _class(tmp_path, {"a.yaml": RIGHT, "huge.yaml": "exercise: single-head-3x4\n" + "#" * 3_000_000})
    os.symlink(secret, folder / "link.yaml")
    code, out, err = cli("check", folder, "--format", "json")
    by = {r["student"]: r for r in json.loads(out)["submissions"]}
    assert code == 2 and by["a"]["verdict"] == "correct"
    assert by["link"]["verdict"] == by["huge"]["verdict"] == "unusable"
    assert "7, 7" not in out  # the link's target is never read
    assert cli("check", folder / "link.yaml").code == 2 and cli("check", folder / "huge.yaml").code == 2


# --- the student, and the CSV a gradebook imports --------------------------------------------------------


def test_student_field_and_a_hostile_name_in_the_csv(cli, tmp_path):
    names = {"a.yaml": 'student: "Doe, Jane \\"JJ\\""\n', "b.yaml": 'student: "=HYPERLINK(\\"http://x\\")"\n',
             "c.yaml": 'student: "two\\nlines\\u0007"\n', "d.yaml": "student: 20231234\n", "e.yaml": "student: '@SUM(1)'\n",
             "f.yaml": "student: ' -1+1'\n"}
    folder = _class(tmp_path, {n: s + (RIGHT if n != "b.yaml" else NO_SCALING) for n, s in names.items()})
    code, out, err = cli("check", folder, "--format", "csv")
    assert code == 1
    assert not any(ch in out.replace("\n", "") for ch in "\r\x07\x00")  # no raw control character but the line ends
    raw = out.encode("utf-8")
    assert not raw.startswith(b"\xef\xbb\xbf")  # UTF-8 without a byte order mark
    rows = _csv(out)
    assert list(rows[0]) == ["student", "exercise", "score", "steps_right", "steps_total", "steps_given", "verdict",
                             "first_wrong_step", "mistakes", "comment", "variant_of", "steps"]
    assert [r["student"] for r in rows] == ['Doe, Jane "JJ"', "'=HYPERLINK(\"http://x\")", "two\\x0alines\\x07", "20231234",
                                            "'@SUM(1)", "'-1+1"]
    # the score is out of the exercise's 7 forward steps, not of the 2 given (finding 2 of the trial)
    assert [r["score"] for r in rows] == ["28.57", "14.29", "28.57", "28.57", "28.57", "28.57"]
    assert [(r["steps_right"], r["steps_total"], r["steps_given"]) for r in rows[:2]] == [("2", "7", "2"), ("1", "7", "2")]
    assert rows[1]["first_wrong_step"] == "scaled" and rows[1]["mistakes"] == "no_scaling"
    assert rows[1]["comment"] == "scaled is the first wrong step. You forgot to divide by √d_k: scaled = scores / √2."
    assert rows[1]["steps"] == "scores:correct; scaled:wrong"
    for row in rows:  # OWASP: no cell starts a formula
        assert all(not cell.lstrip(" ").startswith(("=", "+", "-", "@")) for cell in row.values())


@pytest.mark.parametrize("value, message", [
    ("[1, 2]", "student: expected text, found a list"),
    ("'" + "x" * 201 + "'", "student: student: is 201 characters long, more than 200: give a name or an id"),
])
def test_a_bad_student_field_is_refused_at_the_field(cli, tmp_path, value, message):
    path = _class(tmp_path, {"a.yaml": f"student: {value}\n" + RIGHT}) / "a.yaml"
    code, out, err = cli("check", path)
    assert code == 2 and message in err


def test_the_rich_table_and_its_narrow_form(cli, tmp_path):
    folder = _class(tmp_path, {"ann.yaml": RIGHT, "bob.yaml": NO_SCALING, "cy.yaml": "q: [[1]]\n"})
    code, out, err = cli("check", folder)
    assert code == 2
    lines = out.splitlines()
    assert lines[0].split() == ["student", "exercise", "verdict", "steps", "right", "first", "wrong", "step", "comment"]
    assert "✓ correct" in out and "✗ wrong" in out and "! unusable" in out  # words, not colour alone
    assert lines[-1] == "3 submissions: 1 correct, 1 wrong, 1 unusable."
    narrow = cli("check", folder, env={"COLUMNS": "40"}).out.splitlines()
    assert narrow[0].rstrip() == "✓ correct  ann: single-head-3x4, steps" and narrow[-2].startswith("3 submissions")
    assert all(len(line) <= 40 for line in narrow)


def test_the_rows_in_chinese(cli, tmp_path):
    folder = _class(tmp_path, {"ann.yaml": RIGHT, "bob.yaml": NO_SCALING})
    out = cli("check", folder, "--lang", "zh", "--format", "csv").out
    rows = _csv(out)
    assert rows[0]["comment"] == "本练习共 7 个步骤，你交了其中 2 个步骤，没有错；另外 5 个没有交，分数按全部 7 个步骤中做对的个数计算。"
    assert rows[1]["comment"] == "第一个错误的步骤是 scaled。你忘了除以 √d_k：scaled = scores / √2。"
    table = cli("check", folder, "--lang", "zh").out
    assert "✓ 正确" in table and "✗ 错误" in table and table.splitlines()[-1] == "共 2 份提交：1 份正确，1 份错误，0 份无法判分。"
    assert "batch." not in table and "--format" in cli("check", "--help", "--lang", "zh").out


def test_exercises_is_passed_through_to_every_file(cli, tmp_path):
    """A submission naming an exercise of a pack (a per-student variant) is found with --exercises, as `check FILE` finds it."""
    pack = tmp_path / "pack"
    pack.mkdir()
    text = (REPO / "exercises" / "single-head-3x4.yaml").read_text(encoding="utf-8")
    (pack / "variant-ann.yaml").write_text(text.replace("id: single-head-3x4", "id: variant-ann"), encoding="utf-8")
    folder = _class(tmp_path, {"ann.yaml": RIGHT.replace("single-head-3x4", "variant-ann")})
    assert cli("check", folder).code == 2
    doc = json.loads(cli("check", folder, "--exercises", pack, "--format", "json").out)
    assert doc["submissions"][0]["exercise"] == "variant-ann" and doc["submissions"][0]["verdict"] == "correct"
    assert cli("check", folder / "ann.yaml", "--exercises", pack).code == 0


# --- report ---------------------------------------------------------------------------------------------


def test_report_from_a_folder_and_from_its_csv_agree(cli, tmp_path):
    folder = _class(tmp_path, {"ann.yaml": RIGHT, "bob.yaml": NO_SCALING, "cy.yaml": NO_SCALING,
                               "dee.yaml": "exercise: nope\nq: [[1]]\n"})
    sheet = tmp_path / "grades.csv"
    sheet.write_text(cli("check", folder, "--format", "csv").out, encoding="utf-8")
    from_dir = json.loads(cli("report", folder, "--format", "json").out)
    from_csv = json.loads(cli("report", sheet, "--format", "json").out)
    assert from_dir == from_csv
    subs = from_dir["submissions"]
    assert subs["summary"] == {"submissions": 4, "correct": 1, "wrong": 2, "unusable": 1}
    assert [(s["step"], s["given"], s["right"], s["share"]) for s in subs["steps"]] == [
        ("q", 1, 1, 1.0), ("scores", 3, 3, 1.0), ("scaled", 2, 0, 0.0)]  # a fraction, as progress's accuracy
    assert subs["mistakes"] == [{"key": "no_scaling", "name": "forgot to divide by √d_k", "submissions": 2,
                                 "example": "bob", "exercise": "single-head-3x4", "step": "scaled"}]
    assert subs["assign"]["command"] == f"attn-tutor practice {subs['assign']['exercise']}"
    assert subs["assign"]["shows"] and subs["assign"]["exercise"] != "single-head-3x4"
    md = cli("report", folder, "--format", "markdown").out
    assert md.startswith("# Class report\n") and "| forgot to divide by √d\\_k | 2 | bob, at scaled |" in md
    rich = cli("report", folder).out
    assert "The most common mistake: forgot to divide by √d_k." in rich and "attn-tutor practice" in rich
    zh = cli("report", folder, "--lang", "zh").out
    assert "最常见的错误：忘了除以 √d_k。" in zh


def test_report_refuses_a_csv_that_is_not_one_of_check(cli, tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("name,grade\nann,3\n", encoding="utf-8")
    code, out, err = cli("report", bad)
    assert code == 2 and "not a CSV of check --format csv: its first row (name,grade) has none of the columns" in err
    bad.write_text("student,exercise,verdict\nann,x,correct\n", encoding="utf-8")
    assert "not a CSV of check --format csv: no column first_wrong_step, mistakes, steps" in cli("report", bad).err
    bad.write_text('student,exercise,verdict,first_wrong_step,mistakes,steps\nann,x,maybe,,,\n', encoding="utf-8")
    assert "x.csv:2: verdict 'maybe' should be correct, wrong or unusable" in cli("report", bad).err


def test_every_mistake_maps_to_something_that_exists():
    """What to assign for every mistake `check` can name, at a step where it shows: a bundled exercise (that has
    the step, when the step is to be practised)."""
    from tutor.audit.classview import assignment
    from tutor.exercise.catalog import bundled
    from tutor.flash.check import MISTAKES
    from tutor.mistakes.diagnose import MISCONCEPTIONS
    from tutor.mistakes.invisible import _catches
    from tutor.steps import KINDS

    exercises = {ex.id: ex for ex in bundled()}
    pairs = {}
    for ex in exercises.values():  # every (mistake, step) some bundled exercise catches
        for key, step in _catches(ex):
            pairs.setdefault((key, step), ex.id)
    for m in MISCONCEPTIONS:  # a mistake no bundled exercise catches: named at the steps it can change
        if not any(k == m.key for k, _ in pairs):
            pairs[(m.key, "weights")] = "single-head-3x4"
    for (key, step), where in sorted(pairs.items()):
        a = assignment(key, step, where)
        assert a.exercise in exercises, (key, step)
        if a.step is not None:
            assert KINDS[a.step].exists(exercises[a.exercise]), (key, step)
        # a mistake made in a gradient is practised in the backward pass (the trial: rope_grad_not_unrotated
        # assigned as forward-only practice, where it never shows)
        if a.shows and KINDS[step].backward:
            assert a.command == f"attn-tutor practice {a.exercise} --backward", (key, step, a.command)
        elif a.shows:
            assert "--backward" not in a.command, (key, step, a.command)
    for key in ("single_entry", "nan", "nan_empty_row"):
        a = assignment(key, "weights", "single-head-3x4")
        assert (a.exercise, a.step) == ("single-head-3x4", "weights")
    for key, _ in MISTAKES:
        assert assignment(key, "tiled", "single-head-3x4").command == "attn-tutor practice single-head-3x4 --tiled"
    a = assignment("single_entry", "k_new", "single-head-3x4")  # a step that exercise does not have
    assert KINDS["k_new"].exists(exercises[a.exercise])


def test_report_assigns_a_backward_mistake_with_backward(cli, tmp_path):
    """The trial's class: rope_grad_not_unrotated at d_q is assigned as the backward pass of an exercise that
    shows it (sentence, command and JSON), in English and Chinese."""
    from tutor.audit.classview import assignment

    a = assignment("rope_grad_not_unrotated", "d_q", "rope-relative-4x2")
    assert a.shows and a.backward and a.command == f"attn-tutor practice {a.exercise} --backward"
    assert not assignment("no_scaling", "scaled", "single-head-3x4").backward  # a forward mistake: forward practice
    rows = tmp_path / "g.csv"
    rows.write_text(
        '"student","exercise","score","verdict","first_wrong_step","mistakes","comment","steps"\n'
        '"s1","rope-relative-4x2","33.33","wrong","d_q","rope_grad_not_unrotated","","d_q_rot:correct; d_q:wrong"\n',
        encoding="utf-8")
    code, out, err = cli("report", rows, env={"COLUMNS": "200"})
    assert code == 0, err
    assert f"It shows in the backward pass of exercise {a.exercise} (--backward)" in out
    assert f"attn-tutor practice {a.exercise} --backward" in out
    code, out, err = cli("report", rows, "--format", "json")
    assert code == 0, err
    assign = json.loads(out)["submissions"]["assign"]
    assert assign["backward"] is True and assign["command"].endswith(" --backward")
    code, out, err = cli("--lang", "zh", "report", rows, env={"COLUMNS": "200"})
    assert code == 0 and f"练习 {a.exercise} 的反向传播（--backward）能暴露这个错误" in out


# --- stats --export, and report over the class's progress files --------------------------------------------


def _record(home: Path, answers):
    from tutor.exercise.catalog import resolve
    from tutor.store import Attempt, Store

    family = resolve("single-head-3x4").family
    with Store.open(home / "progress.sqlite3") as store:
        s = store.begin_session("single-head-3x4", mode="matrix", tolerance=None)
        for step, outcome, keys in answers:
            store.record(s, Attempt("single-head-3x4", step, 0, outcome, 1, 0, keys, family=family))


def test_stats_export_holds_the_record_and_no_path(cli, tmp_path, home):
    _record(home, [("scores", "correct", ()), ("scaled", "wrong", ("no_scaling",)), ("scaled", "correct", ())])
    target = tmp_path / "out" / "ann.json"
    target.parent.mkdir()
    code, out, err = cli("stats", "--export", target)
    assert (code, err) == (0, "") and out == f"Your progress is in {target}.\n"
    text = target.read_text(encoding="utf-8")
    doc = json.loads(text)
    assert str(home) not in text and str(tmp_path) not in text and os.uname().nodename not in text
    assert set(doc) == {"format", "version", "exported", "sessions", "answers", "steps", "practised", "skills", "mistakes"}
    assert [(s["step"], s["correct"], s["wrong"]) for s in doc["steps"]] == [("scores", 1, 0), ("scaled", 1, 1)]
    assert doc["mistakes"] == [{"key": "no_scaling", "kind": "diagnosis", "count": 1}]
    family = doc["skills"][0]["family"] if doc["skills"] else None
    assert {(k["step"], k["family"]) for k in doc["skills"]} == {("scores", family), ("scaled", family)}
    assert cli("stats", "--export", target).code == 2  # an existing file is not replaced without --force
    assert cli("stats", "--export", target, "--force").code == 0


def test_report_adds_up_the_progress_files(cli, tmp_path, home):
    folder = tmp_path / "progress"
    folder.mkdir()
    _record(home, [("scaled", "wrong", ("no_scaling",)), ("scaled", "correct", ())])
    cli("stats", "--export", folder / "ann.json")
    _record(home, [("scaled", "correct", ()), ("scores", "correct", ())])
    cli("stats", "--export", folder / "bob.json")
    doc = json.loads(cli("report", folder, "--format", "json").out)
    assert doc["submissions"] is None
    prog = doc["progress"]
    assert prog["learners"] == 2
    by = {s["step"]: s for s in prog["steps"]}  # bob's store holds ann's answers too: 3 of 4 right on scaled
    assert (by["scaled"]["learners"], by["scaled"]["correct"], by["scaled"]["graded"]) == (2, 3, 5)
    assert prog["mistakes"][0]["key"] == "no_scaling" and prog["mistakes"][0]["learners"] == 2
    assert {(k["step"], k["learners"]) for k in prog["skills"]} >= {("scaled", 2)}
    out = cli("report", folder).out
    assert "Progress of 2 learners, per step practised" in out and "Per exercise: the learners who practised" in out
    assert "| single-head-3x4 | scaled | 2 | 5 |" in cli("report", folder, "--format", "markdown").out


def test_report_refuses_a_hostile_progress_file(cli, tmp_path):
    folder = tmp_path / "progress"
    folder.mkdir()
    (folder / "x.json").write_text(json.dumps({"format": "attn-tutor-progress", "version": 1,
                                               "skills": [{"step": "q", "family": "f", "due": "soon", "retention": 0.5}]}))
    code, out, err = cli("report", folder)
    assert code == 2 and err.strip().endswith("skills[0].due should be a time in ISO 8601")
    (folder / "x.json").write_text("[" * 100_000)
    assert "not a JSON document" in cli("report", folder).err
    shutil.rmtree(folder)


def test_the_comment_says_what_check_file_says_first(cli, tmp_path):
    """A wrong shape is said as a shape; a decimal cut off (no misconception) by its note; as `check FILE` shows them."""
    folder = _class(tmp_path, {
        "shape.yaml": "exercise: single-head-3x4\nq: [[1, 1, 0], [2, 2, 0], [2, 2, 0]]\n",
        "cut.yaml": "exercise: single-head-3x4\nweights: [[0.108, 0.445, 0.445], [0.0, 0.5, 0.5], [0.0, 0.5, 0.5]]\n"})
    rows = {r["student"]: r for r in _csv(cli("check", folder, "--format", "csv").out)}
    assert rows["shape"]["comment"] == "q is the first wrong step: it is [3×3], and should be [3×2]."
    assert rows["cut"]["comment"] == ("weights is the first wrong step. [t1, t2] = 0.445, [t1, t3] = 0.445: cut off instead"
                                      " of rounded (0.445808 to 3 decimals is 0.446, not 0.445).")
    assert "cut off instead of rounded (0.445808 to 3" in cli("check", folder / "cut.yaml").out


def test_a_files_warnings_are_said_as_check_file_says_them(cli, tmp_path):
    folder = _class(tmp_path, {"a.yaml": "exercise: single-head-3x4\nq: [[1, 1], [2, 2], [2, 010]]\n"})
    code, out, err = cli("check", folder)
    alone = cli("check", folder / "a.yaml")
    assert code == alone.code == 1 and err == alone.err and "warning: q[2][1]: 010 has a leading zero" in err
    row = json.loads(cli("check", folder, "--format", "json").out)["submissions"][0]
    assert [(w["line"], w["field"]) for w in row["warnings"]] == [(2, "q[2][1]")]

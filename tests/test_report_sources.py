"""Class trial of issue 24, findings F4, F12, F13 (fix-report): what `report` does with each source it is given.

A progress file or CSV that cannot be read is a line of the report with its reason, never the end of it (exit
2, the others reported); a folder's files report does not read are named; a progress file given twice counts
once; a spreadsheet's empty row and its formula guard are undone on reading the CSV back; a CSV Excel saved as
GBK gets the two ways out; the practice on a roster's variants adds up under the exercise they were drawn like;
the skills table keeps its numbers' headers on one line at 80 columns."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

RIGHT = "exercise: single-head-3x4\nq: [[1, 1], [2, 2], [2, 2]]\nscores: [[2, 4, 4], [4, 8, 8], [4, 8, 8]]\n"
NO_SCALING = "exercise: single-head-3x4\nscores: [[2, 4, 4], [4, 8, 8], [4, 8, 8]]\nscaled: [[2, 4, 4], [4, 8, 8], [4, 8, 8]]\n"


@pytest.fixture
def variables(variables):
    return {**variables, "COLUMNS": "200"}


def _record(home: Path, answers, exercise: str = "single-head-3x4") -> None:
    from tutor.exercise.catalog import resolve
    from tutor.store import Attempt, Store

    family = resolve("single-head-3x4").family
    with Store.open(home / "progress.sqlite3") as store:
        s = store.begin_session(exercise, mode="matrix", tolerance=None)
        for step, outcome in answers:
            store.record(s, Attempt(exercise, step, 0, outcome, 1, 0, (), family=family))


def _progress(cli, home: Path, tmp_path: Path) -> tuple[Path, dict]:
    """A folder holding ann.json, one learner's export (q right, scaled wrong then right), and its document."""
    folder = tmp_path / "progress"
    folder.mkdir()
    _record(home, [("q", "correct"), ("scaled", "wrong"), ("scaled", "correct")])
    assert cli("stats", "--export", folder / "ann.json").code == 0
    return folder, json.loads((folder / "ann.json").read_text(encoding="utf-8"))


def _edited(doc: dict, **changes) -> str:
    """``doc`` with the first step's fields changed (a hand-edited export), as JSON text."""
    return json.dumps({**doc, "steps": [{**doc["steps"][0], **changes}, *doc["steps"][1:]]})


def test_a_bad_progress_file_is_a_line_of_the_report_not_its_end(cli, home, tmp_path):
    """F4: each of eight bad files beside one good export; the report is of the good one, every bad file
    named with its reason, and the run exits 2."""
    folder, doc = _progress(cli, home, tmp_path)
    check_out = cli("check", tmp_path / "nowhere.yaml", "--format", "json").out  # what a student sends by mistake
    bad = {"checkout.json": check_out, "empty.json": "", "truncated.json": '{"format": "attn-tutor-progress", "ver',
           "list.json": "[]", "future.json": json.dumps({**doc, "version": 99}),
           "minus.json": _edited(doc, correct=-5), "huge.json": _edited(doc, correct=10**30),
           "nan.json": _edited(doc, correct=math.nan)}
    for name, text in bad.items():
        (folder / name).write_text(text, encoding="utf-8")
    code, out, err = cli("report", folder, "--format", "json")
    assert code == 2
    assert err == "error: 8 files or CSV rows could not be read; the report is of the others and lists each with its reason\n"
    got = json.loads(out)
    assert got["progress"]["learners"] == 1
    by = {s["step"]: s for s in got["progress"]["steps"]}
    assert (by["scaled"]["correct"], by["scaled"]["graded"]) == (1, 2)  # ann's alone
    unread = got["sources"]["unread"]
    assert [line.split(": ", 1)[0] for line in unread] == [str(folder / n) for n in sorted(bad)]
    said = {Path(line.split(": ", 1)[0]).name: line.split(": ", 1)[1] for line in unread}
    assert said["checkout.json"] == said["list.json"] == "not a progress file (attn-tutor stats --export writes them)"
    assert said["empty.json"] == said["truncated.json"] == "not a JSON document"
    assert said["future.json"] == "version should be 1 (this version of attn-tutor reads only that one)"
    # the cap is named: 10**30 is a whole number, and the sentence no longer says it is not one
    assert said["huge.json"] == said["minus.json"] == said["nan.json"] == "steps[0].correct should be a whole number from 0 to 10¹²"
    md = cli("report", folder, "--format", "markdown")
    assert md.code == 2 and "Not read (left out of this report):\n\n- " in md.out and "future.json: version" in md.out
    rich = cli("report", folder)
    assert rich.code == 2 and "Not read" in rich.out and "Progress of 1 learner" in rich.out
    zh = cli("--lang", "zh", "report", folder)
    assert zh.code == 2 and "有 8 个文件或 CSV 行无法读取" in zh.err and "未读取（不计入本报告）：" in zh.out


def test_every_bad_file_is_named_when_none_can_be_read(cli, tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "a.json").write_text("[]", encoding="utf-8")
    (folder / "b.json").write_text("", encoding="utf-8")
    code, out, err = cli("report", folder)
    assert code == 2 and out == ""
    assert f"{folder / 'a.json'}: not a progress file" in err and f"{folder / 'b.json'}: not a JSON document" in err


@pytest.mark.parametrize("field, change, expected", [
    ("steps[0].first_try", {"first_try": 50}, "a whole number from 0 to the step's correct count"),
    ("skills[0].recalled", None, "a whole number from 0 to the skill's reviews"),
])
def test_counts_that_contradict_each_other_are_refused(cli, home, tmp_path, field, change, expected):
    """F4 (smaller): right at the first try 50 times of 1 right answer; recalled more often than reviewed."""
    folder, doc = _progress(cli, home, tmp_path)
    if change is not None:
        text = _edited(doc, **change)
    else:
        skill = doc["skills"][0]
        text = json.dumps({**doc, "skills": [{**skill, "recalled": skill["reviews"] + 1}, *doc["skills"][1:]]})
    (folder / "ann.json").write_text(text, encoding="utf-8")
    code, out, err = cli("report", folder)
    assert code == 2 and err.startswith(f"error: {folder / 'ann.json'}: {field} should be {expected}")
    ok = {**doc, "steps": [{**doc["steps"][0], "first_try": doc["steps"][0]["correct"]}, *doc["steps"][1:]]}
    (folder / "ann.json").write_text(json.dumps(ok), encoding="utf-8")  # the bound itself is allowed
    assert cli("report", folder).code == 0


def test_the_same_progress_file_twice_is_one_learner(cli, home, tmp_path):
    """F12: a learner's export handed in under two names is one learner, and the report says so."""
    folder, doc = _progress(cli, home, tmp_path)
    (folder / "zoe.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")  # same content, other bytes
    code, out, err = cli("report", folder, "--format", "json")
    got = json.loads(out)
    assert code == 0 and got["progress"]["learners"] == 1
    assert got["sources"]["same"] == [{"file": str(folder / "zoe.json"), "same_as": str(folder / "ann.json")}]
    assert f"{folder / 'zoe.json'} holds the same progress as {folder / 'ann.json'}: counted once." in cli(
        "report", folder, env={"COLUMNS": "1000"}).out
    _record(home, [("q", "correct")])  # one more answer: another record, two learners
    assert cli("stats", "--export", folder / "zoe.json", "--force").code == 0
    assert json.loads(cli("report", folder, "--format", "json").out)["progress"]["learners"] == 2


def test_files_a_folder_holds_that_report_does_not_read_are_named(cli, home, tmp_path):
    """F12: x.txt (an export under another name) and a subfolder are said, not passed over in silence."""
    folder, doc = _progress(cli, home, tmp_path)
    (folder / "x.txt").write_text(json.dumps(doc), encoding="utf-8")
    (folder / "sub").mkdir()
    (folder / ".hidden").write_text("", encoding="utf-8")
    code, out, err = cli("report", folder, "--format", "json")
    assert code == 0 and json.loads(out)["sources"]["passed_over"] == ["sub/", "x.txt"]
    line = ("A folder's *.yaml, *.yml, *.yaml.txt, *.json and *.csv files are read, not its other files or subfolders; "
            "not read: sub/ and x.txt")
    assert line in cli("report", folder).out
    assert "- " + line.replace("*", "\\*").replace("_", "\\_") in cli("report", folder, "--format", "markdown").out
    assert "未读取：sub/ 和 x.txt" in cli("--lang", "zh", "report", folder).out


def test_report_reads_the_solution_files_batch_check_grades(cli, tmp_path):
    """Notepad's bob.yaml.txt is graded by `check DIR` (fix-check); `report DIR` read only *.yaml and *.yml
    and named it "not read": the two now take a folder's solution files by one list (audit.batch.SUFFIXES)."""
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "ann.yaml").write_text(RIGHT + "student: ann\n", encoding="utf-8")
    (folder / "bob.yaml.txt").write_text(NO_SCALING + "student: bob\n", encoding="utf-8")
    checked = json.loads(cli("check", folder, "--format", "json").out)
    assert sorted(r["student"] for r in checked["submissions"]) == ["ann", "bob"]
    code, out, _ = cli("report", folder, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["sources"]["passed_over"] == []
    assert "bob.yaml.txt" not in cli("report", folder).out
    assert "2 submissions: 1 correct, 1 wrong, 0 unusable." in cli("report", folder).out


def test_the_csv_read_back_undoes_the_guard_and_skips_an_empty_row(cli, tmp_path):
    """F12: the gradebook's ' before a formula is dropped on reading (the folder and its CSV name the student
    alike), and the row of empty cells Excel leaves after an edit is no submission."""
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "a.yaml").write_text("student: \"=cmd|' /C calc'!A0\"\n" + NO_SCALING, encoding="utf-8")
    (folder / "b.yaml").write_text("student: '-1'\n" + RIGHT, encoding="utf-8")
    sheet = tmp_path / "grades.csv"
    text = cli("check", folder, "--format", "csv").out
    assert "'=cmd" in text  # guarded in the gradebook
    sheet.write_text(text + ",,,,,,,,,,,\n", encoding="utf-8")
    from_csv = json.loads(cli("report", sheet, "--format", "json").out)
    from_dir = json.loads(cli("report", folder, "--format", "json").out)
    assert from_csv == from_dir
    assert from_csv["submissions"]["summary"]["submissions"] == 2
    assert from_csv["submissions"]["mistakes"][0]["example"] == "=cmd|' /C calc'!A0"
    sheet.write_text(text.replace("\n", "\r\n") + ",,,\r\n , ,\r\n", encoding="utf-8")  # CRLF, spaces, short rows
    assert json.loads(cli("report", sheet, "--format", "json").out) == from_dir
    sheet.write_text(text + ",x,,,,,,,,,,\n", encoding="utf-8")  # not empty: still a row to refuse, the others read
    code, out, err = cli("report", sheet, "--format", "json")
    assert code == 2 and json.loads(out)["sources"]["unread"] == [f"{sheet}:4: verdict '' should be correct, wrong or unusable"]
    assert json.loads(out)["submissions"] == from_dir["submissions"]
    assert err == "error: 1 file or CSV row could not be read; the report is of the others and lists each with its reason\n"


def test_a_gbk_gradebook_gets_the_two_ways_out(cli, tmp_path):
    """F11: Excel on Chinese Windows saves a plain CSV as GBK; report names what to do, in both languages."""
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "a.yaml").write_text("student: 王小明\n" + RIGHT, encoding="utf-8")
    text = cli("check", folder, "--format", "csv").out
    sheet = tmp_path / "grades-gbk.csv"
    sheet.write_bytes(text.encode("gbk"))
    code, out, err = cli("report", sheet)
    assert code == 2 and err == (f"error: {sheet}: not UTF-8 text (Excel's plain CSV on Chinese Windows is GBK). In Excel, "
                                 "save it as \"CSV UTF-8 (Comma delimited)\", or convert it: iconv -f GB18030 -t UTF-8 "
                                 "OLD.csv > NEW.csv\n")
    assert "另存为“CSV UTF-8（逗号分隔）”" in cli("--lang", "zh", "report", sheet).err
    fixed = tmp_path / "grades-utf8.csv"
    fixed.write_text(sheet.read_bytes().decode("gb18030"), encoding="utf-8")  # what the iconv line does
    assert json.loads(cli("report", fixed, "--format", "json").out)["submissions"]["summary"]["correct"] == 1


def test_practice_on_roster_variants_adds_up_under_their_exercise(cli, home, tmp_path):
    """F13: two students practise their own variants of single-head-3x4; with the roster's folder the steps
    are the exercise's, each learner once; without it each variant is its own exercise."""
    roster = tmp_path / "roster.csv"
    roster.write_text("student\nalice\ndave\n", encoding="utf-8")
    handouts = tmp_path / "h"
    assert cli("handouts", "--like", "single-head-3x4", "--students", roster, "-o", handouts).code == 0
    folder = tmp_path / "progress"
    folder.mkdir()
    for who, home_of in (("alice", tmp_path / "ha"), ("dave", tmp_path / "hd")):
        home_of.mkdir()
        _record(home_of, [("q", "correct"), ("q", "wrong")], exercise=f"single-head-3x4-{who}")
        assert cli("stats", "--export", folder / f"{who}.json", env={"ATTN_TUTOR_HOME": str(home_of)}).code == 0
    joined = json.loads(cli("report", folder, "--exercises", handouts, "--format", "json").out)["progress"]["practised"]
    assert joined == [{"exercise": "single-head-3x4", "step": "q", "learners": 2, "graded": 4}]
    apart = json.loads(cli("report", folder, "--format", "json").out)["progress"]["practised"]
    assert [(p["exercise"], p["learners"]) for p in apart] == [("single-head-3x4-alice", 1), ("single-head-3x4-dave", 1)]


def test_the_export_help_says_what_the_file_holds(cli):
    """F13: the "no names" sentence was untrue for a variant's id, which is made from the student id."""
    out = cli("stats", "--help", env={"COLUMNS": "400"}).out
    assert "no paths, no user or machine name" in out and "is made from your student id" in out
    assert "不含路径、用户名和机器名" in cli("--lang", "zh", "stats", "--help", env={"COLUMNS": "400"}).out


def test_the_skills_table_keeps_its_headers_on_one_line_at_80_columns(cli, home, tmp_path):
    """F12: "never" over "recalled" read as two columns; the numbers' headers and cells do not wrap."""
    folder, _ = _progress(cli, home, tmp_path)
    for lang, header in (("en", ["step", "family", "learners", "due now", "never right", "retention"]),
                         ("zh", ["步骤", "系列", "学习者", "待复习", "从未答对", "记忆保持率"])):
        out = cli("--lang", lang, "report", folder, env={"COLUMNS": "80"}).out
        lines = out.splitlines()
        at = next(i for i, line in enumerate(lines) if line.split()[:1] == [header[0]] and header[-1] in line)
        assert all(h in lines[at] for h in header)
        assert lines[at - 1].split()[-1] not in ("never", "记忆保持率", "从未答对")  # no header's word above the row
        q_row = next(line for line in lines[at:] if line.split()[:1] == ["q"])
        assert q_row.rstrip().endswith("100% / 100%") and max(len(line) for line in lines) <= 80


@pytest.mark.parametrize("encoding", ["utf-8", "ascii", "gbk"])
def test_excel_csv_is_the_gradebook_after_a_byte_order_mark(cli_encoded, tmp_path, encoding):
    """F11: Excel opens a CSV without a byte order mark in the system's code page (GBK on Chinese Windows):
    excel-csv is the csv's bytes after EF BB BF, whatever the stream's encoding; csv keeps none."""
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "a.yaml").write_text("student: 王小明\n" + NO_SCALING, encoding="utf-8")
    plain = cli_encoded("check", folder, "--format", "csv", encoding=encoding)
    excel = cli_encoded("check", folder, "--format", "excel-csv", encoding=encoding)
    one = cli_encoded("check", folder / "a.yaml", "--format", "excel-csv", encoding=encoding)  # one file: a row too
    assert plain.code == excel.code == one.code == 1
    assert not plain.stdout.startswith(b"\xef\xbb\xbf") and "王小明".encode() in plain.stdout
    assert excel.stdout == one.stdout == b"\xef\xbb\xbf" + plain.stdout
    sheet = tmp_path / "grades.csv"
    sheet.write_bytes(excel.stdout)
    assert cli_encoded("report", sheet, "--format", "json", encoding="utf-8").code == 0


def test_the_help_names_excel_csv_in_both_languages(cli):
    out = " ".join(cli("check", "--help", env={"COLUMNS": "1000"}).out.split())
    assert "excel-csv (the same CSV after a byte order mark, by which Excel, on Chinese Windows too" in out
    zh = cli("--lang", "zh", "check", "--help", env={"COLUMNS": "1000"}).out
    assert "excel-csv（同样的 CSV，开头加 BOM" in zh

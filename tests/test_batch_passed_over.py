"""Class trial F12, F12b, F16, F2 (batch `check`): nothing a folder holds is passed over without a word, one
file is one row, the exercise file kept beside the submissions is not a submission, and the comment a
student reads says what the score counts and never holds the grader's folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RIGHT = "exercise: single-head-3x4\nq: [[1, 1], [2, 2], [2, 2]]\nscores: [[2, 4, 4], [4, 8, 8], [4, 8, 8]]\n"
EXERCISE = Path(__file__).resolve().parents[1] / "exercises" / "single-head-3x4.yaml"


@pytest.fixture
def variables(variables):
    return {**variables, "COLUMNS": "200"}


def _write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _doc(cli, *args) -> tuple[int, dict, str]:
    code, out, err = cli("check", *args, "--format", "json")
    return code, json.loads(out), err


def test_notepads_yaml_txt_is_graded_and_what_is_not_read_is_said(cli, tmp_path):
    """bob.yaml.txt (Notepad's default) is a row of bob; a subfolder and a file of another suffix are named in
    one warning line, in every format."""
    folder = _write(tmp_path / "subs", {"alice.yaml": RIGHT, "bob.yaml.txt": RIGHT, "notes.pdf": "x",
                                        "nested/grace.yaml": RIGHT, ".hidden.yaml": RIGHT})
    code, doc, err = _doc(cli, folder)
    assert [(r["student"], r["verdict"]) for r in doc["submissions"]] == [("alice", "correct"), ("bob", "correct")]
    assert doc["warnings"] == [{"file": str(folder), "line": None, "column": None, "field": "",
                                "message": "2 entries here are not graded: nested/ and notes.pdf; a folder's *.yaml "
                                           "and *.yml files (and *.yaml.txt) are, not its other files or its subfolders (name a "
                                           "subfolder to grade the files in it)", "hint": ""}]
    for fmt in ("rich", "csv"):
        code, out, err = cli("check", folder, "--format", fmt)
        assert f"{folder}: warning: 2 entries here are not graded: nested/ and notes.pdf;" in err
        assert code == 0
    _, _, err = cli("--lang", "zh", "check", folder)
    assert f"{folder}: 警告：这里有 2 项没有判分：nested/ 和 notes.pdf；" in err


def test_a_folder_of_folders_says_so_before_the_error(cli, tmp_path):
    """An LMS download, a folder per student: the error comes after the line naming the subfolders."""
    lms = _write(tmp_path / "lms", {"alice/solution.yaml": RIGHT, "bob/solution.yaml": RIGHT})
    code, out, err = cli("check", lms)
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"{lms}: warning: 2 entries here are not graded: alice/ and bob/; a folder's *.yaml and *.yml files (and *.yaml.txt) are, "
        "not its other files or its subfolders (name a subfolder to grade the files in it)",
        f"error: no solution files (*.yaml, *.yml, *.yaml.txt) in {lms}"]


def test_many_entries_not_read_are_counted_past_five(tmp_path):
    from tutor.audit.batch import gather, not_read_line

    folder = _write(tmp_path / "f", {f"n{i}.txt": "" for i in range(8)})

    names = gather([str(folder)]).not_read[0][1]
    assert names == tuple(f"n{i}.txt" for i in range(8))
    assert str(not_read_line(names)).startswith("8 entries here are not graded: n0.txt, n1.txt, n2.txt, n3.txt, "
                                               "n4.txt and 3 more;")


@pytest.mark.parametrize("twice", [("a.yaml", "a.yaml"), (".", "a.yaml"), ("a.yaml", "./a.yaml")])
def test_one_file_named_twice_is_one_row(cli, tmp_path, monkeypatch, twice):
    _write(tmp_path, {"a.yaml": "student: alice\n" + RIGHT})
    monkeypatch.chdir(tmp_path)
    code, doc, _ = _doc(cli, *twice)
    assert len(doc["submissions"]) == 1 and doc["duplicates"] == []
    assert [w["message"] for w in doc["warnings"]] == ["this file is named more than once; it is graded once"]
    code, out, err = cli("check", *twice)
    assert "handed in more than one file" not in err and "1 submission: 1 correct" in out


def test_the_exercise_file_beside_the_submissions_is_not_a_row(cli, tmp_path):
    """hw3/exercise.yaml (id mine) beside jia.yaml (`exercise: exercise.yaml`): one row, exit 0, a warning."""
    text = EXERCISE.read_text(encoding="utf-8").replace("id: single-head-3x4", "id: mine")
    assert "id: mine" in text
    hw3 = _write(tmp_path / "hw3", {"exercise.yaml": text, "jia.yaml": "student: 甲\n" + RIGHT.replace(
        "single-head-3x4", "exercise.yaml")})
    code, doc, _ = _doc(cli, hw3)
    assert code == 0 and [(r["student"], r["exercise"]) for r in doc["submissions"]] == [("甲", "mine")]
    assert doc["warnings"][0]["file"] == str(hw3 / "exercise.yaml")
    assert doc["warnings"][0]["message"] == ("this is the exercise file (id mine) that submissions here name, "
                                             "not a submission: it is not graded")
    code, out, err = cli("check", hw3)
    assert code == 0 and "1 submission: 1 correct, 0 wrong, 0 unusable." in out
    # an exercise file that no submission uses is a row: a student may have handed it in instead
    (hw3 / "jia.yaml").unlink()
    _write(hw3, {"yi.yaml": "student: 乙\n" + RIGHT})
    code, doc, _ = _doc(cli, hw3)
    assert code == 2 and [r["verdict"] for r in doc["submissions"]] == ["unusable", "correct"]


def test_the_comment_names_the_file_not_the_graders_folders(cli, tmp_path):
    folder = _write(tmp_path / "home" / "teacher" / "subs", {"dave.yaml": "exercise: single-head-3x4\nq: [[1, 1]\n"})
    _, doc, _ = _doc(cli, folder)
    row = doc["submissions"][0]
    assert row["comment"].startswith("This file could not be graded: dave.yaml:3:1: not valid YAML")
    assert str(tmp_path) not in row["comment"]
    assert row["errors"][0].startswith(f"{folder / 'dave.yaml'}:3:1:")  # the grader's own view keeps the path
    table = cli("check", folder, "--format", "csv").out
    assert str(tmp_path) not in table


def test_an_unknown_field_names_the_exercises_steps_not_the_formats_41(cli, tmp_path):
    folder = _write(tmp_path / "s", {"w.yaml": "exercise: single-head-3x4\nname: 王小明\nq: [[1, 1], [2, 2], [2, 2]]\n"})
    _, doc, _ = _doc(cli, folder)
    comment = doc["submissions"][0]["comment"]
    assert comment == ("This file could not be graded: w.yaml:2:1: name: 'name' is not a step name (the steps of this "
                       "exercise are q, k, v, scores, scaled, weights, head_output, and those of its backward pass, "
                       "d_output … d_x; besides them a solution file may have exercise, title, source, heads, "
                       "student, tiled)")


def test_a_correct_row_below_full_marks_says_why(cli, tmp_path):
    """F2: "correct" beside 14.29 -- the comment says how many of the exercise's 7 steps were not handed in."""
    folder = _write(tmp_path / "s", {"one.yaml": "exercise: single-head-3x4\nq: [[1, 1], [2, 2], [2, 2]]\n"})
    _, doc, _ = _doc(cli, folder)
    row = doc["submissions"][0]
    assert (row["verdict"], row["score"]) == ("correct", round(100 / 7, 2))
    assert row["comment"] == ("Every step handed in is right (1 step of the exercise's 7); the other 6 were not "
                              "handed in, and the score counts right steps out of all 7.")
    _, doc, _ = _doc(cli, folder, "--lang", "zh")
    assert doc["submissions"][0]["comment"] == ("本练习共 7 个步骤，你交了其中 1 个步骤，没有错；另外 6 个没有交，"
                                                "分数按全部 7 个步骤中做对的个数计算。")


def test_student_of_a_notepad_file():
    from tutor.audit.batch import student_of

    assert [student_of(p) for p in ("s/bob.yaml.txt", "s/Bob.YML.TXT", "s/a.yaml", "s/.yaml")] == \
        ["bob", "Bob", "a", ".yaml"]


def test_one_student_spelt_two_ways_is_one_student_with_two_files(cli, tmp_path):
    folder = _write(tmp_path / "s", {"a.yaml": "student: Ann Lee\n" + RIGHT, "b.yaml": "student: ' ann  lee'\n" + RIGHT})
    _, doc, _ = _doc(cli, folder)
    assert doc["duplicates"] == [{"student": "Ann Lee", "files": [str(folder / "a.yaml"), str(folder / "b.yaml")]}]

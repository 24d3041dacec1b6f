"""`check` of a solution file with a ``tiled:`` part: the file's ``title:``, ``source:`` and warnings are
reported as for a file of steps, in the text report and in the JSON (issue 20, C: a tiled-only file lost them).

The row checked is single-head-3x4's query t1 in one block of 3 keys: scores [√2, 2√2, 2√2], V rows
[1, 1], [2, 2], [2, 2]; o = (e^(−√2)·1 + 1·2 + 1·2) / (e^(−√2) + 1 + 1) = 4.243117 / 2.243117 = 1.891617
in both columns (worked by hand).
"""

from __future__ import annotations

import json

import pytest

RIGHT_O = "  o: [1.891617, 1.891617]\n"
TILED = "tiled:\n  block_size: 3\n  query: t1\n"
META = "title: Worked online softmax from the lecture notes\nsource: CS 224n handout, 2024\n"


def _write(tmp_path, text: str, name: str = "tiled.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(("o", "code"), [(RIGHT_O, 0), ("  o: [1, 1]\n", 1)])
def test_a_tiled_only_file_keeps_its_title_and_source_the_issues_input(cli, tmp_path, o, code):
    path = _write(tmp_path, "exercise: single-head-3x4\n" + META + TILED + o)
    got, out, err = cli("check", path)
    assert got == code, out + err
    flat = " ".join(out.split())  # the heading wraps at the width, between words
    heading = (f"Checking {path} against exercise single-head-3x4: Three tokens, d_model = 4, one head with "
               "d_k = 2 Worked online softmax from the lecture notes Source: CS 224n handout, 2024 "
               "Online softmax of query t1, keys in blocks of 3:")
    assert flat.startswith(heading)
    assert "Source: CS 224n handout, 2024" in out.splitlines()  # a line of its own
    got, out, err = cli("check", path, "--format", "json")
    assert got == code, out + err
    doc = json.loads(out)
    assert {k: doc[k] for k in ("file", "exercise", "source", "solution_title", "warnings")} == {
        "file": path, "exercise": "single-head-3x4", "source": "CS 224n handout, 2024",
        "solution_title": "Worked online softmax from the lecture notes", "warnings": []}
    assert doc["title"] == "Three tokens, d_model = 4, one head with d_k = 2"  # the exercise's own
    assert doc["verdict"] == ("correct" if code == 0 else "wrong") and doc["tiled"]["verdict"] == doc["verdict"]


def test_without_title_and_source_they_are_null_and_not_printed(cli, tmp_path):
    path = _write(tmp_path, "exercise: single-head-3x4\n" + TILED + RIGHT_O)
    code, out, err = cli("check", path, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and (doc["source"], doc["solution_title"]) == (None, None)
    code, out, err = cli("check", path)
    assert code == 0 and "Source:" not in out
    assert " ".join(out.split()).startswith(f"Checking {path} against exercise single-head-3x4: Three tokens, "
                                            "d_model = 4, one head with d_k = 2 Online softmax of query t1")
    lines = out.splitlines()
    assert lines[lines.index("Online softmax of query t1, keys in blocks of 3:") - 1] == ""  # under a blank line


def test_the_file_fields_are_those_of_a_file_of_steps(cli, tmp_path):
    """The same fields, under the same names, whether the file gives steps, a tiled: part, or both."""
    steps = _write(tmp_path, "exercise: single-head-3x4\n" + META + "q: [[1, 1], [2, 2], [2, 2]]\n", "steps.yaml")
    tiled = _write(tmp_path, "exercise: single-head-3x4\n" + META + TILED + RIGHT_O)
    both = _write(tmp_path, "exercise: single-head-3x4\n" + META + "q: [[1, 1], [2, 2], [2, 2]]\n" + TILED + RIGHT_O,
                  "both.yaml")
    docs = [json.loads(cli("check", p, "--format", "json").out) for p in (steps, tiled, both)]
    fields = ("exercise", "title", "source", "solution_title", "warnings")
    assert [{k: d[k] for k in fields} for d in docs[1:]] == [{k: docs[0][k] for k in fields}] * 2


def test_a_file_with_steps_and_tiled_shows_its_title_once(cli, tmp_path):
    path = _write(tmp_path, "exercise: single-head-3x4\n" + META + "q: [[1, 1], [2, 2], [2, 2]]\n" + TILED + RIGHT_O)
    code, out, err = cli("check", path)
    assert code == 0, out + err
    assert out.count("Worked online softmax from the lecture notes") == 1 and out.count("Source:") == 1


def test_a_tiled_files_warnings_are_reported(cli, tmp_path):
    """A plain 010 in the tiled part: read as 10, with the warning on stderr and in the JSON (it was dropped)."""
    path = _write(tmp_path, "exercise: single-head-3x4\n" + TILED + "  o: [010, 1.891617]\n")
    code, out, err = cli("check", path)
    assert code == 1 and f"{path}:5:7: warning: tiled.o[0]: 010 has a leading zero" in err
    code, out, err = cli("check", path, "--format", "json")
    assert code == 1 and [(w["line"], w["column"], w["field"]) for w in json.loads(out)["warnings"]] == [
        (5, 7, "tiled.o[0]")]


def test_a_title_with_control_characters_is_shown_escaped(cli, tmp_path):
    """A title is text from the file: an escape sequence in it never reaches the terminal raw."""
    path = _write(tmp_path, 'exercise: single-head-3x4\ntitle: "clear\\e[2Jscreen"\n' + TILED + RIGHT_O)
    code, out, err = cli("check", path)
    assert code == 0 and "\x1b" not in out and "clear" in out and "screen" in out

"""Class trial F3 and F15 (batch `check --exercises HANDOUTS`): a roster variant counts only for its own student.

The ways through that the trial found, each now flagged wrong with a comment that says why: the exercise
itself (whose numbers are not the student's) handed in by a student who has a variant of it; a variant
handed in under a student id the roster does not have; a variant handed in under another spelling of a
roster id (compared as the roster compares ids: one slug is one student).  A student's name from the
roster's name column counts as that student.  An index that cannot be read (re-saved in GBK, its columns
renamed) is a warning naming it and why, in every format, never silent.  The right values are computed
here, by hand in integers, from the exercise files.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import yaml

LIKE = "single-head-3x4"
ROSTER = "student,name\n2024001,王小明\n2024002,李雷\nA B,空格\n"
BUNDLED = Path(__file__).resolve().parents[1] / "exercises" / f"{LIKE}.yaml"


@pytest.fixture
def variables(variables):
    return {**variables, "COLUMNS": "200"}


@pytest.fixture
def handouts(cli, tmp_path) -> Path:
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER, encoding="utf-8")
    out = tmp_path / "h"
    assert cli("handouts", "--like", LIKE, "--students", roster, "-o", out).code == 0
    return out


def _q(exercise_file: Path) -> list[list[int]]:
    """Q = X W_q of a one-head exercise file, by hand in integers."""
    raw = yaml.safe_load(exercise_file.read_text(encoding="utf-8"))
    x, w = raw["x"], raw["heads"][0]["w_q"]
    return [[sum(x[i][k] * w[k][j] for k in range(len(w))) for j in range(len(w[0]))] for i in range(len(x))]


def _sub(folder: Path, name: str, student: str, exercise: str, q: list[list[int]]) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(f"student: {json.dumps(student, ensure_ascii=False)}\nexercise: {exercise}\nq: {q}\n", encoding="utf-8")
    return path


def _rows(cli, *args) -> list[dict]:
    code, out, err = cli("check", *args, "--format", "json")
    return json.loads(out)["submissions"]


def test_the_ways_through_are_flagged_wrong_and_say_why(cli, tmp_path, handouts):
    subs = tmp_path / "subs"
    own1 = _q(handouts / f"{LIKE}-2024001.yaml")
    own2 = _q(handouts / f"{LIKE}-2024002.yaml")
    base = _q(BUNDLED)
    assert own1 != base and own2 != base
    _sub(subs, "s1.yaml", "2024001", f"{LIKE}-2024001", own1)  # honest
    _sub(subs, "s2.yaml", "2024002", LIKE, base)  # the exercise itself, its worked solution printed by explain
    _sub(subs, "s3.yaml", "2024999", f"{LIKE}-2024001", own1)  # a copy under an id not on the roster
    _sub(subs, "s4.yaml", "a b", f"{LIKE}-2024002", own2)  # "A B" as the roster compares ids: another's variant
    _sub(subs, "s5.yaml", "李雷", f"{LIKE}-2024002", own2)  # 2024002's name: his own variant
    _sub(subs, "s6.yaml", " a  b ", f"{LIKE}-a-b", _q(handouts / f"{LIKE}-a-b.yaml"))  # A B's own, other spacing
    _sub(subs, "s7.yaml", "nobody", LIKE, base)  # the exercise itself, by a student not on the roster
    rows = _rows(cli, subs, "--exercises", handouts)
    verdicts = [(r["student"], r["verdict"], r["roster"] and r["roster"]["kind"]) for r in rows]
    assert verdicts == [("2024001", "correct", None), ("2024002", "wrong", "base_exercise"),
                        ("2024999", "wrong", "not_on_roster"), ("a b", "wrong", "other_variant"),
                        ("李雷", "correct", None), ("a  b", "correct", None), ("nobody", "wrong", "not_on_roster")]
    s2, s3, s4, s7 = rows[1], rows[2], rows[3], rows[6]
    assert s2["comment"] == (f"This is exercise {LIKE} itself, not your variant of it ({LIKE}-2024002): your numbers "
                             "are your variant's. No step counts.")
    assert (s2["score"], s2["steps"], s2["variant_of"]) == (0, [], None)
    assert s2["roster"] == {"kind": "base_exercise", "owner": None, "own": f"{LIKE}-2024002", "like": LIKE}
    assert s3["comment"] == (f"This is 2024001's variant ({LIKE}-2024001), and the roster has no student '2024999': "
                             "a variant counts only for its own student. No step counts; write your student id as "
                             "the roster has it.")
    assert s3["variant_of"] == {"student": "2024001", "own": None}
    assert s4["variant_of"] == {"student": "2024002", "own": f"{LIKE}-a-b"}
    assert s7["roster"] == {"kind": "not_on_roster", "owner": None, "own": None, "like": LIKE}
    # without the roster folder, the same numbers are right numbers: only the index makes them wrong
    assert [r["verdict"] for r in _rows(cli, subs / "s2.yaml", subs / "s7.yaml")] == ["correct", "correct"]
    # the CSV and the report name whose variant a copy is
    table = list(csv.DictReader(io.StringIO(cli("check", subs, "--exercises", handouts, "--format", "csv").out)))
    assert [(r["verdict"], r["variant_of"]) for r in table][1:4] == [("wrong", ""), ("wrong", "2024001"),
                                                                      ("wrong", "2024002")]


def test_check_file_says_it_in_english_and_chinese(cli, tmp_path, handouts):
    sub = _sub(tmp_path / "subs", "s2.yaml", "2024002", LIKE, _q(BUNDLED))
    code, out, _ = cli("check", sub, "--exercises", handouts)
    assert code == 1
    assert (f"✗ wrong: the steps above are checked against exercise {LIKE} itself, not against your variant of it "
            f"({LIKE}-2024002), so this file is graded wrong.") in " ".join(out.split())
    code, out, _ = cli("--lang", "zh", "check", sub, "--exercises", handouts)
    assert code == 1
    assert (f"✗ 错误：上面的步骤是对照练习 {LIKE} 本身检查的，不是对照你的版本（{LIKE}-2024002），因此这个文件判为错误。"
            in "".join(out.split("\n")))
    doc = json.loads(cli("check", sub, "--exercises", handouts, "--format", "json").out)
    assert (doc["verdict"], doc["exit_code"], doc["roster"]["kind"]) == ("wrong", 1, "base_exercise")
    other = _sub(tmp_path / "subs", "s3.yaml", "2024999", f"{LIKE}-2024001", _q(handouts / f"{LIKE}-2024001.yaml"))
    doc = json.loads(cli("check", other, "--exercises", handouts, "--format", "json").out)
    assert (doc["verdict"], doc["variant_of"]["student"], doc["variant_of"]["own"]) == ("wrong", "2024001", None)


def _resave_gbk(index: Path) -> None:
    index.write_bytes(index.read_text(encoding="utf-8").encode("gbk"))


@pytest.mark.parametrize("spoil, said", [
    (_resave_gbk, ":2:9: warning: the file is not UTF-8 text"),  # 王小明 is the first byte GBK changes
    (lambda p: p.write_text(p.read_text(encoding="utf-8").replace("student,", "学号,", 1), encoding="utf-8"),
     ":1: warning: the header row has no student column"),
    (lambda p: p.write_text('student,exercise\n"2024001,x\n', encoding="utf-8"), ":2: warning: this row is not valid CSV"),
])
def test_an_index_that_cannot_be_read_is_a_warning_in_every_format(cli, tmp_path, handouts, spoil, said):
    index = handouts / f"roster-{LIKE}.csv"
    spoil(index)
    sub = _sub(tmp_path / "subs", "s.yaml", "2024002", f"{LIKE}-2024001", _q(handouts / f"{LIKE}-2024001.yaml"))
    for fmt in ("rich", "csv"):
        code, out, err = cli("check", sub, sub.parent / "none.yaml", "--exercises", handouts, "--format", fmt)
        line = next(x for x in err.splitlines() if x.startswith(str(index)))
        assert line.startswith(str(index) + said), line
        assert "this roster index is not read, so a variant handed in by another student" in line
    doc = json.loads(cli("check", sub, sub.parent / "none.yaml", "--exercises", handouts, "--format", "json").out)
    assert [w["file"] for w in doc["warnings"]] == [str(index)]
    single = json.loads(cli("check", sub, "--exercises", handouts, "--format", "json").out)
    assert any(w["file"] == str(index) and "not read" in w["message"] for w in single["warnings"])
    _, _, err = cli("--lang", "zh", "check", sub, "--exercises", handouts)
    assert "这个名单索引没有读取，因此查不出别的学生或名单之外的人交上来的版本" in err


def test_a_tiled_part_of_the_exercise_itself_is_wrong_for_a_student_with_a_variant(cli, tmp_path, handouts):
    """check FILE of a ``tiled:`` part follows the same rule.  The part is single-head-3x4's query t1 in one block
    of 3 keys, right (o = (e^(−√2)·1 + 2 + 2) / (e^(−√2) + 2) = 1.891617, as tests/test_check_tiled_file.py works
    it by hand)."""
    sub = tmp_path / "t.yaml"
    sub.write_text(f"student: '2024001'\nexercise: {LIKE}\ntiled:\n  block_size: 3\n  query: t1\n"
                   "  o: [1.891617, 1.891617]\n", encoding="utf-8")
    assert cli("check", sub).code == 0  # right numbers, without the roster
    code, out, _ = cli("check", sub, "--exercises", handouts)
    assert code == 1 and f"checked against exercise {LIKE} itself, not against your variant" in " ".join(out.split())
    doc = json.loads(cli("check", sub, "--exercises", handouts, "--format", "json").out)
    assert (doc["verdict"], doc["roster"]["kind"], doc["tiled"]["verdict"]) == ("wrong", "base_exercise", "correct")
    rows = _rows(cli, sub, sub, "--exercises", handouts)
    assert [(r["verdict"], r["roster"]["kind"]) for r in rows] == [("wrong", "base_exercise")]

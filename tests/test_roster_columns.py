"""Class trial of issue 24, finding F10 (fix-report): the rosters a Chinese 教务系统 and Canvas export are read.

学号 / Student ID / SIS User ID are id columns, 姓名 a column of names, ``--name-column`` chooses another; a
roster with no id column the tool knows gets the ``--column`` that would work, with the header it saw."""

from __future__ import annotations

import csv

import pytest

from tutor.authoring.variants import RosterError, parse_roster


@pytest.mark.parametrize("text, column, students", [
    ("学号,姓名\n2024001,王小明\n2024002,李雷\n", "学号", [("2024001", "王小明"), ("2024002", "李雷")]),
    ("Student ID,Name\nA1,Ann Lee\n", "Student ID", [("A1", "Ann Lee")]),
    ("Name,SIS User ID\nBo,S-7\n", "SIS User ID", [("S-7", "Bo")]),
    ("姓名;学号\n张伟;7\n", "学号", [("7", "张伟")]),
    # the first rosters choose as they did (a seed follows the id: an old roster keeps its variants)
    ("student,student_id,name\nann,1,Ann\n", "student", [("ann", "Ann")]),
    ("email,学号,student_name\na@x.example,9,A\n", "email", [("a@x.example", "A")]),
])
def test_the_id_and_name_columns_of_other_systems_are_found(text, column, students):
    roster = parse_roster(text, "r.csv")
    assert roster.column == column and [(s.id, s.name) for s in roster.students] == students


def test_the_name_column_can_be_named():
    text = "学号,Full Name,姓名\n1,Wang Fang,王芳\n"
    assert [s.name for s in parse_roster(text, "r.csv").students] == ["王芳"]
    assert [s.name for s in parse_roster(text, "r.csv", name_column="full name").students] == ["Wang Fang"]
    with pytest.raises(RosterError) as caught:
        parse_roster(text, "r.csv", name_column="nickname")
    assert str(caught.value) == "r.csv:1: no column 'nickname' in the header row (found 学号, Full Name, 姓名)"


@pytest.mark.parametrize("header, suggest", [("工号,姓名", "工号"), ("姓名,账号", "账号"), ("Student Number,Name", "'Student Number'")])
def test_an_unknown_id_column_gets_the_column_option_that_would_work(cli, tmp_path, header, suggest):
    roster = tmp_path / "r.csv"
    roster.write_text(f"{header}\n1,2\n", encoding="utf-8")
    code, out, err = cli("--lang", "zh", "handouts", "--like", "single-head-3x4", "--students", roster, "-o", tmp_path / "h")
    assert code == 2 and err.rstrip().endswith(f"或用 --column 指定，例如 --column {suggest}")
    code, out, err = cli("handouts", "--like", "single-head-3x4", "--students", roster, "-o", tmp_path / "h")
    assert code == 2 and err.rstrip().endswith(f"or choose it with --column, such as --column {suggest}")
    column = suggest.strip("'")
    assert cli("handouts", "--like", "single-head-3x4", "--students", roster, "-o", tmp_path / "h",
               "--column", column).code == 0


def test_a_chinese_roster_gives_titles_with_the_names(cli, tmp_path):
    """The trial's roster-zh.csv: refused before; now each variant's title and the index name the student."""
    roster = tmp_path / "roster-zh.csv"
    roster.write_text("学号,姓名\n2024001,王小明\n2024002,李雷\n", encoding="utf-8")
    out = tmp_path / "h"
    assert cli("--lang", "zh", "handouts", "--like", "single-head-3x4", "--students", roster, "-o", out).code == 0
    with (out / "roster-single-head-3x4.csv").open(encoding="utf-8", newline="") as f:
        index = list(csv.DictReader(f))
    assert [(r["student"], r["name"]) for r in index] == [("2024001", "王小明"), ("2024002", "李雷")]
    assert "— variant for 王小明" in (out / "single-head-3x4-2024001.yaml").read_text(encoding="utf-8")
    named = tmp_path / "named.csv"
    named.write_text("学号,昵称,姓名\n2024001,小明,王小明\n", encoding="utf-8")
    assert cli("handouts", "--like", "single-head-3x4", "--students", named, "-o", tmp_path / "h2",
               "--name-column", "昵称").code == 0
    assert "— variant for 小明" in (tmp_path / "h2" / "single-head-3x4-2024001.yaml").read_text(encoding="utf-8")


def test_a_roster_excel_saved_as_gbk_says_how_to_save_it_as_utf8(cli, tmp_path):
    """Same kind as F11: the roster a Chinese instructor opened and saved in Excel is GBK (学 is D1 A7, valid
    UTF-8 by chance; 号 begins with BA); the line names the
    byte and the two ways out, and the iconv line does make a roster that is read."""
    roster = tmp_path / "r.csv"
    roster.write_bytes("学号,姓名\n2024001,王小明\n".encode("gbk"))
    code, out, err = cli("handouts", "--like", "single-head-3x4", "--students", roster, "-o", tmp_path / "h")
    assert code == 2 and err == (f"error: {roster}:1:2: the file is not UTF-8 text: byte 0xBA here cannot be decoded (save it as "
                                 "UTF-8: Excel's plain CSV on Chinese Windows is GBK, so choose \"CSV UTF-8 (Comma delimited)\" "
                                 "in Save As, or convert it: iconv -f GB18030 -t UTF-8 OLD.csv > NEW.csv)\n")
    zh = cli("--lang", "zh", "handouts", "--like", "single-head-3x4", "--students", roster, "-o", tmp_path / "h")
    assert "另存为时请选“CSV UTF-8（逗号分隔）”" in zh.err and not (tmp_path / "h").exists()
    roster.write_text(roster.read_bytes().decode("gb18030"), encoding="utf-8")
    assert cli("handouts", "--like", "single-head-3x4", "--students", roster, "-o", tmp_path / "h").code == 0

"""`attn-tutor handouts --like ID --students ROSTER.csv -o DIR` (issue 24, item 3): a variant per student.

End to end through the CLI: the files, the index, the seed (computed here from its documented formula,
by hashlib), the same roster giving the same bytes, different students different numbers, one variant
written again by ``new --like --seed`` byte for byte, the worksheet equal to ``explain --blank --export``'s,
a copied solution graded wrong against the copier's own variant (its right values computed here, by hand
in integers), and every bad roster refused in one line per row with nothing written.
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import os
from pathlib import Path

import pytest
import yaml

from tutor.authoring.variants import MAX_STUDENTS, parse_roster, seed_of, slug, variant_id
from tutor.base.errors import TutorError

LIKE = "single-head-3x4"
#: Three students, one with a Chinese name, one whose name has quotes; UTF-8 with a BOM, semicolons.
ROSTER = "\ufeffSIS_ID;Name;Section\nana.lopez@uni.example;Ana López;A\n20240002;张伟;A\n o-brien ;\"Bob \"\"the\"\" O'Brien\";B\n\n"


def _roster(tmp_path: Path, text: str = ROSTER, name: str = "roster.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def _index(folder: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((folder / f"roster-{LIKE}.csv").read_text(encoding="utf-8"))))


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _matmul(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:
    return [[sum(x * y for x, y in zip(row, col)) for col in zip(*b)] for row in a]


def _right_steps(exercise_file: Path) -> dict[str, list[list[int]]]:
    """Q, K, V and the scores of a one-head exercise, by hand in integers from the file itself."""
    raw = yaml.safe_load(exercise_file.read_text(encoding="utf-8"))
    x, head = raw["x"], raw["heads"][0]
    q, k, v = _matmul(x, head["w_q"]), _matmul(x, head["w_k"]), _matmul(x, head["w_v"])
    return {"q": q, "k": k, "v": v, "scores": _matmul(q, [list(c) for c in zip(*k)])}


@pytest.fixture
def written(cli, tmp_path) -> Path:
    out = tmp_path / "class"
    code, stdout, err = cli("handouts", "--like", LIKE, "--students", _roster(tmp_path), "-o", out)
    assert (code, stdout) == (0, ""), err
    assert err.splitlines() == [
        f"wrote 3 variants of {LIKE} into {out}, each an exercise and its worksheet, and their list with each seed: "
        f"{out / f'roster-{LIKE}.csv'}",
        f"grade a submission against its own variant with `attn-tutor check FILE --exercises {out}`",
    ]
    return out


# --- end to end -------------------------------------------------------------------------------------


def test_every_student_gets_an_exercise_a_worksheet_and_a_row_of_the_index(written):
    ids = [f"{LIKE}-ana-lopez-uni-example", f"{LIKE}-20240002", f"{LIKE}-o-brien"]
    assert sorted(_files(written)) == sorted([f"roster-{LIKE}.csv", *(f"{i}.yaml" for i in ids), *(f"{i}.md" for i in ids)])
    rows = _index(written)
    assert [(r["student"], r["name"], r["exercise"]) for r in rows] == [
        ("ana.lopez@uni.example", "Ana López", ids[0]), ("20240002", "张伟", ids[1]), ("o-brien", "Bob \"the\" O'Brien", ids[2])]
    for row in rows:
        expected = int.from_bytes(hashlib.sha256(f"{LIKE}\0{row['student']}".encode()).digest()[:4], "big")
        assert int(row["seed"]) == expected
        assert (row["exercise_file"], row["worksheet_file"]) == (f"{row['exercise']}.yaml", f"{row['exercise']}.md")
        raw = yaml.safe_load((written / row["exercise_file"]).read_text(encoding="utf-8"))
        assert raw["id"] == row["exercise"]
        assert raw["title"] == f"Three tokens, d_model = 4, one head with d_k = 2 — variant for {row['name']}"
        seed_said = f"(seed {row['seed']})"
        assert seed_said in raw["description"]  # the seed on the exercise ...
        assert seed_said in (written / row["worksheet_file"]).read_text(encoding="utf-8")  # ... and on the worksheet
        assert (written / row["exercise_file"]).read_text(encoding="utf-8").startswith(f"# Written by `{row['command']}`")


def test_the_variants_are_valid_exercises_of_the_same_shape(written, cli):
    code, out, err = cli("validate", written, "--no-notes")
    assert code == 0, out + err
    base = yaml.safe_load((Path(__file__).parents[1] / "exercises" / f"{LIKE}.yaml").read_text(encoding="utf-8"))
    for path in written.glob("*.yaml"):
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert [len(raw["x"]), len(raw["x"][0])] == [len(base["x"]), len(base["x"][0])]
        assert [[len(raw["heads"][0][w]), len(raw["heads"][0][w][0])] for w in ("w_q", "w_k", "w_v")] == [[4, 2]] * 3


def test_different_students_get_different_numbers(written):
    numbers = [_right_steps(p) for p in sorted(written.glob("*.yaml"))]
    assert len({repr(n) for n in numbers}) == 3


def test_the_same_roster_writes_the_same_bytes(cli, tmp_path, written):
    again = tmp_path / "again"
    assert cli("handouts", "--like", LIKE, "--students", _roster(tmp_path, name="copy.csv"), "-o", again).code == 0
    assert _files(again) == _files(written)


def test_new_like_with_the_seed_writes_a_variant_again_byte_for_byte(cli, tmp_path, written):
    row = _index(written)[2]  # the quoted name: the command's --title is shell-quoted
    import shlex

    argv = shlex.split(row["command"])
    assert argv[:3] == ["attn-tutor", "new", "--like"] and argv[argv.index("--seed") + 1] == row["seed"]
    code, out, err = cli(*argv[1:])
    assert (code, err) == (0, "")
    assert out == (written / row["exercise_file"]).read_text(encoding="utf-8")


def _hand_in(exercise: str, student: str) -> str:
    """The worksheet's line for a student, with the YAML forms a solution file would hold (quoted when plain
    YAML would read another value)."""
    return (f"Worksheet: fill in every empty matrix. Hand it in as a solution file with the lines `exercise: {exercise}`"
            f" and `student: {student}` (the solution format that `attn-tutor check` grades).")


def test_the_worksheet_is_what_explain_blank_export_writes_but_says_how_to_hand_in(cli, tmp_path, written):
    """The student's worksheet has no answer key line (``explain ... --format markdown`` would give the
    answers away): it says how to hand in, the rest is ``explain --blank --export``'s, byte for byte."""
    students = {"ana.lopez@uni.example": '"ana.lopez@uni.example"', "20240002": '"20240002"', "o-brien": "o-brien"}
    for row in _index(written):
        page = tmp_path / "page.md"
        assert cli("explain", row["exercise"], "--exercises", written, "--blank", "--export", page, "--force").code == 0
        mine, theirs = (written / row["worksheet_file"]).read_text(encoding="utf-8"), page.read_text(encoding="utf-8")
        key = f"Worksheet: fill in every empty matrix. The answer key: `attn-tutor explain {row['exercise']} --format markdown`."
        assert key in theirs and "answer key" not in mine and "--format markdown" not in mine
        line = _hand_in(row["exercise"], students[row["student"]])
        assert line in mine and mine == theirs.replace(key, line)
        # the student's fields, as written there, read back as the roster's id and the variant's id
        fields = yaml.safe_load(line.split("`")[1] + "\n" + line.split("`")[3])
        assert fields == {"exercise": row["exercise"], "student": row["student"]}


def test_an_html_worksheet_on_request(cli, tmp_path):
    out = tmp_path / "html"
    assert cli("handouts", "--like", LIKE, "--students", _roster(tmp_path), "-o", out, "--worksheet", "html").code == 0
    row = _index(out)[0]
    assert row["worksheet_file"] == f"{row['exercise']}.html"
    page = tmp_path / "page.html"
    assert cli("explain", row["exercise"], "--exercises", out, "--blank", "--export", page).code == 0
    mine, theirs = (out / row["worksheet_file"]).read_text(encoding="utf-8"), page.read_text(encoding="utf-8")
    assert "answer key" in theirs and "answer key" not in mine
    assert (f"Hand it in as a solution file with the lines <code>exercise: {row['exercise']}</code> and"
            " <code>student: &quot;ana.lopez@uni.example&quot;</code>") in mine


#: Student ids that are Markdown (a backtick, runs of them at either end, a table bar, emphasis, a link, raw HTML)
#: and the names their titles carry.
MARKUP_IDS = ["a`b", "``e", "f`", "c|d", "*g*_h_", "[x](y)", "<i>k</i>", "m & n"]


def test_a_student_id_that_is_markdown_stays_text_on_the_worksheet(cli, tmp_path):
    """The hand-in line's code span holds the id whole (CommonMark, read by markdown-it, an independent
    parser: its code span's text is the YAML line, which reads back as the roster's id), and the title (a
    name with backticks) is text, not a code span; the HTML page's ``<code>`` holds the same line."""
    from markdown_it import MarkdownIt

    rows = "".join(f'"{s.replace(chr(34), 2 * chr(34))}",`{i}` x\n' for i, s in enumerate(MARKUP_IDS))
    roster = _roster(tmp_path, "student,name\n" + rows)
    md, page = tmp_path / "md", tmp_path / "html"
    assert cli("handouts", "--like", LIKE, "--students", roster, "-o", md).code == 0
    assert cli("handouts", "--like", LIKE, "--students", roster, "-o", page, "--worksheet", "html").code == 0
    for i, row in enumerate(_index(md)):
        assert row["student"] == MARKUP_IDS[i]
        tokens = MarkdownIt("commonmark").parse((md / row["worksheet_file"]).read_text(encoding="utf-8"))
        title, hand_in = tokens[1].children, tokens[7].children
        assert [c.type for c in title] == ["text"] and title[0].content.endswith(f"— variant for `{i}` x")
        spans = [c.content for c in hand_in if c.type == "code_inline"]
        assert spans[0] == f"exercise: {row['exercise']}" and spans[2] == "attn-tutor check"
        assert yaml.safe_load(spans[1]) == {"student": MARKUP_IDS[i]}
        html_page = (page / f"{row['exercise']}.html").read_text(encoding="utf-8")
        assert f"<code>{html.escape(spans[1])}</code> (the solution format" in html_page


def test_a_path_with_backticks_is_text_on_the_html_page(cli, tmp_path):
    """``Exercise ID (SOURCE)``: a file's path is a field, so its backticks open no ``<code>``."""
    folder = tmp_path / "a`b`c"
    folder.mkdir()
    (folder / "ex.yaml").write_bytes((Path(__file__).parent.parent / "exercises" / f"{LIKE}.yaml").read_bytes())
    code, out, err = cli("explain", folder / "ex.yaml", "--format", "html")
    assert code == 0, err
    assert f"<p>Exercise {LIKE} ({html.escape(str(folder / 'ex.yaml'))})</p>" in out


# --- check finds the variant: copied numbers are wrong numbers -----------------------------------


def _solution(path: Path, exercise: str, steps: dict[str, list[list[int]]]) -> Path:
    path.write_text(f"exercise: {exercise}\n" + "".join(f"{k}: {v}\n" for k, v in steps.items()), encoding="utf-8")
    return path


def test_a_copied_solution_is_graded_against_the_copiers_own_variant(cli, tmp_path, written):
    ana, zhang = _index(written)[:2]
    own = _right_steps(written / ana["exercise_file"])
    assert own != _right_steps(written / zhang["exercise_file"])
    honest = _solution(tmp_path / "ana.yaml", ana["exercise"], own)
    copied = _solution(tmp_path / "zhang.yaml", zhang["exercise"], own)  # Ana's numbers under Zhang's exercise
    # the file's name, "ana", is not on the roster: a variant counts only for its own student
    code, out, err = cli("check", honest, "--exercises", written)
    assert code == 1 and "the roster has no student 'ana'" in " ".join(out.split()), out + err
    honest.write_text(f"student: {ana['student']}\n" + honest.read_text(encoding="utf-8"), encoding="utf-8")
    code, out, err = cli("check", honest, "--exercises", written)
    assert code == 0, out + err
    code, out, err = cli("check", copied, "--exercises", written)
    assert code == 1, out + err
    assert f"against exercise {zhang['exercise']}" in " ".join(out.split())


# --- in Chinese -----------------------------------------------------------------------------------


def test_in_chinese_the_title_and_the_regenerating_command_say_so(cli, tmp_path):
    """``title:`` is the English original (the file says so above its translations), the Chinese title is the
    translation's; the file's own command is the index's, ``--lang zh`` included, and writes it again."""
    out = tmp_path / "zh"
    code, _, err = cli("handouts", "--like", LIKE, "--students", _roster(tmp_path), "-o", out, "--lang", "zh")
    assert code == 0 and err.startswith(f"已将 {LIKE} 的 3 个版本写入 {out}")
    row = _index(out)[1]
    assert row["command"].endswith(" --lang zh") and " --student '张伟' " in row["command"]
    text = (out / row["exercise_file"]).read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    assert raw["title"] == "Three tokens, d_model = 4, one head with d_k = 2 — variant for 张伟"
    assert raw["translations"]["zh"]["title"] == "3 个词元，d_model = 4，单个头（d_k = 2）——学生：张伟"
    assert text.startswith(f"# 由 `{row['command']}` 生成")
    import shlex

    code, again, _ = cli(*shlex.split(row["command"])[1:])
    assert code == 0 and again == text
    code, shown, _ = cli("explain", row["exercise"], "--exercises", out, "--lang", "en")
    assert code == 0 and "— variant for 张伟" in shown and "学生" not in shown
    worksheet = (out / row["worksheet_file"]).read_text(encoding="utf-8")
    assert "请提交一份解答文件，其中写有 `exercise: single-head-3x4-20240002` 和 `student: \"20240002\"` 两行" in worksheet
    assert "答案见" not in worksheet


def test_new_student_needs_like_and_no_title(cli):
    for argv in (("new", "--student", "Ann"), ("new", "--like", LIKE, "--student", "Ann", "--title", "T")):
        code, out, err = cli(*argv)
        assert code == 2 and out == "" and "--student goes with --like and without --title" in err, err


def test_a_chinese_only_id_gets_a_short_hash_as_its_slug(cli, tmp_path):
    out = tmp_path / "out"
    assert cli("handouts", "--like", LIKE, "--students", _roster(tmp_path, "student\n张伟\n王芳\n"), "-o", out).code == 0
    ids = [r["exercise"] for r in _index(out)]
    assert ids == [f"{LIKE}-s-" + hashlib.sha256(s.encode()).hexdigest()[:8] for s in ("张伟", "王芳")]
    assert all((out / f"{i}.yaml").is_file() for i in ids)


# --- the roster's rules -------------------------------------------------------------------------------


def test_seed_and_slug_by_their_definitions():
    assert seed_of("a", "b") == int.from_bytes(hashlib.sha256(b"a\x00b").digest()[:4], "big")
    assert slug("  ../..//Ünïcode \"quoted\" name\t") == "unicode-quoted-name"
    assert slug("张伟") == "" and slug("张伟 7") == "7"
    assert len(slug("x" * 100)) == 32
    long_id = "a" * 60
    assert variant_id(long_id, "bob") == "a" * 60 + "-bob" and len(variant_id(long_id, "b" * 32)) == 64


@pytest.mark.parametrize(("text", "column"), [
    ("student,name\nann,Ann\n", "student"),
    ("ID;Email\n7;x@y\n", "ID"),
    ("Login,SIS ID\nann,1\n", "SIS ID"),  # sis_id comes before login; a space is an underscore
    ("\ufeffEMAIL\nann@x\n", "EMAIL"),
])
def test_the_id_column_is_the_first_known_header_in_any_case(text, column):
    assert parse_roster(text.removeprefix("\ufeff"), "r.csv").column == column


def test_column_chooses_the_id_column(cli, tmp_path):
    roster = _roster(tmp_path, "student,login\nAna Lopez,alopez\nBo Li,bli\n")
    out = tmp_path / "out"
    assert cli("handouts", "--like", LIKE, "--students", roster, "-o", out, "--column", "LOGIN").code == 0
    assert [r["exercise"] for r in _index(out)] == [f"{LIKE}-alopez", f"{LIKE}-bli"]


BAD_ROSTERS = [
    ("student,name\nann,Ann\n,Nobody\n", "roster.csv:3: the student id (student) is empty"),
    ("student\nann\nbob\nann\n", "roster.csv:4: student 'ann' is already on the row of line 2; each student once"),
    ("student\nAnn.Lee\nann-lee\n", "roster.csv:3: students 'ann-lee' and 'Ann.Lee' (line 2) would both be named"
                                    " 'ann-lee' in the variant's id and file; change one of the ids"),
    ("student,name\nann,\"A\x1b[2Jnn\"\n", "roster.csv:2: the name cell holds U+001B (a control character),"
                                          " a character a terminal acts on or hides; remove it"),
    ("student\nan\x00n\n", "roster.csv:2: this line holds U+0000 (a control character), a character a terminal acts"
                         " on or hides; remove it"),
    ("name,section\nAnn,A\n", "roster.csv:1: no student id column in the header row (found name, section); name one"
                              " student, id, email, sis_id, login, student_id, sis_user_id, 学号, in any case, or choose it with"
                              " --column, such as --column section"),  # name is the names' column
    ("", "roster.csv:1: the roster is empty: it needs a header row naming a student id column"
         " (student, id, email, sis_id, login, student_id, sis_user_id, 学号)"),
    ("student\n\n", "roster.csv: the roster has a header row but no student: every student cell below it is empty"),
    ("student\n\"ann\n", "roster.csv:2: this row is not valid CSV: a quote is not closed, or text follows a closing quote"),
    ("student\n" + "x" * 201 + "\n", "roster.csv:2: the student cell is longer than 200 characters"),
]


@pytest.mark.parametrize(("text", "message"), BAD_ROSTERS, ids=range(len(BAD_ROSTERS)))
def test_a_bad_roster_is_one_line_per_bad_row_and_nothing_is_written(cli, tmp_path, text, message):
    out = tmp_path / "out"
    code, stdout, err = cli("handouts", "--like", LIKE, "--students", _roster(tmp_path, text).name, "-o", out,
                            cwd=tmp_path)
    assert (code, stdout) == (2, "")
    assert err.splitlines() == [f"error: {message}"]
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["roster.csv"]  # no temporary folder left


def test_every_bad_row_is_named(cli, tmp_path):
    code, _, err = cli("handouts", "--like", LIKE, "--students", _roster(tmp_path, "student\nann\n\nann\n,x\n").name,
                       "-o", tmp_path / "out", cwd=tmp_path)
    assert code == 2 and [line.split(": ")[1] for line in err.splitlines()] == ["roster.csv:4", "roster.csv:5"]


def test_a_roster_that_is_not_utf8(cli, tmp_path):
    path = tmp_path / "roster.csv"
    path.write_bytes("student,name\nann,Zoë\n".encode("latin-1"))
    code, _, err = cli("handouts", "--like", LIKE, "--students", path, "-o", tmp_path / "out")
    assert code == 2 and err.startswith("error: ") and "0xEB" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_names_with_slashes_dots_and_quotes_stay_in_the_folder(cli, tmp_path):
    roster = _roster(tmp_path, 'student,name\n../../etc/passwd,"../x"\n"a/b\\\\c",\'q\'\n')
    out = tmp_path / "out"
    assert cli("handouts", "--like", LIKE, "--students", roster, "-o", out).code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "roster.csv"]
    assert [r["exercise"] for r in _index(out)] == [f"{LIKE}-etc-passwd", f"{LIKE}-a-b-c"]


def test_a_formula_in_a_name_is_not_a_formula_in_the_index(cli, tmp_path):
    out = tmp_path / "out"
    assert cli("handouts", "--like", LIKE, "--students", _roster(tmp_path, "student,name\nann,=HYPERLINK(1)\n"),
               "-o", out).code == 0
    assert _index(out)[0]["name"] == "'=HYPERLINK(1)"


# --- files: never overwritten without --force, never half-written -------------------------------------


def test_an_existing_file_is_refused_without_force(cli, tmp_path, written):
    before = _files(written)
    code, _, err = cli("handouts", "--like", LIKE, "--students", _roster(tmp_path), "-o", written)
    assert code == 2 and err.startswith(f"error: {written / f'{LIKE}-ana-lopez-uni-example.yaml'} already exists")
    assert _files(written) == before
    (written / f"{LIKE}-o-brien.md").write_text("scribbled", encoding="utf-8")
    assert cli("handouts", "--like", LIKE, "--students", _roster(tmp_path), "-o", written, "--force").code == 0
    assert _files(written) == before


def test_an_existing_folder_keeps_its_other_files(cli, tmp_path):
    out = tmp_path / "pack"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    assert cli("handouts", "--like", LIKE, "--students", _roster(tmp_path), "-o", out).code == 0
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine" and len(list(out.iterdir())) == 8
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # the temporary folder is gone


def test_the_output_must_be_a_folder(cli, tmp_path):
    target = tmp_path / "file"
    target.write_text("x", encoding="utf-8")
    code, _, err = cli("handouts", "--like", LIKE, "--students", _roster(tmp_path), "-o", target)
    assert code == 2 and err == f"error: {target} is a file, not a folder; give a folder to write the variants into\n"


def test_an_exercise_whose_numbers_are_not_drawn_afresh_is_refused(cli, tmp_path):
    code, _, err = cli("handouts", "--like", "gqa-four-heads-2x4", "--students", _roster(tmp_path), "-o", tmp_path / "out")
    assert code == 2 and len(err.splitlines()) == 1 and "format v2" in err
    assert not (tmp_path / "out").exists()


def test_a_variant_id_that_is_a_bundled_exercises_is_refused():
    from tutor.authoring.variants import RosterError, draw_variants

    roster = parse_roster("student\nasym-3x4\n", "r.csv")
    with pytest.raises(RosterError) as err:
        draw_variants(_renamed("single-head"), roster)
    assert str(err.value) == ("r.csv:2: student 'asym-3x4' would get the id single-head-asym-3x4, a bundled exercise's;"
                              " change the id")
    assert isinstance(err.value, TutorError)


def _renamed(new_id: str):
    """Bundled ``single-head-3x4`` under another id (a variant of ``single-head`` for student ``asym-3x4`` would
    be ``single-head-asym-3x4``, a bundled id)."""
    from dataclasses import replace

    from tutor.exercise.catalog import resolve

    return replace(resolve("single-head-3x4"), id=new_id)


def test_help_names_the_id_columns(cli):
    code, out, _ = cli("handouts", "--help", env={"COLUMNS": "1000"})
    assert code == 0 and "the first found of student, id, email, sis_id, login, student_id, sis_user_id (any case," \
        in " ".join(out.split())
    assert "--name-column" in out and "(default: the first found of name, student_name;" in " ".join(out.split())
    assert "学号" not in out and "姓名" not in out  # the Chinese headers: in the Chinese help only
    assert "at most 1,000 students" in " ".join(out.split()) and MAX_STUDENTS == 1000
    code, out, _ = cli("handouts", "--help", "--lang", "zh", env={"COLUMNS": "1000"})
    assert code == 0 and "学生名单" in out and "sis_id" in out and "`" not in out and "最多 1000 名学生" in out
    assert "取 student、id、email、sis_id、login、student_id、sis_user_id、学号 中最先找到的一列" in out


def test_the_modules_examples_hold():
    import doctest

    import tutor.authoring.variants

    result = doctest.testmod(tutor.authoring.variants)
    assert result.attempted == 3 and result.failed == 0


def test_crlf_and_commas_as_a_spreadsheet_writes_them():
    roster = parse_roster("Email,Name\r\nann@x.example,\"Lee, Ann\"\r\nbo@x.example,Bo\r\n", "r.csv")
    assert [(s.id, s.name, s.line, s.slug) for s in roster.students] == [
        ("ann@x.example", "Lee, Ann", 2, "ann-x-example"), ("bo@x.example", "Bo", 3, "bo-x-example")]


def test_a_column_not_in_the_header(cli, tmp_path):
    code, _, err = cli("handouts", "--like", LIKE, "--students", _roster(tmp_path, "student,name\nann,Ann\n").name,
                       "-o", "out", "--column", "uid", cwd=tmp_path)
    assert (code, err) == (2, "error: roster.csv:1: no column 'uid' in the header row (found student, name)\n")


def test_a_roster_too_long_is_refused_before_anything_is_drawn():
    from tutor.authoring.variants import MAX_STUDENTS, RosterError

    with pytest.raises(RosterError) as err:
        parse_roster("student\n" + "".join(f"s{i}\n" for i in range(MAX_STUDENTS + 1)), "r.csv")
    assert str(err.value) == f"r.csv:{MAX_STUDENTS + 2}: more than {MAX_STUDENTS} students: split the roster"


# --- a failure half-way writes nothing ------------------------------------------------------------------


def _failing_after(monkeypatch, calls: int) -> None:
    """The worksheet of the ``calls + 1``-th student fails to be written (a full disk, say)."""
    import tutor.authoring.validate

    real, seen = tutor.authoring.validate.export_handout, []

    def export(*args, **kwargs):
        seen.append(1)
        if len(seen) > calls:
            raise TutorError("cannot write: No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(tutor.authoring.validate, "export_handout", export)


def test_a_failure_half_way_leaves_no_folder_and_no_parent_made_for_it(cli, tmp_path, monkeypatch):
    _failing_after(monkeypatch, 2)
    code, _, err = cli("handouts", "--like", LIKE, "--students", _roster(tmp_path), "-o", tmp_path / "a" / "b" / "out")
    assert (code, err) == (2, "error: cannot write: No space left on device\n")
    assert [p.name for p in tmp_path.iterdir()] == ["roster.csv"]


def test_a_failure_half_way_leaves_an_existing_folder_as_it_was(cli, tmp_path, monkeypatch):
    out = tmp_path / "pack"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    _failing_after(monkeypatch, 1)
    assert cli("handouts", "--like", LIKE, "--students", _roster(tmp_path), "-o", out).code == 2
    assert _files(out) == {"notes.txt": b"mine"}


def test_a_file_that_appears_while_moving_is_not_replaced_and_the_moved_ones_go_back(cli, tmp_path, monkeypatch):
    out = tmp_path / "pack"
    out.mkdir()
    real, links = os.link, []

    def link(src, dst):
        links.append(dst)
        if len(links) == 3:  # another program wrote this name meanwhile
            Path(dst).write_text("theirs", encoding="utf-8")
        return real(src, dst)

    monkeypatch.setattr(os, "link", link)
    code, _, err = cli("handouts", "--like", LIKE, "--students", _roster(tmp_path), "-o", out)
    assert code == 2 and err == f"error: {links[2]} already exists; choose another file or add --force to overwrite it\n"
    assert _files(out) == {Path(links[2]).name: b"theirs"}


def test_two_students_never_share_their_numbers(monkeypatch):
    """Should a student's seed draw the numbers of a student above, the next seed of the documented sequence
    (``STUDENT\\0k``) is drawn: forced here by giving every first seed the same value."""
    import tutor.authoring.variants as variants
    from tutor.exercise.catalog import resolve

    real = variants.seed_of
    monkeypatch.setattr(variants, "seed_of", lambda e, s: 7 if "\0" not in s else real(e, s))
    drawn = variants.draw_variants(resolve(LIKE), parse_roster("student\nann\nbob\ncy\n", "r.csv"))
    assert [v.seed for v in drawn] == [7, real(LIKE, "bob\x001"), real(LIKE, "cy\x001")]
    assert len({repr((v.exercise.x, v.exercise.heads)) for v in drawn}) == 3
    assert all(f"--seed {v.seed} " in v.command for v in drawn)


def test_a_shape_with_too_few_exercises_for_the_class_is_refused(monkeypatch):
    import tutor.authoring.variants as variants
    from tutor.exercise.catalog import resolve

    monkeypatch.setattr(variants, "seed_of", lambda e, s: 7)  # every seed draws the same numbers
    with pytest.raises(TutorError) as err:
        variants.draw_variants(resolve(LIKE), parse_roster("student\nann\nbob\n", "r.csv"))
    assert str(err.value) == (f"in 20 draws the shape of {LIKE} gave student 'bob' only numbers a student above"
                              " already has (1 student above); use a larger exercise")


def test_a_roster_over_the_size_limit_is_one_line_that_names_rosters(cli, tmp_path):
    """The hint is said in parentheses after the message: it has none of its own (no nested brackets)."""
    roster = _roster(tmp_path, "student\n" + "a" * 1_100_000 + "\n")
    code, out, err = cli("handouts", "--like", LIKE, "--students", roster, "-o", tmp_path / "out")
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and not (tmp_path / "out").exists()
    assert "over the limit of 1,000,000" in err and "rosters" in err
    hint = err[err.index("; the limit is passed here (") + len("; the limit is passed here ("):].rstrip("\n")
    assert hint.endswith(")") and "(" not in hint and ")" not in hint[:-1], err

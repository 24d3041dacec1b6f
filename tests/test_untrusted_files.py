"""Files as a hostile user writes them (issue 8: B.3, C.7, C.8, D.12, G.23).

Every command that reads an exercise, solution or pack file must answer
with a problem at ``file:line:col`` and exit code 2 -- never a traceback,
never a hang:

* numbers Python cannot convert (more than 4,300 digits behind a leading
  zero, or in an exponent) in exercise, solution and pack files;
* files that are not regular files: a FIFO (which would block ``open``
  forever), a device, a directory, a symlink loop;
* invisible and look-alike characters in keys and values, named by code
  point; U+2212 (the typographic minus) read as '-';
* control characters, non-UTF-8 bytes, oversized files and duplicate keys
  written as aliases, each at the position where it is;
* long values cut in messages.

Hangs are guarded by ``pytest-timeout``: a regression fails, it does not hang.
"""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path

import pytest

from tutor.audit.solution import load_solution
from tutor.exercise import validate_file, validate_text
from tutor.exercise.catalog import load_catalog
from tutor.exercise.yamlread import MAX_FILE_BYTES, parse_yaml, read_text

CLASSIC = """id: classic
title: "Three tokens, d_model = 4, one head with d_k = 2"
x: [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
heads:
  - w_q: [[1, 0], [1, 0], [0, 1], [0, 1]]
    w_k: [[1, 0], [1, 0], [0, 1], [0, 1]]
    w_v: [[1, 0], [1, 0], [0, 1], [0, 1]]
"""
POSIX = pytest.mark.skipif(os.name != "posix" or not hasattr(os, "mkfifo"), reason="needs FIFOs and symlinks")


def exercise(exercise_id: str = "mine", w_v_entry: str = "0") -> str:
    """The classic exercise under another id, with ``heads[0].w_v[1][1]`` (line 7, column 23) replaced."""
    return CLASSIC.replace("id: classic", f"id: {exercise_id}").replace(
        "w_v: [[1, 0], [1, 0],", f"w_v: [[1, 0], [1, {w_v_entry}],")


def no_traceback(err: str) -> None:
    assert "Traceback" not in err and "Error:" not in err.replace("error:", "")


# --- B.3: numbers Python refuses to convert ----------------------------------------------------

HUGE = {
    "leading zero": "0" + "1" * 5000,
    "signed leading zero": "-0" + "7" * 4400,
    "huge exponent": "1e" + "1" * 5000,
    "huge negative exponent": "2.5e-" + "0" * 4999 + "1",
    "huge integer": "9" * 5000,
}


@pytest.mark.parametrize("text", HUGE.values(), ids=HUGE.keys())
def test_a_huge_number_in_an_exercise_is_a_problem_at_its_place(text):
    v = validate_text(exercise(w_v_entry=text), "f.yaml")
    (p,) = v.problems
    assert (p.line, p.column, p.field) == (7, 23, "heads[0].w_v[1][1]")
    assert "at most 40 characters" in p.hint
    assert len(str(p)) < 400  # the number is cut, not echoed


@pytest.mark.parametrize("field", ["num_heads", "difficulty"])
@pytest.mark.parametrize("text", [HUGE["leading zero"], HUGE["huge integer"]], ids=["leading zero", "digits"])
def test_a_huge_whole_number_is_a_problem(field, text):
    v = validate_text(CLASSIC + f"{field}: {text}\n", "f.yaml")
    p = next(p for p in v.problems if p.field == field)
    assert (p.line, p.column) == (8, len(field) + 3)
    assert "expected a whole number" in p.message and "(5001 characters)" in p.message or "(5000 characters)" in p.message


@pytest.mark.parametrize("text", [HUGE["leading zero"], HUGE["huge exponent"]], ids=["leading zero", "exponent"])
def test_a_huge_number_in_a_solution_file_is_a_problem(tmp_path, cli, text):
    path = tmp_path / "sol.yaml"
    path.write_text(f"exercise: single-head-3x4\nq: [[{text}, 1], [2, 2], [2, 2]]\n")
    code, out, err = cli("check", str(path))
    assert code == 2
    no_traceback(err)
    assert f"{path}:2:6: q[0][0]: " in err


@pytest.mark.parametrize("text", [HUGE["leading zero"], HUGE["huge exponent"]], ids=["leading zero", "exponent"])
def test_a_huge_number_in_a_pack_breaks_nothing_else(tmp_path, cli, text):
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "broken.yaml").write_text(exercise("broken", text))
    (pack / "fine.yaml").write_text(exercise("fine"))
    cat = load_catalog([pack])
    assert {e.exercise.id for e in cat.entries} >= {"fine", "single-head-3x4"}
    assert [(p.file, p.line, p.column) for p in cat.problems] == [(str(pack / "broken.yaml"), 7, 23)]
    code, out, err = cli("list", "--exercises", str(pack))
    assert code == 0 and "fine" in out and "single-head-3x4" in out
    assert f"warning: {pack / 'broken.yaml'}:7:23: " in err
    packs = {"ATTN_TUTOR_PATH": str(pack)}
    code, out, err = cli("explain", "single-head-3x4", "--format", "json", env=packs)
    assert code == 0 and json.loads(out)["exercise"]["id"] == "single-head-3x4"
    code, out, err = cli("practice", "fine", input="quit\n", env=packs)
    assert code == 0, err


def test_yaml11_warnings_are_worked_out_without_converting_the_number():
    doc = parse_yaml("a: 010\nb: -0010\nc: +007\nd: 1e3\ne: " + "0" * 4400 + "1\n", "f.yaml")
    assert [(p.line, p.field, p.hint) for p in doc.warnings] == [
        (1, "a", "write 10"), (2, "b", "write -10"), (3, "c", "write 7"), (4, "d", "write 1000"),
    ]


def test_an_unexpected_error_in_one_pack_file_does_not_stop_the_others(tmp_path, monkeypatch):
    """The last guard: a bug while reading one file is that file's problem, not the pack's."""
    import tutor.exercise.catalog as catalog

    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "a.yaml").write_text(exercise("aaa"))
    (pack / "b.yaml").write_text(exercise("bbb"))
    real = catalog._read_exercise_file

    def flaky(file, name):
        if file.name == "a.yaml":
            raise ValueError("Exceeds the limit (4300 digits) for integer string conversion")
        return real(file, name)

    monkeypatch.setattr(catalog, "_read_exercise_file", flaky)
    cat = load_catalog([pack])
    assert "bbb" in {e.exercise.id for e in cat.entries}
    (p,) = cat.problems
    assert p.file == str(pack / "a.yaml") and "could not be read (ValueError)" in p.message


# --- C.7, C.8: files that are not regular files ----------------------------------------------------


@pytest.fixture
def fifo_pack(tmp_path: Path) -> Path:
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "fine.yaml").write_text(exercise("fine"))
    os.mkfifo(pack / "x.yaml")
    return pack


@POSIX
@pytest.mark.timeout(60)
def test_read_text_refuses_a_fifo_without_blocking(fifo_pack):
    text, (p,) = read_text(str(fifo_pack / "x.yaml"))
    assert text is None
    assert p.message == "cannot read the file: it is a named pipe (FIFO), not a regular file"


@POSIX
@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["option", "env"])
def test_a_fifo_in_a_pack_is_reported_not_waited_for(fifo_pack, cli, how):
    args = ["--exercises", str(fifo_pack)] if how == "option" else []
    env = {"ATTN_TUTOR_PATH": str(fifo_pack)} if how == "env" else {}
    fifo = fifo_pack / "x.yaml"
    code, out, err = cli("list", *args, env=env)
    assert code == 0 and "fine" in out
    assert f"warning: {fifo}: cannot read the file: it is a named pipe (FIFO), not a regular file" in err
    code, out, err = cli("explain", "single-head-3x4", "--format", "json", *args, env=env)
    assert code == 0 and json.loads(out)["exercise"]["id"] == "single-head-3x4"
    code, out, err = cli("explain", "fine", "--format", "json", *args, env=env)
    assert code == 0 and json.loads(out)["exercise"]["id"] == "fine"
    code, out, err = cli("practice", "fine", *args, input="quit\n", env=env)
    assert code == 0, err
    code, out, err = cli("practice", *args, input="quit\n", env=env)
    assert code == 0, err


@POSIX
@pytest.mark.timeout(60)
def test_validate_reports_a_fifo_in_a_folder_and_given_by_name(fifo_pack, cli):
    fifo = fifo_pack / "x.yaml"
    line = f"{fifo}: cannot read the file: it is a named pipe (FIFO), not a regular file"
    code, out, err = cli("validate", "--no-notes", str(fifo_pack))  # notes (what the valid file cannot catch) aside
    assert (code, out.splitlines()) == (2, [line])
    assert "files checked: 2; valid: 1; invalid: 1; problems: 1" in err
    code, out, err = cli("validate", str(fifo))
    assert (code, out.splitlines()) == (2, [line])
    code, out, err = cli("explain", str(fifo))
    assert (code, err.splitlines()) == (2, [f"error: {line}"])
    code, out, err = cli("check", str(fifo))
    assert (code, err.splitlines()) == (2, [f"error: {line}"])


@POSIX
@pytest.mark.timeout(60)
def test_a_fifo_does_not_hang_the_real_program(cli_process, fifo_pack):
    """The same through a real process: a blocking open would be killed by the timeout and fail."""
    done = cli_process("list", env={"ATTN_TUTOR_PATH": str(fifo_pack)}, timeout=50)
    assert done.code == 0 and "fine" in done.out and "named pipe" in done.err


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_is_not_read(device):
    if not os.path.exists(device):
        pytest.skip("no such device")
    (p,) = validate_file(device).problems
    assert p.message == "cannot read the file: it is a device, not a regular file"


def test_a_directory_given_as_a_file(tmp_path):
    (p,) = validate_file(str(tmp_path)).problems
    assert p.message == "cannot read the file: it is a directory, not a regular file"


@POSIX
@pytest.mark.timeout(60)
def test_a_symlink_loop_is_a_problem_not_a_traceback(tmp_path, cli):
    pack = tmp_path / "loop"
    pack.mkdir()
    (pack / "a.yaml").symlink_to("b.yaml")
    (pack / "b.yaml").symlink_to("a.yaml")
    (pack / "fine.yaml").write_text(exercise("fine"))
    code, out, err = cli("validate", "--no-notes", str(pack))
    assert code == 2
    no_traceback(err)
    lines = out.splitlines()
    assert [line.split(": cannot read the file: ")[0] for line in lines] == [str(pack / "a.yaml"), str(pack / "b.yaml")]
    assert "files checked: 3; valid: 1; invalid: 2" in err
    code, out, err = cli("validate", str(pack / "a.yaml"))
    assert code == 2 and out.startswith(f"{pack / 'a.yaml'}: cannot read the file: ")  # not "no such file"
    code, out, err = cli("explain", str(pack / "a.yaml"))
    assert code == 2 and err.startswith(f"error: {pack / 'a.yaml'}: cannot read the file: ")
    code, out, err = cli("list", env={"ATTN_TUTOR_PATH": f"{pack}{os.pathsep}{pack / 'a.yaml'}"})
    assert code == 0 and "fine" in out
    no_traceback(err)


@POSIX
def test_a_folder_that_is_a_symlink_loop_in_the_path(tmp_path, cli):
    (tmp_path / "self").symlink_to("self")
    code, out, err = cli("list", env={"ATTN_TUTOR_PATH": str(tmp_path / "self")})
    assert code == 0 and "single-head-3x4" in out
    assert "exercise folder not found" in err


# --- D.12: invisible and look-alike characters, U+2212 ---------------------------------------------


@pytest.mark.parametrize(("key", "shown", "named", "meant"), [
    ("x\u200b", "x\\u200b", "U+200B ZERO WIDTH SPACE (invisible)", "x"),
    ("\u0445", "\\u0445", "U+0445 CYRILLIC SMALL LETTER HA (looks like 'x')", "x"),
    ("titl\u0435", "titl\\u0435", "U+0435 CYRILLIC SMALL LETTER IE (looks like 'e')", "title"),
    ("ti\u00adtle", "ti\\xadtle", "U+00AD SOFT HYPHEN (invisible)", "title"),
])
def test_a_key_with_an_invisible_or_look_alike_character_is_named_by_code_point(key, shown, named, meant):
    text = CLASSIC.replace(f"\n{meant}:", f"\n{key}:")
    v = validate_text(text, "f.yaml")
    (p,) = v.problems  # one mistake, one report: not also "x: required field is missing"
    assert p.field == shown
    assert p.message == f"unknown field '{shown}': it has {named}"
    assert p.hint == f"did you mean '{meant}'?"
    assert str(p).isascii()


def test_a_look_alike_key_beside_the_real_one():
    v = validate_text(CLASSIC + "x\u200b: 1\n", "f.yaml")
    (p,) = v.problems
    assert (p.line, p.field, p.hint) == (8, "x\\u200b", "did you mean 'x'?")


def test_a_look_alike_key_inside_a_head():
    v = validate_text(CLASSIC.replace("    w_k:", "    w_\u043a:"), "f.yaml")
    (p,) = v.problems
    assert (p.line, p.column, p.field) == (6, 5, "heads[0].w_\\u043a")
    assert p.message == "unknown field 'w_\\u043a': it has U+043A CYRILLIC SMALL LETTER KA (looks like 'k')"


@pytest.mark.parametrize(("value", "names"), [
    ("1\u200b", "U+200B ZERO WIDTH SPACE (invisible)"),
    ("\uff11", "U+FF11 FULLWIDTH DIGIT ONE (looks like '1')"),
    ("\u0661", "U+0661 ARABIC-INDIC DIGIT ONE"),
    ("1\u20443", "U+2044 FRACTION SLASH"),
])
def test_a_value_with_a_non_ascii_character_is_named_by_code_point(value, names):
    v = validate_text(exercise(w_v_entry=f'"{value}"'), "f.yaml")
    (p,) = v.problems
    assert (p.line, p.column) == (7, 23)
    assert str(p.message).endswith(f"found the text {ascii(value)}, with {names}")


def test_a_look_alike_mask_name_is_named():
    v = validate_text(CLASSIC + "mask: c\u0430usal\n", "f.yaml")
    (p,) = v.problems
    assert str(p.message).endswith("found the text 'c\\u0430usal', with U+0430 CYRILLIC SMALL LETTER A (looks like 'a')")


@pytest.mark.parametrize(("text", "value"), [("\u22121", -1), ("\"\u22121/2\"", Fraction(-1, 2)), ("\u22120.5", Fraction(-1, 2)),
                                             ("\"1/\u22124\"", Fraction(-1, 4)), ("\u22121e-3", Fraction(-1, 1000))])
def test_the_minus_sign_is_read_as_minus_in_exercise_files(text, value):
    v = validate_text(exercise(w_v_entry=text), "f.yaml")
    assert v.ok, v.problems
    assert v.exercise.heads[0].w_v[1][1] == value


def test_the_minus_sign_in_a_whole_number_field():
    v = validate_text(CLASSIC + "difficulty: \u22122\n", "f.yaml")
    (p,) = v.problems
    assert str(p.message).startswith("expected a whole number from 1 to 5")  # read as -2: out of range, not "not a number"


@pytest.mark.parametrize(("key", "named"), [
    ("s\u0441ores", "U+0441 CYRILLIC SMALL LETTER ES (looks like 'c')"),
    ("q\u200b", "U+200B ZERO WIDTH SPACE (invisible)"),
])
def test_a_look_alike_step_name_in_a_solution_file(tmp_path, cli, key, named):
    path = tmp_path / "sol.yaml"
    path.write_text(f"exercise: single-head-3x4\n{key}: [[1, 1], [2, 2], [2, 2]]\n")
    code, out, err = cli("check", str(path))
    assert code == 2
    meant = ascii(key)[1:-1]
    assert f"sol.yaml:2:1: {meant}: '{meant}' is not a step name: it has {named} (did you mean '" in err
    assert err.isascii()


def test_the_minus_sign_reads_the_same_in_exercise_and_solution_files(tmp_path):
    ex = tmp_path / "ex.yaml"
    ex.write_text(exercise(w_v_entry="\u22121"))
    sol = tmp_path / "sol.yaml"
    sol.write_text(f"exercise: {ex.name}\nv: [[1, 0], [\u22121, 2], [1, 1]]\n")
    sf = load_solution(str(sol))
    assert sf.exercise.heads[0].w_v[1][1] == -1
    assert sf.steps[0].entries[1][0].value() == -1


# --- G.23: every problem at its place ------------------------------------------------------------


@pytest.mark.parametrize(("text", "line", "col", "char"), [
    ('id: t\ntitle: "a\x00b"\n', 2, 10, "U+0000 (a control character)"),
    ("id: t\ntitle: a\x1b[2Jb\n", 2, 9, "U+001B (a control character)"),
    ('id: t\ntitle: "caf\u00e9 \u221a2 \x07"\n', 2, 17, "U+0007 (a control character)"),
    ("id: \u00e9\u00e9\u00e9\nx: [[1]]\ntitle: \x7f\n", 3, 8, "U+007F (a control character)"),
])
def test_a_control_character_is_reported_at_its_position(text, line, col, char):
    (p,) = validate_text(text, "f.yaml").problems
    assert (p.line, p.column) == (line, col)
    assert p.message == f"the character {char} is not allowed in YAML"


def test_a_control_character_in_a_file_on_disk(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_bytes(b"\xef\xbb\xbfid: t\ntitle: \xc3\xa9\x00\n")
    (p,) = validate_file(str(path)).problems
    assert (p.line, p.column) == (2, 9)


@pytest.mark.parametrize(("data", "line", "col", "byte"), [
    (b"id: t\ntitle: caf\xe9\n", 2, 11, "0xE9"),
    (b"\xff\xfeid: t\n", 1, 1, "0xFF"),
    (b"id: t\ntitle: \xe2\x88\x9a2 \xc3\n", 2, 11, "0xC3"),
    (b"\xef\xbb\xbfid: \x80\n", 1, 5, "0x80"),
])
def test_a_byte_that_is_not_utf8_is_reported_at_its_line_and_column(tmp_path, data, line, col, byte):
    path = tmp_path / "f.yaml"
    path.write_bytes(data)
    (p,) = validate_file(str(path)).problems
    assert (p.line, p.column) == (line, col)
    assert p.message == f"the file is not UTF-8 text: byte {byte} here cannot be decoded"


def test_an_oversized_file_is_reported_where_it_passes_the_limit(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_text("id: t\n" + "# " + "x" * (MAX_FILE_BYTES + 10) + "\n")
    (p,) = validate_file(str(path)).problems
    assert (p.line, p.column) == (2, MAX_FILE_BYTES - 6 + 1)  # the first byte past the limit
    size = MAX_FILE_BYTES + 19
    assert p.message == f"the file is {size:,} bytes, over the limit of {MAX_FILE_BYTES:,}; the limit is passed here"


def test_a_long_number_is_cut_in_messages():
    v = validate_text(CLASSIC.replace("x: [[1, 0, 1, 0]", "x: [[" + "1" * 5000 + ", 0, 1, 0]"), "f.yaml")
    (p,) = v.problems
    assert str(p.message).endswith("found the number " + "1" * 37 + "... (5000 characters)")


@pytest.mark.parametrize(("text", "line", "col", "first"), [
    ("&k id: t\ntitle: T\nx: [[1]]\n*k : u\n", 4, 1, 1),  # the duplicate is the alias
    ("a: &k title\ntitle: T\n*k : u\n", 3, 1, 2),  # an alias of a value, used as a key
    ("id: t\nb:\n  c: &k 1\n  *k : 2\n", 4, 3, None),  # 'c' then '1': no duplicate (control)
    ("id: &k t\nb:\n  t: 1\n  *k : 2\n", 4, 3, 3),  # nested mapping
    ("id: &k t\nb: {t: 1, *k : 2}\n", 2, 11, 2),  # flow mapping
])
def test_a_duplicate_key_written_as_an_alias_is_reported_at_the_alias(text, line, col, first):
    doc = parse_yaml(text, "f.yaml")
    dups = [p for p in doc.problems if "duplicate key" in p.message]
    if first is None:
        assert dups == []
        return
    (p,) = dups
    assert (p.line, p.column) == (line, col)
    assert f"(first given at line {first})" in p.message


def test_new_with_a_control_character_in_the_title_is_a_usage_error(tmp_path, cli):
    out_file = tmp_path / "new.yaml"
    code, out, err = cli("new", "--title", "bad\x1btitle", "-o", str(out_file))
    assert code == 2
    assert not out_file.exists()
    assert "--title" in err and str(out_file) not in err
    assert "U+001B" in err
    assert "\x1b" not in err

"""What reaches a terminal (issue 8: D.9, D.11, E.13-E.16) and the README's terminal promises.

- Text from a file or a store never reaches the terminal with a raw control,
  bidi or other format character, in any command or format (D.9), and a
  Markdown handout shows such text as text (D.11).
- Every command works on an ASCII or cp1252 stream (E.13): people's output
  is transliterated, documents (JSON, Markdown, HTML, YAML) are UTF-8 bytes
  (JSON is ASCII).
- A closed or unwritable stdout is one error line and exit 2, a closed
  stderr never a crash (E.14).
- Any width works: ``COLUMNS=0`` is clamped, and no number is ever cut,
  only folded onto the next line (E.15, E.16).

The real stream matters for encodings and closed descriptors, so the inputs
the issue lists run in a subprocess; the cross products run in-process on a
real :class:`io.TextIOWrapper` of the encoding under test (what Python makes
of ``PYTHONIOENCODING``) or on ``sys.stdout = None`` (what Python makes of
``>&-``).
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from tutor.base.env import Env
from tutor.base.textsafe import UNSAFE_CATEGORIES, escape_char, shown, shown_stream
from tutor.cli import main

from .conftest import EXERCISES, REPO

pytestmark = pytest.mark.usefixtures("child_environment")  # processes started here read their environment

DATA = REPO / "tests" / "data" / "check"
BLOG = str(DATA / "blog-single-head-3x4.yaml")
CLASSIC_SOLUTION = str(DATA / "classic-correct.yaml")

# Sequences a hostile file would carry: window title, screen clear, a link, a one-character
# CSI, bidi overrides and isolates, zero-width and other invisible characters.
HOSTILE = ["\x1b]0;pwned\x07", "\x1b[2J", "\x1b]8;;http://evil.example/\x1b\\", "\x1b[31m", "\x9b1m", "\x07",
           "\x08", "\r", "\x0b", "\x7f", "\u202e", "\u202d", "\u2066", "\u2069", "\u200e", "\u200b", "\u200d",
           "\ufeff", "\u2028", "\u2029", "\u061c", "\u00ad", "\U000e0041", "\x85", "\x00"]


def unsafe(text: str) -> list[str]:
    """The characters of ``text`` a terminal may act on (newlines and tabs aside)."""
    return [c for c in text if c not in "\n\t" and unicodedata.category(c) in UNSAFE_CATEGORIES]


def yaml_str(text: str) -> str:
    """``text`` as a YAML double-quoted scalar, every character but printable ASCII escaped."""
    def one(c: str) -> str:
        if c in '"\\':
            return "\\" + c
        if " " <= c <= "~":
            return c
        code = ord(c)
        return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"

    return '"' + "".join(map(one, text)) + '"'


def hostile_exercise(path: Path, title: str, description: str, tokens: list[str], exercise_id: str = "hostile") -> Path:
    path.write_text(
        f"id: {exercise_id}\ntitle: {yaml_str(title)}\ndescription: {yaml_str(description)}\n"
        f"tokens: [{', '.join(yaml_str(x) for x in tokens)}]\n"
        "x: [[1, 0], [0, 2], [1, 1]]\n"
        "heads:\n  - {w_q: [[1], [0]], w_k: [[1], [1]], w_v: [[1], [2]]}\n", encoding="utf-8")
    return path


# --- the escaping rule ------------------------------------------------------------------------


HOSTILE_CHARS = sorted({c for seq in HOSTILE for c in seq if not c.isascii() or not c.isprintable()}
                       | {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]})


@pytest.mark.parametrize("ch", HOSTILE_CHARS, ids=lambda c: f"U+{ord(c):04X}")
def test_every_control_and_format_character_is_escaped(ch):
    out = shown(f"a{ch}b")
    assert unsafe(out) == [] and "\n" not in out and "\t" not in out
    assert out == "a" + escape_char(ch) + "b"
    assert escape_char(ch).startswith("\\") and escape_char(ch).isascii()


def test_escapes_read_as_code_points():
    assert shown("t\x1b]0;x\x07") == "t\\x1b]0;x\\x07"
    assert shown("\u202egnp.exe") == "\\u202egnp.exe"
    assert shown("tag\U000e0041") == "tag\\U000e0041"
    assert shown("bad\udcffname") == "bad\\xffname"  # a file name's undecodable byte, as the byte
    assert shown("two\nlines\tand tab", keep="\n\t") == "two\nlines\tand tab"
    assert shown("two\nlines") == "two\\x0alines"


@pytest.mark.parametrize("text", ["Caf\u00e9 \u221a2 \u00b7 K\u1d40 \u2192 [3\u00d72]", "\u4e2d\u6587 \u0445 \u2212 1",
                                  "emoji \U0001f600", "nbsp\u00a0and\u3000space", "private \ue000"])
def test_printable_text_is_left_as_written(text):
    assert shown(text) == text and shown_stream(text) == text


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_shown_leaves_nothing_a_terminal_acts_on_and_is_idempotent(text):
    once = shown(text)
    assert unsafe(once) == []
    assert shown(once) == once
    assert "\\" in once or once == text


def test_only_colour_passes_the_stream_guard():
    assert shown_stream("\x1b[1;31mred\x1b[0m\n") == "\x1b[1;31mred\x1b[0m\n"
    assert shown_stream("\x1b]0;t\x07\x1b[2J\x1b[0m") == "\\x1b]0;t\\x07\\x1b[2J\x1b[0m"
    assert shown_stream("a\u202eb\tc") == "a\\u202eb\tc"


def test_the_console_escapes_what_a_renderer_forgot():
    """The last line of defence: text printed raw on the console (or recorded for a page) comes out escaped."""
    from rich.table import Table
    from rich.text import Text

    from tutor.render.console import make_console

    buffer = io.StringIO()
    console = make_console(None, file=buffer, width=40, record=True)
    table = Table()
    table.add_column("h\x1b]0;t\x07")
    table.add_row("\u202ecell")
    console.print(Text("title \x1b]0;pwned\x07 \x9b2J"), table)
    console.print("markup? [bold]no[/bold] \x1b[2J")
    out = buffer.getvalue()
    assert unsafe(out) == [] and "\\x1b]0;pwned" in out and "[bold]no[/bold]" in out  # (rich drops the BEL itself)
    for page in (console.export_text(), console.export_html(), console.export_svg()):
        assert unsafe(page) == []


def test_the_console_is_never_narrower_than_the_narrowest_layout():
    from tutor.base.env import Env
    from tutor.render import MIN_WIDTH
    from tutor.render.console import make_console

    def env(columns: str) -> Env:
        return Env.from_environ({"COLUMNS": columns}, stdin=None, stdout=None, stderr=None)

    for columns in ("0", "1", "19"):
        assert make_console(env(columns), file=io.StringIO()).width == MIN_WIDTH
        assert make_console(env("40"), file=io.StringIO(), width=int(columns)).width == MIN_WIDTH
    assert make_console(env("33"), file=io.StringIO()).width == 33


def test_an_exercise_holds_its_text_as_it_is_shown():
    """The model escapes its text fields once, however it is built; the numbers are untouched."""
    from dataclasses import replace
    from fractions import Fraction

    from tutor.exercise.record import Exercise, Head

    one = ((Fraction(1),),)
    ex = Exercise(id="x", title="t\x1b[2J\u202e", x=one, heads=(Head(one, one, one),), description="a\nb\tc\x07",
                  tokens=("a\x1b",), tags=("t\x9b",), source="/p/\x1b]0;f\x07.yaml")
    assert ex.title == "t\\x1b[2J\\u202e" and ex.description == "a\nb\tc\\x07"
    assert ex.tokens == ("a\\x1b",) and ex.query_labels == ("a\\x1b",) and ex.tags == ("t\\x9b",)
    assert ex.source == "/p/\\x1b]0;f\\x07.yaml"
    assert replace(ex, difficulty=2).title == ex.title  # idempotent


# --- D.9: every command and format ---------------------------------------------------------------


EVIL_TITLE = "Evil \x1b]0;pwned\x07\x1b[2J <script>alert(1)</script> \u202egnp.exe"
EVIL_DESCRIPTION = "desc \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ *kept* <b>bold</b> & \u2066x"
EVIL_TOKENS = ["a\x1b[31m", "b\x9b", "c\u202e"]


@pytest.fixture
def evil(tmp_path) -> Path:
    pack = tmp_path / "pack"
    pack.mkdir()
    hostile_exercise(pack / "evil.yaml", EVIL_TITLE, EVIL_DESCRIPTION, EVIL_TOKENS, "evil")
    (pack / "bad\x1b]0;PWN\x07name.yaml").write_text("id: [broken\n", encoding="utf-8")  # a pack file name
    (tmp_path / "sol.yaml").write_text(
        'exercise: pack/evil.yaml\ntitle: "sol \\e]0;T\\a \\u202e"\nsource: "src \\e[2J \\x9b31m"\n'
        "scores: [[1, 1, 1], [1, 4, 2], [1, 2, 0]]\n", encoding="utf-8")
    return tmp_path


EVIL_COMMANDS = [
    ["explain", "{f}"], ["explain", "{f}", "--format", "json"], ["explain", "{f}", "--format", "markdown"],
    ["explain", "{f}", "--format", "html"], ["explain", "{f}", "--blank"], ["explain", "{f}", "--format", "markdown", "--blank"],
    ["explain", "evil", "--exercises", "{pack}"], ["list", "--exercises", "{pack}"],
    ["list", "--exercises", "{pack}", "--format", "json"], ["validate", "{pack}"], ["validate", "{pack}", "--format", "json"],
    ["validate", "{f}"], ["check", "{sol}"], ["check", "{sol}", "--format", "json"], ["explain", "{missing}"],
]


@pytest.mark.parametrize("argv", EVIL_COMMANDS, ids=lambda a: " ".join(a))
def test_text_from_files_never_reaches_the_terminal_raw(argv, evil, cli):
    args = [a.format(f=evil / "pack" / "evil.yaml", pack=evil / "pack", sol=evil / "sol.yaml",
                     missing=evil / "pack" / "no\x1b[2Jsuch\u202e.yaml") for a in argv]
    code, out, err = cli(*args)
    assert code in (0, 1, 2) and "Traceback" not in err
    assert unsafe(out) == [] and unsafe(err) == []
    if argv[0] == "explain" and "{f}" in argv:
        assert code == 0 and err == ""
        if "json" not in argv and "markdown" not in argv:  # those escape the backslashes once more, as they do
            assert "\\x1b]0;pwned\\x07" in out and "\\u202e" in out


def test_the_labels_show_escaped_in_their_table(evil, cli):
    code, out, _ = cli("explain", str(evil / "pack" / "evil.yaml"))
    assert code == 0
    assert "│ a\\x1b[31m │" in out and "│ b\\x9b     │" in out and "│ c\\u202e   │" in out


def test_exported_pages_are_escaped_too(evil, cli):
    for suffix in (".html", ".svg", ".md"):
        page = evil / f"page{suffix}"
        code, out, err = cli("explain", str(evil / "pack" / "evil.yaml"), "--export", str(page))
        assert code == 0 and out == "" and unsafe(err) == []
        text = page.read_text(encoding="utf-8")
        assert unsafe(text) == [], suffix
        assert "<script>" not in text  # HTML and SVG escape it, Markdown backslash-escapes it


def test_stored_rows_are_shown_escaped(cli):
    code, _, _ = cli("practice", "single-head-3x4", "--steps", "scaled", input="2 4 4; 4 8 8; 4 8 8\nquit\n")
    assert code == 0
    store = Path(os.environ["ATTN_TUTOR_HOME"]) / "progress.sqlite3"
    conn = sqlite3.connect(store)
    with conn:  # what another program, or a damaged copy, may have left in the rows
        conn.execute("UPDATE answers SET step = 'sc\x1b[5maled', diagnosis = 'k\x1b]0;X\x07', "
                     "diagnosis_text = 'msg \x1b[2J \u202e \x9b1m', exercise = 'ex\x1b[2J'")
        conn.execute("UPDATE mistakes SET key = 'key \x1b[2J \u202e \x9b1m'")
    conn.close()
    code, out, err = cli("stats")
    assert code == 0 and unsafe(out + err) == []
    assert "sc\\x1b[5maled" in out and "key \\x1b[2J \\u202e \\x9b1m" in out and "ex\\x1b[2J" in out
    code, out, err = cli("stats", "--format", "json")
    assert code == 0 and unsafe(out + err) == [] and out.isascii()
    assert json.loads(out)["steps"][0]["step"] == "sc\x1b[5maled"  # JSON escapes it, and reads back exactly


def test_a_typed_answer_is_echoed_and_quoted_escaped(cli):
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q", input="1 \x1b]0;x\x07 1; 2 2; 2 2\n\x9b2J\nquit\n")
    assert code == 0 and unsafe(out + err) == []
    assert "\\x1b]0;x\\x07" in out


def test_a_real_terminal_with_colour_gets_colour_and_nothing_else(tmp_path):
    """In a pseudo-terminal, colours on: SGR colour codes pass, a title, a screen clear or a link never do."""
    pexpect = pytest.importorskip("pexpect")
    path = hostile_exercise(tmp_path / "evil.yaml", EVIL_TITLE, EVIL_DESCRIPTION, EVIL_TOKENS, "evil")
    env = {**os.environ, "TERM": "xterm-256color", "FORCE_COLOR": "1"}
    env.pop("NO_COLOR", None)
    transcript = pexpect.run(f"{sys.executable} -m tutor explain {path}", env=env, cwd=str(REPO), timeout=120)
    assert b"\x1b[" in transcript  # colour is on
    sequences = set(re.findall(rb"\x1b(?:\[[0-9;:?]*[A-Za-z]|\]|.)", transcript))
    assert {q[-1:] for q in sequences} == {b"m"}, sequences  # SGR only
    assert "\u202e".encode() not in transcript and b"\x9b" not in transcript and b"\x07" not in transcript


def test_error_messages_quote_file_names_escaped(cli_process, tmp_path):
    """The one subprocess case: the error line on a real stderr, and a file name that is not UTF-8."""
    bad = tmp_path / os.fsdecode(b"bad\xff\x1b[2J.yaml")
    bad.write_text("id: [\n", encoding="utf-8")
    r = cli_process("validate", str(bad))
    assert r.code == 2 and b"Traceback" not in r.stderr
    out = (r.stdout + r.stderr).decode("utf-8")
    assert unsafe(out) == [] and "bad\\xff\\x1b[2J.yaml" in out
    r = cli_process("explain", str(tmp_path / "x\x1b]0;t\x07.yaml"))
    assert r.code == 2 and unsafe(r.stderr.decode()) == [] and "x\\x1b]0;t\\x07.yaml" in r.stderr.decode()


# --- D.9: the fuzz over every command and format ------------------------------------------------------

FUZZ_EXAMPLES = int(os.environ.get("ATTN_TUTOR_FUZZ", "3"))
PLAIN = ["a", "Z", "1", " ", "é", "√", "中", "-", "_", "*", "<", ">", "&", "[", "]", "`", "$", "#", "|", "\\", "\"", "'"]


def fuzz_text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(HOSTILE) if rng.random() < 0.35 else rng.choice(PLAIN) for _ in range(n)) or "x"


@pytest.mark.parametrize("seed", range(FUZZ_EXAMPLES))
def test_fuzzed_text_through_every_command_and_format(seed, tmp_path, cli):
    """Random control, bidi and Markdown/HTML characters in title, description, tokens, a solution's
    title/source, a pack's file name and the typed answers: no traceback, documented exit codes, and
    not one raw control character on stdout, stderr or in an exported page.
    (``ATTN_TUTOR_FUZZ=500`` runs more.)"""
    rng = random.Random(seed)
    pack = tmp_path / "pack"
    pack.mkdir()
    tokens = [fuzz_text(rng, rng.randint(1, 6)) + str(i) for i in range(3)]
    ex = hostile_exercise(pack / "ex.yaml", fuzz_text(rng, 30), fuzz_text(rng, 80), tokens, "fuzz")
    name = "".join(c for c in fuzz_text(rng, 6) if c not in "/\x00")
    (pack / f"{name}.yaml").write_text(f"id: {yaml_str(fuzz_text(rng, 5))}\n", encoding="utf-8")
    sol = tmp_path / "sol.yaml"
    sol.write_text(f"exercise: pack/ex.yaml\ntitle: {yaml_str(fuzz_text(rng, 20))}\nsource: {yaml_str(fuzz_text(rng, 20))}\n"
                   "q: [[1], [0], [1]]\nscores: [[1, 0, 2], [0, 0, 0], [1, 0, 9]]\n", encoding="utf-8")
    answers = "\n".join(fuzz_text(rng, 8) for _ in range(3)) + "\n1; 0; 1\nshow\nquit\n"
    commands = [
        (["explain", str(ex)], {0}), (["explain", str(ex), "--format", "json"], {0}),
        (["explain", str(ex), "--format", "markdown"], {0}), (["explain", str(ex), "--format", "html"], {0}),
        (["explain", str(ex), "--blank"], {0}), (["list", "--exercises", str(pack)], {0}),
        (["list", "--exercises", str(pack), "--format", "json"], {0}), (["validate", str(pack)], {2}),
        (["validate", str(pack), "--format", "json"], {2}), (["check", str(sol)], {1}),
        (["check", str(sol), "--format", "json"], {1}), (["practice", str(ex), "--steps", "q,k"], {0}),
        (["stats"], {0}), (["stats", "--format", "json"], {0}),
    ]
    for argv, codes in commands:
        code, out, err = cli(*argv, input=answers if argv[0] == "practice" else None)
        assert code in codes, (argv, out, err)
        assert "Traceback" not in err
        assert unsafe(out) == [] and unsafe(err) == [], argv
        if argv[-1] == "json":
            json.loads(out)
    for suffix in (".html", ".svg", ".md"):
        page = tmp_path / f"page{suffix}"
        code, _, err = cli("explain", str(ex), "--export", str(page))
        assert code == 0 and unsafe(page.read_text(encoding="utf-8")) == [] and unsafe(err) == []


# --- D.11: Markdown handouts -------------------------------------------------------------------------


def test_markdown_handout_shows_a_hostile_title_and_tokens_as_text(evil, cli):
    code, out, _ = cli("explain", str(evil / "pack" / "evil.yaml"), "--format", "markdown")
    assert code == 0
    title = out.splitlines()[0]
    assert title.startswith("# ") and "<script>" not in title
    assert "\\<script\\>alert(1)\\</script\\>" in title
    assert "Rows of X: a\\\\x1b\\[31m, b\\\\x9b, c\\\\u202e." in out  # the escapes' backslashes escaped once more
    description = next(line for line in out.splitlines() if line.startswith("desc "))
    assert "*kept*" in description  # the description is Markdown: its emphasis stays
    assert "\\<b>bold\\</b> \\&" in description and "<b>" not in description.replace("\\<b>", "")


@pytest.mark.parametrize(("title", "rendered"), [
    ("<img src=x onerror=alert(1)>", "\\<img src=x onerror=alert(1)\\>"),
    ("[click](javascript:alert(1))", "\\[click\\](javascript:alert(1))"),
    ("`<script>", "\\`\\<script\\>"),  # an unmatched backtick opens no code span
    ("$\\frac{1}{0}$ ~~gone~~ | cell | &amp; #tag", "\\$\\\\frac{1}{0}\\$ \\~\\~gone\\~\\~ \\| cell \\| \\&amp; \\#tag"),
    # a title is plain text, as on the terminal and the HTML page (<h1>run `attn-tutor list` now</h1>): its
    # backticks are shown, never a code span (a variant's title holds a student id, which may have one)
    ("run `attn-tutor list` now", "run \\`attn-tutor list\\` now"),
    ("- not a list", "\\- not a list"),
])
def test_markdown_escapes_every_character_that_would_start_markup(tmp_path, cli, title, rendered):
    path = hostile_exercise(tmp_path / "t.yaml", title, "", ["t1", "t2", "t3"])
    code, out, _ = cli("explain", str(path), "--format", "markdown")
    assert code == 0 and out.splitlines()[0] == "# " + rendered


def test_html_page_escapes_the_title_and_the_body(evil, cli):
    code, out, _ = cli("explain", str(evil / "pack" / "evil.yaml"), "--format", "html")
    assert code == 0 and "<script>" not in out
    assert "<title>Evil \\x1b]0;pwned\\x07\\x1b[2J &lt;script&gt;" in out


# --- E.13: streams that are not UTF-8 -----------------------------------------------------------------


HUMAN = [  # (argv, exit code): output for people, transliterated on an ASCII stream
    (["explain", "single-head-3x4"], 0), (["explain", "two-head-causal-3x4", "--blank"], 0), (["list"], 0),
    (["check", BLOG], 1), (["stats"], 0), (["validate", "{cyrillic}"], 2), (["validate", "{evil}"], 0),
    (["--help"], 0), (["explain", "--help"], 0), (["practice", "--help"], 0), (["check", "--help"], 0),
    (["--version"], 0), (["explain", "{nonascii_missing}"], 2),
    (["practice", "single-head-3x4", "--steps", "scaled,weights"], 0),  # piped: 2 4 4; ... wrong, then show, quit
]
PRACTICE_INPUT = "2 4 4; 4 8 8; 4 8 8\nshow\nhint\nhint\nshow\n"
DOCUMENTS = [  # (argv, exit code): machine-readable, UTF-8 bytes whatever the stream
    (["explain", "single-head-3x4", "--format", "markdown"], 0), (["explain", "single-head-3x4", "--format", "html"], 0),
    (["explain", "single-head-3x4", "--format", "json"], 0), (["stats", "--format", "json"], 0),
    (["list", "--format", "json"], 0), (["check", BLOG, "--format", "json"], 1), (["schema"], 0),
    (["new", "--seed", "1", "--title", "Caf\u00e9 \u221a"], 0), (["validate", "{cyrillic}", "--format", "json"], 2),
    (["explain", "{evil}", "--format", "markdown"], 0),
]


def run_on_stream(argv: list[str], encoding: str | None, variables: dict[str, str], *,
                  stdin: str = "") -> tuple[int, bytes, bytes]:
    """``main(argv)`` with stdout and stderr real text streams of ``encoding`` (None: closed, as after ``>&-``),
    under ``variables``."""
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = None if encoding is None else io.TextIOWrapper(out_bytes, encoding=encoding, errors="strict", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding=encoding or "utf-8", errors="backslashreplace", write_through=True)
    saved = sys.stdout
    if out is None:
        sys.stdout = None  # what Python makes of a closed fd 1
    try:
        code = main(argv, env=Env.from_environ(variables, stdin=io.StringIO(stdin), stdout=out, stderr=err))
    finally:
        sys.stdout = saved
        for stream in (out, err):
            if stream is not None:
                stream.flush()
                stream.detach()  # the bytes stay readable
    return code, out_bytes.getvalue(), err_bytes.getvalue()


@pytest.fixture
def variables(variables, tmp_path):
    """A progress store with a non-ASCII path (:func:`stream_files` puts answers in it)."""
    return {**variables, "ATTN_TUTOR_HOME": str(tmp_path / "h\u00f6m\u00e9")}


@pytest.fixture
def stream_files(tmp_path, cli) -> dict[str, str]:
    """A store with answers (and a non-ASCII path), a file with a non-ASCII key, a hostile exercise."""
    cli("practice", "single-head-3x4", "--steps", "scaled", input="2 4 4; 4 8 8; 4 8 8\nquit\n")
    cyrillic = tmp_path / "cyr.yaml"
    cyrillic.write_text((EXERCISES / "single-head-3x4.yaml").read_text() + "\u0445: 1\n", encoding="utf-8")
    evil = hostile_exercise(tmp_path / "evil.yaml", EVIL_TITLE, EVIL_DESCRIPTION, EVIL_TOKENS, "evil")
    return {"cyrillic": str(cyrillic), "evil": str(evil), "nonascii_missing": str(tmp_path / "n\u00e4\u221a.yaml")}


@pytest.mark.parametrize("encoding", ["ascii", "cp1252"])
@pytest.mark.parametrize(("argv", "expected"), HUMAN, ids=lambda a: " ".join(a) if isinstance(a, list) else str(a))
def test_every_command_for_people_on_a_narrow_encoding(argv, expected, encoding, stream_files, variables):
    args = [a.format(**stream_files) for a in argv]
    code, out, err = run_on_stream(args, encoding, variables, stdin=PRACTICE_INPUT)
    assert code == expected, err
    assert b"Traceback" not in err
    text = out.decode(encoding) + err.decode(encoding)  # strict: every byte is of the stream's encoding
    assert unsafe(text) == []
    if encoding == "ascii":
        assert out.isascii() and err.isascii()
    assert out or err


@pytest.mark.parametrize("encoding", ["ascii", "cp1252"])
@pytest.mark.parametrize(("argv", "expected"), DOCUMENTS, ids=lambda a: " ".join(a) if isinstance(a, list) else str(a))
def test_every_document_is_utf8_whatever_the_stream(argv, expected, encoding, stream_files, variables):
    args = [a.format(**stream_files) for a in argv]
    code, out, err = run_on_stream(args, encoding, variables)
    utf_code, utf_out, _ = run_on_stream(args, "utf-8", variables)
    assert (code, utf_code) == (expected, expected) and b"Traceback" not in err
    assert out == utf_out  # the same document, byte for byte
    text = out.decode("utf-8")
    assert unsafe(text) == []
    if "json" in argv or argv[0] == "schema":
        json.loads(text)
        assert out.isascii()


def test_a_square_root_sign_typed_on_an_ascii_stream_says_to_type_ascii(cli_process, tmp_path):
    """√ on an ASCII stdin arrives as bytes the stream cannot decode: the learner is told why, and what to type."""
    env = {"PYTHONIOENCODING": "ascii", "ATTN_TUTOR_HOME": str(tmp_path)}
    r = cli_process("practice", "single-head-3x4", "--steps", "scaled", input="√2 2√2 2√2\nquit\n".encode(), env=env)
    assert r.code == 0, r.stderr
    out = " ".join(r.stdout.decode("ascii").split())  # ASCII only, and the message's words whatever the wrapping
    assert "could not decode at column 1" in out and "type answers in ASCII, such as sqrt(2) and -inf" in out


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, {"PYTHONIOENCODING": "cp1252"},
                                 {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}],
                         ids=["ascii", "cp1252", "C-locale"])
def test_the_inputs_of_the_issue_on_real_streams(cli_process, env, tmp_path):
    """E.13 as filed: markdown, html, stats json, validate of a non-ASCII key, --help, explain at 20 columns."""
    home = tmp_path / "h\u00f6me"
    store_env = {**env, "ATTN_TUTOR_HOME": str(home)}
    r = cli_process("practice", "single-head-3x4", "--steps", "scaled", input=b"2 4 4; 4 8 8; 4 8 8\nquit\n", env=store_env)
    assert r.code == 0, r.stderr
    bad_key = tmp_path / "key.yaml"
    bad_key.write_text((EXERCISES / "single-head-3x4.yaml").read_text() + "\u0445: 1\n", encoding="utf-8")
    cases = [
        (["explain", "single-head-3x4", "--format", "markdown"], 0, "utf-8"),
        (["explain", "single-head-3x4", "--format", "html"], 0, "utf-8"),
        (["stats", "--format", "json"], 0, "ascii"),
        (["validate", str(bad_key)], 2, "ascii"),
        (["--help"], 0, "ascii"),
        (["explain", "two-head-causal-3x4", "--precision", "12"], 0, "ascii"),
    ]
    stream = "cp1252" if env.get("PYTHONIOENCODING") == "cp1252" else "ascii"
    for argv, expected, decodes in cases:
        r = cli_process(*argv, env={"COLUMNS": "20", **store_env})
        assert r.code == expected and b"Traceback" not in r.stderr, (argv, r.stderr)
        r.stdout.decode(decodes if decodes == "utf-8" else stream)  # strict: raises on a byte of another encoding
        r.stderr.decode(stream)
        assert unsafe(r.stdout.decode("utf-8", "replace")) == []
    r = cli_process("stats", "--format", "json", env=store_env)
    if "LC_ALL" not in env:  # in the C locale the file name itself is undecodable bytes
        assert json.loads(r.stdout)["store"] == str(home / "progress.sqlite3")


# --- E.14: closed and unwritable streams -----------------------------------------------------------------


STDOUT_COMMANDS = [
    ["explain", "single-head-3x4"], ["explain", "single-head-3x4", "--format", "json"],
    ["explain", "single-head-3x4", "--format", "markdown"], ["explain", "single-head-3x4", "--format", "html"],
    ["list"], ["list", "--format", "json"], ["check", BLOG], ["check", BLOG, "--format", "json"], ["stats"],
    ["stats", "--format", "json"], ["schema"], ["new", "--seed", "1"], ["validate", str(DATA / "malformed.yaml")],
    ["validate", str(DATA / "malformed.yaml"), "--format", "json"], ["--version"], ["--help"], ["explain", "--help"],
]
CLOSED = "error: cannot write the output: standard output is closed\n"


@pytest.mark.parametrize("argv", STDOUT_COMMANDS, ids=" ".join)
def test_a_closed_stdout_is_one_error_line_and_exit_2(argv, variables):
    code, _, err = run_on_stream(argv, None, variables)
    assert (code, err.decode()) == (2, CLOSED)


def test_practice_with_a_closed_stdout_stops_before_the_store_is_written(variables):
    code, _, err = run_on_stream(["practice", "single-head-3x4"], None, variables, stdin="1 1; 2 2; 2 2\n")
    assert (code, err.decode()) == (2, CLOSED)
    store = Path(os.environ["ATTN_TUTOR_HOME"]) / "progress.sqlite3"
    if store.exists():
        conn = sqlite3.connect(store)
        assert conn.execute("SELECT COUNT(*) FROM answers").fetchone() == (0,)
        conn.close()


@pytest.mark.parametrize("argv", [["explain", "single-head-3x4", "--format", "json"], ["explain", "single-head-3x4",
                                  "--format", "markdown"], ["schema"], ["new", "--seed", "3"], ["--version"],
                                  ["validate", "tests/data/check/malformed.yaml"], ["explain", "single-head-3x4"]],
                         ids=" ".join)
def test_closed_stdout_in_a_real_process(cli_process, argv):
    r = cli_process(*argv, redirect=">&-")
    assert r.code == 2
    assert r.stderr.decode() == CLOSED


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["explain", "single-head-3x4", "--format", "markdown"],
                                  ["check", BLOG], ["new", "--seed", "2"]], ids=" ".join)
def test_a_full_disk_is_one_error_line_and_exit_2(argv):
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "tutor", *argv], stdout=full, stderr=subprocess.PIPE, cwd=REPO,
                           timeout=180, check=False)
    assert r.returncode == 2
    assert r.stderr.decode() == "error: cannot write the output: the disk is full (no space left on the device)\n"


@pytest.mark.parametrize(("argv", "expected"), [
    (["explain", "no-such-exercise"], 2), (["check", BLOG], 1), (["check", CLASSIC_SOLUTION], 0),
    (["validate", str(DATA / "malformed.yaml")], 2), (["explain", "--format", "xml", "single-head-3x4"], 2),
    (["list", "--exercises", str(DATA)], 0),
])
def test_a_closed_stderr_keeps_the_exit_code(cli_process, argv, expected):
    r = cli_process(*argv, redirect="2>&- >/dev/null")
    assert r.code == expected


def test_practice_with_a_closed_stdout_asks_nothing_and_records_nothing(cli_process, tmp_path):
    env = {"ATTN_TUTOR_HOME": str(tmp_path)}
    r = cli_process("practice", "single-head-3x4", "--steps", "q", input=b"1 1; 2 2; 2 2\n", redirect=">&-", env=env)
    assert r.code == 2 and r.stderr.decode() == CLOSED
    r = cli_process("stats", "--format", "json", env=env)
    assert r.code == 0 and json.loads(r.stdout)["answers"] == 0


def test_a_closed_descriptor_is_never_reused_by_a_file_opened_later(tmp_path):
    """With ``>&-`` the next file opened (the progress store) would get fd 1, the number of standard output."""
    code = ("import os, sys; from tutor.cli.streams import plug_closed_descriptors; plug_closed_descriptors(); "
            f"f = open({str(tmp_path / 'store')!r}, 'w'); os.write(2, str(f.fileno()).encode())")
    r = subprocess.run(["sh", "-c", 'exec "$@" >&- <&-', "sh", sys.executable, "-c", code], capture_output=True,
                       cwd=REPO, timeout=60, check=False)
    assert r.returncode == 0 and int(r.stderr) > 2


# --- E.15 and E.16: widths -------------------------------------------------------------------------------


DECIMAL = re.compile(r"[−-]?\d+\.\d+")


#: A table's top and bottom borders (rich's rounded box, or its ASCII one): a line that is a lone "+" (a
#: formula's operator wrapped at 20 columns) is none.
_BORDER_TOP = re.compile(r"╭[─┬]*╮|\+[-+]*-[-+]*\+")
_BORDER_BOTTOM = re.compile(r"╰[─┴]*╯|\+[-+]*-[-+]*\+")


def reading_streams(text: str) -> list[str]:
    """The text as it is read: each table column top to bottom, each run of other lines, pieces joined.

    A number folded over lines (in a cell, or at the end of a paragraph)
    reads whole again; a number cut or ended with an ellipsis does not.
    """
    streams: list[str] = []
    lines = text.splitlines()
    columns: dict[int, list[str]] = {}
    paragraph: list[str] = []
    in_table = False
    for line in lines + [""]:
        s = line.strip()
        if not in_table and _BORDER_TOP.fullmatch(s):
            in_table, columns = True, {}
            streams.append("".join(paragraph))
            paragraph = []
            continue
        if in_table:
            if _BORDER_BOTTOM.fullmatch(s):
                in_table = False
                streams += ["".join(c) for c in columns.values()]
            elif s[:1] in ("│", "|"):
                for k, cell in enumerate(re.split(r"[│|]", s)[1:-1]):
                    columns.setdefault(k, []).append(cell.strip())
            continue
        if s:
            paragraph.append(s)
        else:
            streams.append("".join(paragraph))
            paragraph = []
    return streams


def assert_numbers_whole(wide: str, narrow: str, width: int) -> None:
    assert narrow.count("…") == wide.count("…") and narrow.count("...") == wide.count("...")  # no ellipsis of rich's
    assert max(cell_len(line) for line in narrow.splitlines()) <= width
    streams = reading_streams(narrow)
    missing = [n for n in dict.fromkeys(DECIMAL.findall(wide)) if not any(n in s for s in streams)]
    assert missing == []


def rendered(cli, columns: int, *argv: str, stdin: str | None = None) -> tuple[int, str]:
    code, out, err = cli(*argv, input=stdin, env={"COLUMNS": str(columns)})
    assert "Traceback" not in err
    return code, out


_WIDE: dict[tuple[str, ...], str] = {}


@pytest.mark.parametrize("width", [20, 35, 60])
@pytest.mark.parametrize("exercise", ["two-head-fused-3x4", "two-head-causal-3x4", "padding-4x2"])
@pytest.mark.parametrize("precision", [4, 12])
def test_explain_never_cuts_a_number(cli, width, exercise, precision):
    key = ("explain", exercise, "--precision", str(precision))
    if key not in _WIDE:
        _WIDE[key] = rendered(cli, 400, *key)[1]
    wide = _WIDE[key]
    code, narrow = rendered(cli, width, "explain", exercise, "--precision", str(precision))
    assert code == 0
    assert_numbers_whole(wide, narrow, width)
    assert "Exact entries:" in narrow


@pytest.mark.parametrize("width", [20, 35, 60])
@pytest.mark.parametrize("solution", ["blog-single-head-3x4.yaml", "homework-no-scaling.yaml",
                                      "two-head-causal-mask-zero.yaml"])
def test_the_check_report_follows_the_width(cli, monkeypatch, width, solution):
    monkeypatch.chdir(DATA)
    _, wide = rendered(cli, 400, "check", solution)
    code, narrow = rendered(cli, width, "check", solution)
    assert code == 1
    assert_numbers_whole(wide, narrow, width)
    if width >= 35:  # wrapped between words: every word of the report is still whole
        assert [w for w in wide.split() if w not in narrow.split()] == []


def test_practice_at_twenty_columns_never_cuts_a_number(cli):
    answers = "2 4 4; 4 8 8; 4 8 8\n" + "show\n" * 8
    argv = ("practice", "two-head-causal-3x4", "--steps", "scaled,masked,weights,head_output,output", "--head", "1")
    _, wide = rendered(cli, 400, *argv, stdin=answers)
    code, narrow = rendered(cli, 20, *argv, stdin=answers)
    assert code == 0
    assert_numbers_whole(wide, narrow, 20)


COLUMN_COMMANDS = [
    (["explain", "single-head-3x4"], None, 0), (["explain", "two-head-causal-3x4", "--blank"], None, 0),
    (["list"], None, 0), (["check", BLOG], None, 1), (["stats"], None, 0),
    (["practice", "single-head-3x4"], "1 1; 2 2; 2 2\n1 1; 9 9; 2 2\nhint\nhint\nshow\nquit\n", 0),
    (["practice", "single-head-3x4", "--mode", "entry"], "1\nx\nshow\nquit\n", 0), (["--help"], None, 0),
]


@pytest.mark.parametrize("columns", ["0", "1", "5", "19"])
@pytest.mark.parametrize(("argv", "stdin", "expected"), COLUMN_COMMANDS, ids=lambda a: " ".join(a) if isinstance(a, list) else "")
def test_any_columns_value_is_clamped_to_the_narrowest_layout(cli, columns, argv, stdin, expected):
    before = dict(os.environ)
    code, out, err = cli(*argv, input=stdin, env={"COLUMNS": columns})
    assert code == expected and "Traceback" not in err
    assert len(out.strip()) > 100  # the output is there, not lost at width 0
    lines = out.splitlines()
    if argv[0] != "--help":  # typer lays its help out itself
        assert max(cell_len(line) for line in lines) <= 20 or argv[0] == "stats"  # stats copies a command whole
        assert "…" not in out
    assert dict(os.environ) == before  # the process's environment: never changed


def test_practice_in_a_ten_column_terminal():
    """A real pseudo-terminal ten columns wide, no COLUMNS: the layout is clamped, the session works."""
    pexpect = pytest.importorskip("pexpect")
    from .ptys import answer, spawn

    child = spawn("practice", "single-head-3x4", "--steps", "q", dimensions=(50, 10), timeout=120)
    answer(child, "Q> ", "1 1; 2 2; 2 2")
    child.expect_exact("Session complete.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and "Traceback" not in child.before


# --- the README's promises, as a user's shell runs them ---------------------------------------------------


def test_readme_ascii_streams_work_for_every_command(cli_encoded, tmp_path):
    """"on ASCII-only streams (`PYTHONIOENCODING=ascii`: `√` becomes `sqrt`, box drawing becomes `+-|`)".

    On the streams Python makes of that variable, in this process; that a real process gets them
    is shown above (the inputs of the issue on real streams)."""
    env = {"ATTN_TUTOR_HOME": str(tmp_path), "COLUMNS": "80"}
    r = cli_encoded("practice", "single-head-3x4", "--steps", "scaled", input=b"2 4 4; 4 8 8; 4 8 8\nquit\n",
                    encoding="ascii", env=env)
    assert r.code == 0 and r.stdout.isascii() and "sqrt(d_k)" in r.stdout.decode()
    for argv, expected in [(["explain", "single-head-3x4"], 0), (["check", BLOG], 1), (["stats"], 0), (["list"], 0),
                           (["--help"], 0), (["practice", "--help"], 0), (["validate", "exercises"], 0)]:
        r = cli_encoded(*argv, encoding="ascii", env=env, cwd=REPO)
        assert r.code == expected and r.stdout.isascii() and r.stderr.isascii(), (argv, r.stderr)
        assert b"Traceback" not in r.stderr
    r = cli_encoded("explain", "single-head-3x4", encoding="ascii", env=env)
    assert "+----" in r.stdout.decode() and "sqrt(2)" in r.stdout.decode()
    for fmt in ("markdown", "html", "json"):  # documents: UTF-8 (JSON: ASCII), as a file of the format is read
        r = cli_encoded("explain", "single-head-3x4", "--format", fmt, encoding="ascii", env=env)
        assert r.code == 0 and b"Traceback" not in r.stderr
        assert r.stdout.isascii() if fmt == "json" else "√" in r.stdout.decode("utf-8")


def test_readme_narrow_terminals_never_cut_numbers(cli):
    """"in narrow terminals (wide tables are split into column groups; numbers are never cut)"."""
    wide = cli("explain", "two-head-fused-3x4", "--precision", "12", env={"COLUMNS": "200"})
    narrow = cli("explain", "two-head-fused-3x4", "--precision", "12", env={"COLUMNS": "24"})
    assert narrow.code == 0
    assert "(column 1 of" in narrow.out
    assert_numbers_whole(wide.out, narrow.out, 24)

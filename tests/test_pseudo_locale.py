"""The pseudo-locale (issue 22, item 4): every template's letters made full-width, run over the golden transcripts.

A pseudo-language is English with each letter of every catalogue template
turned into its full-width form (``ａ``, two terminal cells), fields and code
spans left as they are; the bundled exercises and the concept bank get the
same treatment.  Run under it, the golden transcripts (every bundled
exercise's forward, backward and tiled pass as text and Markdown, a practice
session, the tiled practice, the drills and the mock interview, validate,
new, list, stats, schema, the code katas, every help) show

- **untranslated text**: a run of plain English words can only come from
  code that bypasses the catalogue (the exercise's own data is pseudo too;
  token labels, code, commands and YAML keys are allowed), and
- **a column out of line**: a table whose rules and bars are not at the same
  cells on every line, or a line wider than the terminal, is a width measured
  in characters, not cells (a Chinese character is two cells wide, as is ``ａ``).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator

import pytest
from rich.cells import cell_len

from tutor.base.messages import CATALOGS, EN

from .conftest import BLOCK_BUNDLED, EXERCISES

FULL_WIDTH = {c: chr(ord(c) + 0xFEE0) for c in string.ascii_letters}


def _wide(text: str) -> str:
    """``text``'s letters full-width, except in `code spans`."""
    return "".join(p if p.startswith("`") else "".join(FULL_WIDTH.get(c, c) for c in p)
                   for p in re.split(r"(`[^`]*`)", text))


def pseudo(template: str) -> str:
    """``template`` with its letters full-width, its ``{fields}`` (and literal ``{{ }}``) and `code spans` as they are.

    >>> pseudo("the {n:rows} of `attn-tutor {cmd}` to be {{cases}}")
    'ｔｈｅ {n:rows} ｏｆ `attn-tutor {cmd}` ｔｏ ｂｅ {{ｃａｓｅｓ}}'
    """
    out = []
    for piece in re.split(r"(`[^`]*`)", template):
        if piece.startswith("`"):
            out.append(piece)
            continue
        for literal, name, spec, conv in string.Formatter().parse(piece):
            out.append(_wide(literal).replace("{", "{{").replace("}", "}}"))
            if name is not None:
                out.append("{" + name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}")
    return "".join(out)


def pseudo_text(text: str) -> str:
    """Data (a title, a question): letters full-width, except in `code spans`."""
    return _wide(text)


@pytest.fixture
def speak_pseudo(monkeypatch):
    """The pseudo-language ``pseudo`` registered, with the exercises' and the bank's words in it too."""
    from tutor.drills import bank
    from tutor.exercise import record

    monkeypatch.setitem(CATALOGS, "pseudo", {key: pseudo(text) for key, text in EN.items()})
    monkeypatch.setattr(record.Exercise, "local_title", property(lambda ex: pseudo_text(ex.title)))
    monkeypatch.setattr(record.Exercise, "local_description", property(lambda ex: pseudo_text(ex.description)))
    english = bank.ConceptQuestion.in_language

    def in_pseudo(q, lang):
        q = english(q, "en")
        return q.model_copy(update=dict(
            question=pseudo_text(q.question), model_answer=pseudo_text(q.model_answer),
            short_answer=pseudo_text(q.short_answer), key_points=[pseudo_text(k) for k in q.key_points],
            choice_answer=pseudo_text(q.choice_answer) if q.choice_answer else None,
            wrong_answers=[bank.WrongAnswer(answer=pseudo_text(w.answer), why=pseudo_text(w.why))
                           for w in q.wrong_answers]))

    monkeypatch.setattr(bank.ConceptQuestion, "in_language", in_pseudo)


def _labels() -> set[str]:
    """The token labels of the bundled exercises (data, in no language), and words every language writes as is."""
    from tutor.answers.grammar import CONSTANTS, FUNCTIONS
    from tutor.exercise.catalog import bundled

    out = {"True", "False", "true", "false", "PAD", "none", "causal", "inf", *FUNCTIONS, *CONSTANTS}  # the answers' names
    for ex in bundled():  # read as attn-tutor reads them (YAML 1.2: the token "on" is text)
        for labels in (ex.tokens, ex.kv_tokens, ex.past_tokens):
            out |= set(labels or ())
    return out


LABELS = _labels()
#: Two or more plain English words in a row (not inside an identifier, a path or a command).
ENGLISH = re.compile(r"(?<![\w\-./`'$\\])[A-Za-z]{2,}(?:[ ,;:]+[A-Za-z]{2,})+(?![\w\-./`'(\\])")
#: Lines that are code, a command, YAML or a JSON key: written the same in every language.
CODE = re.compile(r"torch\.|\bF\.|\bnn\.|np\.|attn-tutor |^\s*[\w\-]+: |^\s*- |^\s*\"[\w\-]+\": |^\s*#|def |import |raise ")


def untranslated(text: str) -> list[str]:
    """The runs of plain English words in ``text`` that are neither labels nor code."""
    found = []
    for line in text.splitlines():
        if CODE.search(line):
            continue
        for m in ENGLISH.finditer(re.sub(r"`[^`]*`", "", line)):
            if not all(word in LABELS for word in re.findall(r"[A-Za-z]+", m.group(0))):
                found.append(f"{m.group(0)!r} in {line.strip()[:100]!r}")
    return found


BARS = "│┃"
JOINTS = "┬┼┴╭╮╰╯├┤┌┐└┘"


def tables(text: str) -> Iterator[list[str]]:
    """The blocks of consecutive lines drawn with box characters (a table, or tables side by side)."""
    block: list[str] = []
    for line in text.splitlines() + [""]:
        if line.strip()[:1] in ("╭", "│", "├", "╰", "┌", "└", "+", "|") and re.search(r"[│┬┼┴├┤╭╮╰╯]|^\s*[+|]", line):
            block.append(line)
        else:
            if len(block) > 1:
                yield block
            block = []


def at(line: str, chars: str) -> set[int]:
    """The cells at which ``line`` has one of ``chars``."""
    out, cell = set(), 0
    for ch in line:
        if ch in chars:
            out.add(cell)
        cell += cell_len(ch)
    return out


#: A diagnostic line (``error: ...``, ``FILE:LINE:COL: ...``): one line each, never wrapped, as compilers write them.
DIAGNOSTIC = re.compile(rf"^(\S+\.ya?ml(:\d+)*: |{re.escape(pseudo('error: '))}|{re.escape(pseudo('warning: '))})")


def out_of_line(text: str, width: int | None) -> list[str]:
    """The tables with a bar at a cell where their rules have no joint (a column out of line), and the
    lines wider than ``width`` cells (``None``: a file's text, not laid out for a terminal)."""
    problems = [] if width is None else [f"{cell_len(line)} cells: {line[:60]!r}" for line in text.splitlines()
                                         if cell_len(line) > width and not DIAGNOSTIC.match(line)]
    for block in tables(text):
        joints = set().union(*(at(line, JOINTS) for line in block if "─" in line))
        if joints and any(at(line, BARS) - joints for line in block):
            problems.append("table out of line:\n" + "\n".join(block[:8]))
    return problems


BUNDLED = sorted(p.stem for p in EXERCISES.glob("*.yaml"))
EXPLAIN = [(e, view) for e in BUNDLED for view in ((), ("--backward",), ("--tiled",), ("--format", "markdown"))
           if not (view == ("--backward",) and e.startswith("mla-"))  # MLA's backward pass is refused (test_mla.py)
           and not (e in BLOCK_BUNDLED and view in (("--backward",), ("--tiled",)))]  # refused: test_prenorm_block.py


def _run(cli, *argv, input: str = "", columns: int = 100):
    return cli(*argv, "--lang", "pseudo", input=input, env={"COLUMNS": str(columns)})


@pytest.mark.parametrize(("exercise", "view"), EXPLAIN, ids=[f"{e}{''.join(v)}" for e, v in EXPLAIN])
def test_explain_has_no_untranslated_text_and_its_tables_line_up(cli, speak_pseudo, exercise, view):
    code, out, err = _run(cli, "explain", exercise, *view)
    assert (code, err) == (0, "")
    assert untranslated(out) == []
    if "--format" not in view:
        assert out_of_line(out, 100) == []


SESSIONS = {
    "practice": (("practice", "single-head-3x4"), "1 1; 2 2; 2 2\n9\nhint\nshow\nskip\n"),
    "practice-tiled": (("practice", "single-head-3x4", "--tiled", "--block-size", "1"),
                       "sqrt(2)\n1\nhint\n0.24\nshow\nskip\n"),
    "drill-shapes": (("drill", "shapes", "--seed", "11", "--count", "4"), "2 3\nshow\nb\n[3, 2]\n"),
    "drill-counts": (("drill", "counts", "--seed", "2", "--count", "4"), "12\n4\nshow\n9\n"),
    "drill-masks": (("drill", "masks", "--seed", "3", "--count", "3"), "y\nn\nshow\n"),
    "drill-concepts": (("drill", "concepts", "--seed", "1", "--count", "2"), "42\ny\nn\ny\nn\n"),
    "drill-concepts-choice": (("drill", "concepts", "--seed", "1", "--count", "2", "--mode", "choice"), "a\nb\n"),
    "drill-interview": (("drill", "interview", "--seed", "2"), "quit\n"),
    "list": (("list",), ""),
    "stats": (("stats",), ""),
    "validate": (("validate", str(EXERCISES)), ""),
    "new": (("new", "--seed", "3"), ""),
    "new-like": (("new", "--like", "two-head-causal-3x4", "--seed", "3"), ""),
    "schema": (("schema",), ""),
    "code-list": (("code", "list"), ""),
    "drill-concepts-list": (("drill", "concepts", "--list"), ""),
    "help": (("--help",), ""),
    "explain-help": (("explain", "--help"), ""),
    "practice-help": (("practice", "--help"), ""),
    "check-help": (("check", "--help"), ""),
    "code-check-help": (("code", "check", "--help"), ""),
    "unknown-exercise": (("explain", "no-such-exercise"), ""),
    # issue 24: a class graded in one run, and its report
    "check-batch": (("check", str(EXERCISES.parent / "tests" / "data" / "check")), ""),
    "report": (("report", str(EXERCISES.parent / "tests" / "data" / "check")), ""),
    "report-help": (("report", "--help"), ""),
}


@pytest.mark.parametrize("columns", [60, 120])
@pytest.mark.parametrize("session", sorted(SESSIONS))
def test_every_transcript_has_no_untranslated_text_and_stays_in_line(cli, speak_pseudo, session, columns):
    argv, typed = SESSIONS[session]
    _, out, err = _run(cli, *argv, input=typed, columns=columns)
    assert untranslated(out + err) == []
    assert out_of_line(out + err, None if session in FILES else columns) == []


#: The transcripts that are a file's text (JSON, YAML), not laid out for a terminal, or diagnostics (validate:
#: one problem per line, as compilers write them, for grep and editors): their width is not the terminal's.
FILES = {"schema", "new", "new-like", "validate"}


def test_the_checks_would_see_english_and_a_misaligned_table():
    assert untranslated("ｔｈｅ ｒｏｗ and then the row") == ["'and then the row' in 'ｔｈｅ ｒｏｗ and then the row'"]
    assert untranslated("scores[tea, like] = 1·1") == [] and untranslated("x = torch.tensor([a, b])") == []
    aligned = "╭──┬──╮\n│ａ│ b│\n╰──┴──╯"
    assert out_of_line(aligned, 80) == []
    assert out_of_line("╭──┬──╮\n│ａｂ│ b│\n╰──┴──╯", 80) != []
    assert out_of_line("╭─ Ｏｐｔｉｏｎｓ ─╮\n│ ａｂｃｄｅ <en|zh> │\n╰──────────────╯", 80) != []  # a panel's right edge
    assert out_of_line("ａ" * 41, 80) != []

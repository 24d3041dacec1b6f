"""A class's submissions graded (issue 24): the table for a terminal, the gradebook CSV, the JSON document.

Rendered from the rows of :mod:`tutor.audit.batch`; nothing here computes a
verdict.  Every verdict is a word beside its mark and colour (``✗ wrong``), so
it reads the same under ``NO_COLOR``; text from the files (a student's name,
an error quoting a path) reaches the terminal escaped.

The CSV is for a gradebook's import: UTF-8 without a byte order mark (a
reader that takes the file as plain UTF-8, Python's ``csv`` module with
``encoding="utf-8"`` among them, would read a mark as part of the first
header's name), a header row, every cell quoted, lines ended by LF (a
document on standard output carries no raw control character but the newline;
Python's csv module reads LF as it reads RFC 4180's CRLF), and one row per submission with the columns
:data:`CSV_COLUMNS` (the last, ``steps``, lists every step given with its verdict, for ``report`` to read
back; a gradebook's import maps the columns it takes).  The
score is the percentage of the exercise's steps (``steps_total``: its forward
steps, and its backward ones when the file gives any) that are right
(``steps_right``), 0 to 100 with at most two decimals (empty for an unusable
file: no grade rather than a zero); ``steps_given`` says how many the file gave.
A step is named as a student reads it, in the run's language and heads counted from 1
(``scaled (head 1)``, as the comment names it), in ``first_wrong_step`` and ``steps`` alike.
``variant_of`` names the student whose roster variant the file handed in (empty
when it is the student's own, or no roster index knows the student).
No cell holds a raw control character (each is escaped as ``\\n``, ``\\x07``
…), and a cell that a spreadsheet would run as a formula (its first character
``=``, ``+``, ``-``, ``@``, or one of them after spaces) is neutralised with
a leading ``'``, as OWASP's "CSV Injection" page advises.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..audit.batch import CORRECT, UNUSABLE, WRONG, Row, duplicates, exit_code, place_label, summary
from ..base.ascii import asciify, is_utf
from ..base.decimals import trimmed
from ..base.errors import Problem
from ..base.messages import plural, t
from ..base.textsafe import shown, spreadsheet_cell

#: The gradebook CSV's columns, in order.
CSV_COLUMNS = ("student", "exercise", "score", "steps_right", "steps_total", "steps_given", "verdict", "first_wrong_step",
               "mistakes", "comment", "variant_of", "steps")
#: What joins the keys of the ``mistakes`` cell (a key holds no ``;``).
MISTAKES_SEP = "; "


def percent(score: Fraction | None) -> str:
    """``66.67``, ``100``, ``0``: a score (0 to 1) as a percentage with at most two decimals; ``""`` for none."""
    return "" if score is None else trimmed(float(score * 100), 2)


def _words(text: object) -> str:
    return "" if text is None else str(text)


# --- JSON -------------------------------------------------------------------------------------------


def row_dict(row: Row) -> dict[str, Any]:
    """One submission as data: ``file``, ``student``, ``exercise`` (``null`` when unknown), ``verdict``
    (``correct``, ``wrong``, ``unusable``), ``exit_code`` (what ``check FILE`` exits with), ``score`` (the
    percentage of the exercise's steps that are right, ``steps_right`` of ``steps_total``; ``null`` for an
    unusable file), ``steps_given`` (how many the file gave), ``variant_of`` (``{"student", "own"}``: whose
    roster variant the file handed in and the student's own, ``null`` for a student the roster does not know;
    ``null`` when none), ``roster`` (``{"kind", "owner", "own", "like"}``: why a roster index made the file wrong,
    :func:`tutor.audit.batch.judge_copy`; ``null`` when it did not), ``first_wrong`` (the step's place in the file, ``heads[1].weights``, or ``null``),
    ``warnings`` (the file's, as ``check FILE --format json`` lists them), ``mistakes`` (each ``{"key", "step"}``: the mistake and the step id it was named at), ``steps`` (every item
    given, ``{"step": place, "verdict"}``), ``comment`` (the sentence for the student) and ``errors`` (an unusable file's
    lines, else ``[]``)."""
    score = row.score
    return {
        "file": row.file,
        "student": row.student,
        "exercise": row.exercise,
        "verdict": row.verdict,
        "exit_code": row.exit_code,
        "score": None if score is None else float(percent(score)),
        "steps_right": row.right,
        "steps_total": row.out_of,
        "steps_given": row.given,
        "variant_of": None if row.variant_of is None else {"student": row.variant_of[0], "own": row.variant_of[1] or None},
        "roster": None if row.copy is None else row.copy.as_dict(),
        "first_wrong": row.first_wrong,
        "mistakes": [{"key": k, "step": s} for k, s in zip(row.mistakes, row.mistake_steps, strict=True)],
        "steps": [{"step": place, "verdict": CORRECT if ok else WRONG} for place, ok in row.steps],
        "comment": _words(row.comment),
        "errors": [line for line in str(row.error).splitlines() if line.strip()] if row.error is not None else [],
        "warnings": [{"file": p.file, "line": p.line, "column": p.column, "field": p.field, "message": p.message,
                      "hint": p.hint} for p in row.warnings],
    }


def problem_dict(p: Problem) -> dict[str, Any]:
    """A warning as ``check``'s JSON lists them: ``file``, ``line``, ``column``, ``field``, ``message``, ``hint``."""
    return {"file": p.file, "line": p.line, "column": p.column, "field": p.field, "message": _words(p.message),
            "hint": _words(p.hint)}


def batch_document(rows: Sequence[Row], warnings: Sequence[Problem] = ()) -> dict[str, Any]:
    """``{"submissions": [row_dict, ...], "summary": {"submissions", "correct", "wrong", "unusable",
    "exit_code"}, "duplicates": [{"student", "files"}], "warnings": [problem_dict, ...]}``: the JSON of ``check``
    over several files or a folder; ``duplicates`` the students who handed in more than one file (each file is
    still a row); ``warnings`` those of the run, not of one file (a roster index that could not be read)."""
    return {"submissions": [row_dict(r) for r in rows], "summary": {**summary(rows), "exit_code": exit_code(rows)},
            "duplicates": [{"student": s, "files": list(f)} for s, f in duplicates(rows)],
            "warnings": [problem_dict(p) for p in warnings]}


# --- CSV --------------------------------------------------------------------------------------------


def steps_cell(row: Row) -> str:
    """``q:correct; weights (head 2):wrong``: every item given and its verdict (what ``report`` reads back),
    heads counted from 1 (:func:`tutor.audit.batch.place_label`)."""
    return MISTAKES_SEP.join(f"{_words(place_label(place))}:{CORRECT if ok else WRONG}" for place, ok in row.steps)


def csv_text(rows: Sequence[Row]) -> str:
    """The gradebook CSV (see the module's docstring): a header row of :data:`CSV_COLUMNS`, one row per submission."""
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in rows:
        counts = ("", "", "") if r.verdict == UNUSABLE else (str(r.right), str(r.out_of), str(r.given))
        writer.writerow([spreadsheet_cell(c) for c in (r.student, r.exercise or "", percent(r.score), *counts, r.verdict,
                                                 _words(place_label(r.first_wrong or "")), MISTAKES_SEP.join(r.mistakes), _words(r.comment),
                                                 r.variant_of[0] if r.variant_of else "", steps_cell(r))])
    return out.getvalue()


# --- the terminal -----------------------------------------------------------------------------------

#: The fewest columns the comment column is given in the table; with less, each submission is a line and its comment below.
MIN_COMMENT = 24
_STYLE = {CORRECT: "green", WRONG: "red", UNUSABLE: "yellow"}


def verdict_word(verdict: str) -> str:
    """``✓ correct``, ``✗ wrong``, ``! unusable``: a verdict as a mark and a word, in the language of the run."""
    return t(f"batch.verdict.{verdict}")


def steps_words(row: Row) -> str:
    """``1/18`` (the steps right of the exercise's), with how many were given when that is fewer
    (``1/18 (1 given)``); ``—`` for an unusable file."""
    if row.verdict == UNUSABLE:
        return "—"
    if row.given < row.out_of:
        return t("batch.steps.given", right=row.right, total=row.out_of, given=row.given)
    return f"{row.right}/{row.out_of}"


def render_batch(rows: Sequence[Row], console: Console) -> None:
    """The submissions as a table (student, exercise, verdict, steps right, first wrong step, comment) and a
    one-line summary.  When the table cannot fit the console's width, each submission is a line (verdict,
    student, exercise, steps right) with its comment indented below it."""
    uni = is_utf(console.encoding)

    def tx(text: object) -> str:
        words = shown(_words(text))
        return words if uni else asciify(words)

    headers = [t("batch.col.student"), t("batch.col.exercise"), t("batch.col.verdict"), t("batch.col.steps"),
               t("batch.col.first_wrong"), t("batch.col.comment")]
    cells = [[tx(r.student), tx(r.exercise or "—"), tx(verdict_word(r.verdict)),
              steps_words(r),
              tx(r.first_label) if r.first_label is not None else "—", tx(r.comment)] for r in rows]
    boxed = box.SIMPLE_HEAD if uni else box.ASCII
    fixed = Table(box=boxed, show_edge=False)  # the columns never wrapped, measured at their natural width
    for h in headers[:5]:
        fixed.add_column(tx(h), no_wrap=True)
    for c in cells:
        fixed.add_row(*c[:5])
    natural = Measurement.get(console, console.options.update_width(10_000), fixed).maximum
    if rows and natural + 3 + MIN_COMMENT <= console.width:
        table = Table(box=boxed, show_edge=False)
        for i, h in enumerate(headers):
            table.add_column(tx(h), no_wrap=i < 5, overflow="fold")
        for r, c in zip(rows, cells, strict=True):
            table.add_row(*[Text(x, style=_STYLE[r.verdict] if i == 2 else "") for i, x in enumerate(c)])
        console.print(table)
    else:
        for r, c in zip(rows, cells, strict=True):
            line = Text(c[2], style=_STYLE[r.verdict])
            words = (t("batch.row.narrow.unusable", student=c[0]) if r.verdict == UNUSABLE
                     else t("batch.row.narrow", student=c[0], exercise=c[1], steps=c[3]))
            line.append("  " + tx(words))
            console.print(line, overflow="fold")
            console.print(Padding(Text(c[5], style="dim", overflow="fold"), (0, 0, 0, 4), expand=False))
    counts = summary(rows)
    console.print(Text(tx(t("batch.summary", submissions=plural("batch.submissions", counts["submissions"]),
                            correct=counts[CORRECT], wrong=counts[WRONG], unusable=counts[UNUSABLE])), style="bold"))

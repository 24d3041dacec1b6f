"""A check report for a terminal (rich) or for scripts (JSON).

Nothing here prints by itself: :func:`render` writes to the
:class:`rich.console.Console` passed in; :func:`dumps` returns text.  Every
verdict is a word as well as a symbol and a colour (``✓ correct`` /
``✗ wrong``), so it reads the same under ``NO_COLOR``; on a stream that is
not UTF-8 the notation falls back to ASCII (:func:`tutor.base.ascii.asciify`).
Lines are wrapped at the console's width between words, under their own
indent, so a number is never broken over two lines (one wider than the
whole line is folded, never cut); text from the solution file is shown with
its control characters escaped.
"""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.text import Text

from ..answers import ROUNDED_AWAY, TRUNCATED
from ..audit.check import CARRIED, INDEPENDENT, ROUNDING, Report, StepCheck
from ..audit.plausibility import cell_name, label
from ..audit.solution import SolutionFile
from ..base.ascii import asciify, is_utf
from ..base.cells import pad, widest
from ..base.decimals import legible, trimmed
from ..base.messages import Text as Words
from ..base.messages import plural, t
from ..base.textsafe import shown
from ..exact.numbers import Rat
from ..mistakes.diagnose import tied
from ..steps import inputs
from .text import pretty

MAX_ENTRIES_SHOWN = 6
MIN_ROOM = 10  # fewest columns a wrapped text is given beside its prefix; less, and it goes below
_MARKS = ("✓ ", "✗ ", "• ", "ok ", "x ", "* ")  # and their ASCII forms (asciify)


#: The longest exact form (answer grammar) shown beside the decimal of a wrong entry: ``2*sqrt(2)``,
#: ``exp(-sqrt(2))``; a softmax weight's form is longer and is shown as its decimal only.
SHORT_EXACT = 16


class CheckRenderer:
    def __init__(self, console: Console):
        self.console = console
        self.unicode = is_utf(console.encoding)

    def tx(self, text: Words) -> str:
        """``text`` as this console shows it, put into words (a ``Msg``): control characters escaped, ASCII when the
        stream is not UTF-8."""
        text = shown(str(text), keep="\n")
        return text if self.unicode else asciify(text)

    def line(self, text: Words, style: str = "", indent: int = 0) -> None:
        """One paragraph, wrapped between words at the console's width; wrapped lines keep the indent
        (and, after a leading mark ``✓``/``✗``/``•``, start under the text, not under the mark)."""
        text = self.tx(text)
        mark = next((m for m in _MARKS if text.startswith(m)), "")
        self.hanging(Text(" " * indent + mark, style=style), Text(text[len(mark):], style=style))

    def hanging(self, prefix: Text, body: Text) -> None:
        """``prefix`` then ``body`` wrapped at the width, its later lines indented to the prefix's width.

        Where the prefix leaves less than :data:`MIN_ROOM` columns, the body
        goes on the lines below it, indented by 4.  Lines end without padding.
        """
        width = self.console.width
        hang = prefix.cell_len
        if width - hang < MIN_ROOM and body.plain:
            prefix.rstrip()
            self.console.print(prefix)
            prefix, hang = Text(" " * 4), 4
        lines = body.wrap(self.console, max(width - hang, 1), overflow="fold")
        out = Text()
        for k, piece in enumerate(lines):
            piece.rstrip()
            if k:
                out.append("\n" + " " * hang)
            else:
                out.append_text(prefix)
            out.append_text(piece)
        self.console.print(out, soft_wrap=True)  # wrapped here already

    def verdict(self, ok: bool) -> tuple[str, str]:
        return (t("check.mark.correct"), "green") if ok else (t("check.mark.wrong"), "red")

    # -- pieces ------------------------------------------------------------------
    def name(self, r: Report, key: tuple[str, int | None]) -> str:
        return str(label(r.exercise, *key))

    def step_line(self, r: Report, s: StepCheck, width: int) -> None:
        word, style = self.verdict(s.ok)
        if not s.shape_ok:
            detail = t("check.step.shape", found=_dims(s.given.shape), expected=_dims(s.expected.shape))
        elif s.ok:
            detail = t("check.step.ok", count=_count(s))
        else:
            detail = t("check.step.off", wrong=len(s.wrong), count=_count(s))
        if s.follows == CARRIED and s.source is not None:
            detail = t("check.step.with_carried", detail=detail, source=self.name(r, s.source))
        elif s.follows == INDEPENDENT:
            detail = t("check.step.with_independent", detail=detail)
        words = widest(self.tx(self.verdict(ok)[0]) for ok in (True, False))  # in cells: a verdict may be Chinese
        prefix = Text.assemble("  ", (pad(self.tx(word), words), style), f"  {pad(self.tx(self.name(r, s.key)), width)}  ")
        self.hanging(prefix, Text(self.tx(detail)))  # the detail wraps under itself
        if s.follows == INDEPENDENT:
            for d in s.diagnoses:
                self.line(d.message, "italic", indent=15)
        if s is not r.first_wrong:  # the first wrong step lists its notes with its entries
            for _, note in s.exact_claims:
                self.line(note, "italic", indent=15)
            for _, _, note in s.notes:
                self.line(note, "italic", indent=15)

    def right(self, exact: Any, value: float, found: str = "") -> str:
        """The right value of an entry: a short rational as itself (``3/2``), a short exact form with its
        decimal (``2√2 (about 2.8284)``; ``2*sqrt(2)`` on an ASCII stream), anything longer as the decimal.

        The decimal has at least as many places as ``found`` (what was written), so that it shows
        where the two differ, and a value that is not 0 never reads as 0 (``-1.2e-5``)."""
        text = str(exact)
        decimal = _decimal(value, found)
        if isinstance(exact, Rat):
            return text if len(text) <= 8 else decimal
        if not math.isfinite(value):  # -inf: its exact form says it all
            return pretty(text) if self.unicode else text
        if len(text) <= SHORT_EXACT:
            return t("check.exact_about", exact=pretty(text) if self.unicode else text, value=decimal)
        return decimal

    def first(self, r: Report, s: StepCheck) -> None:
        self.console.print()
        self.line(t("check.first", step=self.name(r, s.key)), "bold")
        if s.shape_ok:
            sol = r.sol
            step = sol.step(*s.key)
            texts = s.given.texts()
            notes = dict(s.exact_claims)
            for i, j in s.wrong[:MAX_ENTRIES_SHOWN]:
                if (i, j) in notes:
                    self.line(notes[i, j], indent=2)
                    continue
                right = self.right(step.exact[i][j], s.expected[i, j], texts[i][j])
                self.line(t("check.entry", cell=cell_name(sol, *s.key, i, j), found=texts[i][j], right=right), indent=2)
            if len(s.wrong) > MAX_ENTRIES_SHOWN:
                self.line(t("check.more", count=len(s.wrong) - MAX_ENTRIES_SHOWN), indent=2)
        for _, _, note in s.notes:
            self.line(note, indent=2)
        alike = tied(s.diagnoses)  # mistakes that give the very same numbers: alternatives, none said as the cause
        if alike > 1:
            self.line(t(f"practice.diagnosis.alike.{alike}") if alike <= 3 else
                      t("practice.diagnosis.alike.many", count=alike), "bold", indent=2)
            for d in s.diagnoses[:alike]:
                self.line(f"• {d.message}", indent=4)
        for d in s.diagnoses[alike if alike > 1 else 0:]:
            self.line(t("check.diagnosis", message=d.message), "bold", indent=2)
        explained = {c for c, _ in s.exact_claims} | {c for key, cells, _ in s.notes if key in (TRUNCATED, ROUNDED_AWAY)
                                                       for c in cells}
        if not s.diagnoses and not set(s.wrong) <= explained:  # notes alone explain exact claims and truncations
            self.line(t("check.no_diagnosis"), indent=2)
        if s.follows == ROUNDING:
            self.line(t("check.rounding", inputs=self.inputs(r, s)), indent=2)
        later = [k for k in r.affected]
        if not later:
            return
        self.line(t("check.follows"), indent=2)
        judged = {c.key: c for c in r.steps}
        missing = []
        for key in later:
            c = judged.get(key)
            name = self.name(r, key)
            if c is None:
                missing.append(name)
            elif c.ok:
                self.line(t("check.follows.right.marked", step=name), "green", indent=4)
            elif c.follows == CARRIED:
                self.line(t("check.follows.carried.marked", step=name, source=self.name(r, c.source)), "red", indent=4)  # type: ignore[arg-type]
            else:
                self.line(t("check.follows.independent.marked", step=name), "red", indent=4)
        if missing:
            self.line(t("check.follows.not_given.marked", steps=t("list.sep").join(missing)), indent=4)

    def inputs(self, r: Report, s: StepCheck) -> str:
        return t("list.sep").join(self.name(r, k) for k in inputs(r.exercise, s.key))

    # -- whole report --------------------------------------------------------------
    def heading(self, sf: SolutionFile) -> None:
        """What is checked against what: the file, its exercise and the exercise's title; the file's own
        ``title:`` and ``source:`` when it has them; a blank line."""
        ex = sf.exercise
        self.line(t("check.heading", file=shown(sf.file), id=ex.id, title=ex.local_title), "bold")
        if sf.title:
            self.line(shown(sf.title), "dim")
        if sf.source:
            self.line(t("check.source", source=shown(sf.source)), "dim")
        self.console.print()

    def report(self, r: Report) -> None:
        self.heading(r.solution)
        if not r.steps:
            self.line(t("check.no_steps"))
        else:
            self.line(t("check.steps"), "bold")
            width = widest(self.tx(self.name(r, s.key)) for s in r.steps)
            for s in r.steps:
                self.step_line(r, s, width)
        if r.first_wrong is not None:
            self.first(r, r.first_wrong)
        if r.findings:
            self.console.print()
            self.line(t("check.plausibility"), "bold")
            for f in r.findings:
                self.line(t("check.finding.ok" if f.ok else "check.finding.bad", message=f.message),
                          "green" if f.ok else "red", indent=2)
        self.console.print()
        if r.ok:
            self.line(t("check.verdict.ok.marked", count=len(r.steps), total=len(r.sol.steps)), "bold green")
        else:
            wrong = sum(not s.ok for s in r.steps)
            failed = sum(not f.ok for f in r.findings)
            steps = (plural("check.verdict.steps", wrong, given=len(r.steps)) if wrong
                     else t("check.verdict.steps.none"))
            checks = (plural("check.verdict.checks", failed, total=len(r.findings)) if failed
                      else t("check.verdict.checks.none"))
            if r.first_wrong is None:
                text = t("check.verdict.bad.marked", steps=steps, checks=checks)
            else:
                text = t("check.verdict.bad.first", steps=steps, checks=checks, step=self.name(r, r.first_wrong.key))
            self.line(text, "bold red")


def _dims(shape: tuple[int, ...]) -> str:
    return f"[{shape[0]}×{shape[1]}]"


def _count(s: StepCheck) -> int:
    return sum(e is not None for row in s.given.entries for e in row)


def render(report: Report, console: Console) -> None:
    """Print ``report`` on ``console``."""
    CheckRenderer(console).report(report)


def render_heading(sf: SolutionFile, console: Console) -> None:
    """Print on ``console`` the heading of a check of ``sf`` without steps (a ``tiled:`` part alone): what
    :func:`render` prints above the steps -- the file, its exercise, the file's ``title:`` and ``source:``."""
    CheckRenderer(console).heading(sf)


# --- JSON -----------------------------------------------------------------------------------


def _value(v: float) -> float | str | None:
    if math.isnan(v):
        return None
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    return v


def _key(ex: Any, key: tuple[str, int | None] | None) -> dict[str, Any] | None:
    return None if key is None else {"id": key[0], "head": key[1]}


def report_dict(r: Report) -> dict[str, Any]:
    """The report as plain data.

    ``file`` the solution file; ``exercise`` the exercise id and ``title``
    its title; ``source`` the solution file's ``source:`` (who wrote the
    numbers), ``null`` when it has none, and ``solution_title`` its
    ``title:``, ``null`` likewise; ``verdict``, ``exit_code``, ``steps``
    (each with ``exact_claims``: wrong cells written as exact numbers for a
    rounded value, with their note; and ``notes``: the grading notes
    ``truncated_decimal``, ``rounded_away_decimal`` and ``coarse_decimal``
    with their cells, 0-based),
    ``first_wrong``, ``affected``,
    ``plausibility``; ``warnings`` the file's warnings (a plain ``010``),
    each with ``file``, ``line``, ``column``, ``field``, ``message``,
    ``hint``.  Matrices are lists of rows; ``-inf`` is the string
    ``"-inf"``; an entry not given is ``null``.
    """
    ex = r.exercise
    steps = []
    for s in r.steps:
        steps.append({
            "id": s.given.id,
            "head": s.given.head,
            "field": s.given.field,
            "line": s.given.line,
            "column": s.given.column,
            "verdict": "correct" if s.ok else "wrong",
            "shape": list(s.given.shape),
            "expected_shape": list(s.expected.shape),
            "written": [[None if e is None else e.text for e in row] for row in s.given.entries],
            "expected": [[_value(float(v)) for v in row] for row in s.expected],
            "wrong_cells": [list(c) for c in s.wrong],
            "diagnoses": [{"key": d.key, "message": d.message, "cells": [list(c) for c in d.cells]} for d in s.diagnoses],
            "follows": s.follows,
            "source": _key(ex, s.source),
            "exact_claims": [{"cell": list(c), "message": m} for c, m in s.exact_claims],
            "notes": [{"key": k, "cells": [list(c) for c in cells], "message": m} for k, cells, m in s.notes],
        })
    return {
        **file_dict(r.solution),
        "verdict": "correct" if r.ok else "wrong",
        "exit_code": r.exit_code,
        "first_wrong": None if r.first_wrong is None else _key(ex, r.first_wrong.key),
        "affected": [{"id": k[0], "head": k[1], "given": any(s.key == k for s in r.steps)} for k in r.affected],
        "steps": steps,
        "plausibility": [{"check": f.check, "id": f.id or None, "head": f.head, "ok": f.ok, "message": f.message,
                          "cells": [list(c) for c in f.cells]} for f in r.findings],
        "warnings": warnings_list(r.solution),
    }


def file_dict(sf: SolutionFile) -> dict[str, Any]:
    """What a check's JSON says of the file, with steps or without (a ``tiled:`` part alone): ``file``;
    ``exercise`` its id and ``title`` its title; ``source`` and ``solution_title``, the file's own
    ``source:`` and ``title:`` (``null`` when it has none)."""
    return {
        "file": sf.file,
        "exercise": sf.exercise.id,
        "title": sf.exercise.local_title,
        "source": sf.source or None,
        "solution_title": sf.title or None,
    }


def warnings_list(sf: SolutionFile) -> list[dict[str, Any]]:
    """The file's warnings (a plain ``010``) as a check's JSON lists them: ``file``, ``line``, ``column``,
    ``field``, ``message``, ``hint``."""
    return [{"file": p.file, "line": p.line, "column": p.column, "field": p.field, "message": p.message,
             "hint": p.hint} for p in sf.warnings]


def dumps(r: Report) -> str:
    """The report as JSON text (ASCII-safe)."""
    from ..base.jsontext import compact

    return compact(report_dict(r))


def _decimal(value: float, found: str) -> str:
    """``value`` at 4 places, or at as many as ``found`` has (up to 15); ``legible`` when that rounds a non-zero to 0."""
    mantissa, e, _ = found.strip().lower().partition("e")
    if e:  # written in scientific notation: as many significant digits
        sig = len(mantissa.lstrip("+-").replace(".", "").lstrip("0"))
        return f"{value:.{min(max(sig, 2), 16) - 1}e}"
    whole, dot, rest = mantissa.partition(".")
    digits = len(rest) if dot and rest.isdigit() else 0
    places = min(max(4, digits), 15)
    text = trimmed(value, places)
    if text == "0" and value != 0:
        return legible(value, places)
    return text

"""What a learner reads during ``attn-tutor practice`` and ``attn-tutor stats``.

Everything is written to the :class:`rich.console.Console` passed in.  As in
:mod:`tutor.render.rich`: no colour is needed (a wrong entry carries a mark,
not only a red style), an ASCII-only stream gets transliterated text and
boxes, and tables split into column groups instead of cutting numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.columns import Columns
from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from .. import quiz
from ..messages import t
from ..model import Exercise
from ..steps import Step
from .rich import INLINE_EXACT, RichRenderer
from .text import decimal, is_plain, pretty

PLACES = 4


def _shape(shape: tuple[int, int]) -> str:
    return f"[{shape[0]}×{shape[1]}]"


class QuizRenderer:
    """Renders the effects of :mod:`tutor.quiz` on one console."""

    def __init__(self, console: Console, precision: int = PLACES):
        self.console = console
        self.r = RichRenderer(console, precision)
        self.places = precision
        self.wrong_mark = "✗" if self.r.unicode else "[x]"
        self.right_mark = "✓" if self.r.unicode else "ok"

    # -- primitives ---------------------------------------------------------------
    def tx(self, text: str) -> str:
        """``text`` as this stream can show it (ASCII transliteration when it is not UTF-8)."""
        return self.r.tx(text)

    def line(self, text: str, style: str = "", indent: int = 0) -> None:
        """One paragraph of plain text (wrapped at words, never at a number's digits)."""
        item: RenderableType = Text(self.tx(text), style=style)
        if indent:
            item = Padding(item, (0, 0, 0, indent), expand=False)
        self.console.print(item)

    def cell(self, exact: str, value: float) -> str:
        """An entry in a table: exact when short (with its decimal below when not an integer),
        else its decimal."""
        if is_plain(exact):
            return self.r.notation(exact)
        if len(pretty(exact)) > INLINE_EXACT:
            return decimal(value, self.places)
        return f"{self.r.notation(exact)}\n{decimal(value, self.places)}"

    def matrix_tables(self, name: str, exact: Sequence[Sequence[str]], value: Sequence[Sequence[float]],
                      rows: Sequence[str], cols: Sequence[str]) -> list[RenderableType]:
        cells = [[self.cell(x, v) for x, v in zip(er, vr)] for er, vr in zip(exact, value)]
        shape = (len(exact), len(exact[0]))
        title = f"{name} [{shape[1]}]" if name.startswith("b_") else f"{name} {_shape(shape)}"
        return self.r.tables(cells, rows, cols, title=title)

    # -- the session --------------------------------------------------------------------
    def intro(self, ex: Exercise, total: int, settings: quiz.Settings, picked: str = "") -> None:
        """The session's first lines: what is practised and how to answer."""
        if picked:
            self.line(picked)
        self.line(t("practice.intro", title=ex.title, id=ex.id, total=total), "bold")
        self.line(t("practice.how.entry" if settings.mode == "entry" else "practice.how.matrix"))
        self.line(t("practice.commands"))

    def show(self, effect: quiz.Effect) -> None:
        """Render one effect (not :class:`quiz.Prompt`, which :meth:`prompt` turns into text,
        nor :class:`quiz.Record`, which goes to the store)."""
        method = getattr(self, "on_" + type(effect).__name__.lower())
        method(effect)

    def head_suffix(self, step: Step, multi_head: bool) -> str:
        """`` (head 1)`` for a per-head step of a multi-head exercise, else nothing."""
        if multi_head and step.head is not None and step.id != "head_output":
            return t("practice.label.head", head=step.head)
        return ""

    def label(self, step: Step, multi_head: bool) -> str:
        """The step's result, named for a learner: ``Q``, ``Q (head 1)``, ``head_1``, ``output``."""
        return quiz.result_name(step) + self.head_suffix(step, multi_head)

    def prompt(self, p: quiz.Prompt) -> str:
        """The text before the cursor: ``Q> ``, ``Q row 2> ``, ``Q[t1, d2]> ``, ``Q (head 1)> ``."""
        name, head = quiz.result_name(p.step), self.head_suffix(p.step, p.multi_head)
        if p.cell is not None:
            i, j = p.cell
            text = t("practice.prompt.entry", name=name, head=head, row=p.step.row_labels[i], col=p.step.col_labels[j])
        elif p.row is not None:
            text = t("practice.prompt.row", name=name, head=head, row=p.row)
        else:
            text = t("practice.prompt", name=name, head=head)
        return self.tx(text) + " "

    def echo(self, prompt: str, line: str) -> None:
        """A line read from a non-terminal stream, shown after its prompt (so a transcript reads as typed)."""
        shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in line)
        self.console.print(Text(prompt + self.tx(shown)))

    def on_present(self, p: quiz.Present) -> None:
        step = p.step
        title = t(f"step.{step.id}.title")
        if p.multi_head and step.head is not None:
            head = t("practice.step.head", number=p.number, total=p.total, head=step.head, title=title)
        else:
            head = t("practice.step", number=p.number, total=p.total, title=title)
        self.console.print()
        self.line(head, "bold")
        self.line(step.formula, "cyan", indent=3)
        items: list[RenderableType] = []
        for inp in p.inputs:
            items += self.matrix_tables(inp.name, inp.exact, inp.value, inp.row_labels, inp.col_labels)
        self.console.print(Padding(Columns(items, padding=(0, 3)), (0, 0, 0, 2), expand=False))

    def on_invalid(self, e: quiz.Invalid) -> None:
        self.line(t("practice.invalid", message=e.message))

    def on_rowbyrow(self, e: quiz.RowByRow) -> None:
        self.line(t("practice.rows", rows=e.rows), "dim")

    def on_correct(self, e: quiz.Correct) -> None:
        key = "practice.correct" if e.attempt == 1 else "practice.correct.retry"
        self.line(f"{self.right_mark} " + t(key, attempt=e.attempt), "bold green")

    def on_wrong(self, e: quiz.Wrong) -> None:
        step = e.step
        rows, cols = len(e.answer), len(e.answer[0])
        if e.wrong is None:
            self.line(f"{self.wrong_mark} " + t("practice.wrong.shape", shape=_shape((rows, cols))), "bold red")
        else:
            self.line(f"{self.wrong_mark} " + t("practice.wrong", wrong=len(e.wrong), total=rows * cols,
                                                mark=self.wrong_mark), "bold red")
            bad = set(e.wrong)
            cells = [[f"{self.r.notation(x.text)} {self.wrong_mark}" if (i, j) in bad else self.r.notation(x.text)
                      for j, x in enumerate(row)] for i, row in enumerate(e.answer)]
            styles = [["bold red" if (i, j) in bad else "" for j in range(cols)] for i in range(rows)]
            for table in self.r.tables(cells, step.row_labels, step.col_labels,
                                       title=t("practice.your_answer", name=quiz.result_name(step)), styles=styles):
                self.console.print(Padding(table, (0, 0, 0, 2), expand=False))
        if e.inexact:
            where = ", ".join(f"({step.row_labels[i]}, {step.col_labels[j]})" for i, j in e.inexact)
            i, j = e.inexact[0]
            self.line(t("practice.inexact", cells=where, example=f"{step.value[i][j]:.2f}"))
        if e.diagnoses:
            self.line(t("practice.diagnosis", message=e.diagnoses[0].message), "bold")
        elif e.wrong is not None and not e.inexact:
            self.line(t("practice.no_diagnosis"))
        if e.retry:
            self.line(t("practice.retry.entries", count=len(e.retry), mark=self.wrong_mark), "dim")
        else:
            self.line(t("practice.retry"), "dim")

    def on_hint(self, h: quiz.Hint) -> None:
        step = h.step
        if h.level == 1:
            self.line(t("practice.hint.1", formula=h.formula), "bold")
            self.line(t(f"practice.hint.{step.id}", **_hint_fields(step)), indent=3)
        elif h.level == 2:
            self.line(t("practice.hint.2"), "bold")
            self.line(h.work, indent=3)
        else:
            self.line(t("practice.hint.none"))

    def on_shapeinfo(self, s: quiz.ShapeInfo) -> None:
        step = s.step
        self.line(t("practice.shape", name=quiz.result_name(step), shape=_shape(step.shape),
                    rows=step.shape[0], cols=step.shape[1]))
        self.line(step.annotation(), indent=3)

    def on_reveal(self, r: quiz.Reveal) -> None:
        step = r.step
        self.line(t("practice.reveal", name=quiz.result_name(step), shape=_shape(step.shape)), "bold")
        cells, listed = self.r.step_cells(step)
        for table in self.r.tables(cells, step.row_labels, step.col_labels):
            self.console.print(Padding(table, (0, 0, 0, 2), expand=False))
        for text, where in listed:
            places = ", ".join(f"({r_}, {c})" for r_, c in where) + ":"
            exact = self.tx(self.r.notation(text))
            if len(self.tx(places)) + 1 + len(exact) <= self.console.width - 3:
                self.line(f"{places} {exact}", indent=3)
            else:  # the exact form on a line of its own rather than broken after the places
                self.line(places, indent=3)
                self.line(exact, indent=5)

    def on_skipped(self, s: quiz.Skipped) -> None:
        self.line(t("practice.skipped"), "dim")

    def on_help(self, h: quiz.Help) -> None:
        self.line(t("practice.how.entry" if h.mode == "entry" else "practice.how.matrix"))
        self.line(t("practice.numbers"))
        for command in quiz.COMMANDS:
            self.line(f"{command:<6} " + t(f"practice.help.{command}"), indent=2)

    def on_summary(self, s: quiz.Summary) -> None:
        results = s.results
        self.console.print()
        self.line(t(f"practice.end.{s.reason}"), "bold")
        if not results:
            return
        right = sum(r.outcome == "correct" for r in results)
        first = sum(r.outcome == "correct" and r.attempts == 0 for r in results)
        self.line(t("practice.summary", right=right, total=len(results), first=first,
                    shown=sum(r.outcome == "shown" for r in results),
                    skipped=sum(r.outcome == "skipped" for r in results)))
        multi = len({r.step.head for r in results if r.step.head is not None}) > 1
        width = max(len(self.tx(self.label(r.step, multi))) for r in results)
        for n, r in enumerate(results, start=1):
            self.line(f"{n:>2}. {self.tx(self.label(r.step, multi)):<{width}}  {self.status(r)}", indent=2)
        if any(r.outcome is not None for r in results):
            self.line(t("practice.saved"), "dim")

    def status(self, r: quiz.Result) -> str:
        """How one step went, in words."""
        if r.outcome == "correct":
            text = t("practice.status.first") if r.attempts == 0 else t("practice.status.retry", wrong=r.attempts)
        elif r.outcome == "shown":
            text = t("practice.status.shown")
        elif r.outcome == "skipped":
            text = t("practice.status.skipped")
        elif r.attempts:
            text = t("practice.status.left", wrong=r.attempts)
        else:
            text = t("practice.status.unreached")
        if r.hints:
            text += t("practice.status.hints", hints=r.hints)
        return text


def _hint_fields(step: Step) -> dict[str, object]:
    ops = step.operands
    return {"src": ops[0].name, "w": ops[1].name if len(ops) > 1 else "",
            "bias": t("practice.hint.bias", b=ops[2].name) if len(ops) > 2 else "",
            "d_k": ops[1].name.lstrip("√") if step.id == "scaled" else ""}


# --- stats ---------------------------------------------------------------------------


def render_stats(data: dict, console: Console) -> None:
    """``attn-tutor stats`` for a terminal, from the same dict ``--format json`` prints."""
    r = RichRenderer(console)
    tx = r.tx

    def line(text: str, style: str = "") -> None:
        console.print(Text(tx(text), style=style))

    if not data["answers"]:
        line(t("stats.empty"), "bold")
    else:
        line(t("stats.header", sessions=data["sessions"], answers=data["answers"]), "bold")
        console.print()
        line(t("stats.by_step"), "bold")
        table = Table(box=r.box, padding=(0, 1), expand=False)
        table.add_column(t("stats.col.step"), no_wrap=True, style="bold")
        for key in ("stats.col.right", "stats.col.graded", "stats.col.accuracy", "stats.col.shown", "stats.col.skipped"):
            table.add_column(tx(t(key)), justify="right", no_wrap=True)
        for s in data["steps"]:
            table.add_row(s["step"], str(s["correct"]), str(s["graded"]), percent(s["accuracy"]), str(s["shown"]),
                          str(s["skipped"]))
        console.print(Padding(table, (0, 0, 0, 2), expand=False))
        if data["diagnoses"]:
            console.print()
            line(t("stats.diagnoses"), "bold")
            for d in data["diagnoses"]:
                text = t("stats.single_entry") if d["key"] == "single_entry" else (d["message"] or d["key"])
                console.print(Padding(Text(tx(f"{d['count']}×  {text}")), (0, 0, 0, 2), expand=False))
    nxt = data["next"]
    if nxt is not None:
        console.print()
        if nxt["graded"]:
            why = t("stats.next.weak", step=nxt["step"], right=nxt["correct"], graded=nxt["graded"])
        else:
            why = t("stats.next.new", step=nxt["step"])
        line(t("stats.next", why=why, exercise=nxt["exercise"]), "bold")
        console.print(Padding(Text(nxt["command"]), (0, 0, 0, 2), expand=False))
    line(t("stats.file", path=data["store"]), "dim")


def percent(x: float | None) -> str:
    """``0.5`` -> ``50%``; ``None`` -> ``-``."""
    return "-" if x is None or math.isnan(x) else f"{round(100 * x)}%"

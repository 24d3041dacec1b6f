"""What a learner reads during ``attn-tutor practice`` and ``attn-tutor stats``.

Everything is written to the :class:`rich.console.Console` passed in.  As in
:mod:`tutor.render.rich`: no colour is needed (a wrong entry carries a mark,
not only a red style), an ASCII-only stream gets transliterated text and
boxes, and tables split into column groups instead of cutting numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.columns import Columns
from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from .. import practice as quiz
from ..answers import MIN_PLACES
from ..base.cells import pad, widest, width
from ..base.decimals import fixed, trimmed
from ..base.messages import Msg, join_and, plural, t
from ..base.messages import Text as Words
from ..exact.numbers import notation_of_work
from ..exercise.record import Exercise
from ..steps import KINDS, Step
from .rich import INLINE_EXACT, RichRenderer
from .text import decimal, is_plain, pack, pretty

if TYPE_CHECKING:
    from ..mistakes.diagnose import Diagnosis
    from ..store.attempt import Attempt

PLACES = 4
ECHO_CHARS = 200  # longest typed line echoed in full; a longer one is cut, with its length


def _shape(shape: tuple[int, int]) -> str:
    return f"[{shape[0]}×{shape[1]}]"


#: Places a given matrix's decimals have beyond the answers' (see :meth:`QuizRenderer.cells`).
GIVEN_EXTRA = 2


class QuizRenderer:
    """Renders the effects of :mod:`tutor.practice` on one console."""

    def __init__(self, console: Console, precision: int = PLACES):
        self.console = console
        self.r = RichRenderer(console, precision)
        self.places = precision
        self.wrong_mark = "✗" if self.r.unicode else "[x]"
        self.right_mark = "✓" if self.r.unicode else "ok"
        self.unsaved: Sequence[Attempt] = ()  # answers the store could not take by the end (set by the CLI before the summary)
        self.notes: dict[tuple[str, int | None], list[str]] = {}  # mistakes this exercise cannot catch, by step
        self.why: dict[tuple[str, int | None], list[str]] = {}  # what each step means, said once it is answered or shown

    # -- primitives ---------------------------------------------------------------
    def tx(self, text: Words) -> str:
        """``text`` as this stream can show it, put into words (a ``Msg``; ASCII transliteration when it is not UTF-8)."""
        return self.r.tx(str(text))

    def line(self, text: Words, style: str = "", indent: int = 0) -> None:
        """One paragraph of plain text (wrapped at words, never at a number's digits)."""
        item: RenderableType = Text(self.tx(text), style=style)
        if indent:
            item = Padding(item, (0, 0, 0, indent), expand=False)
        self.console.print(item)

    def bullet(self, text: Words) -> None:
        """One item of a list, its wrapped lines aligned after the bullet."""
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column()
        grid.add_row(self.tx("•"), Text(self.tx(text)))
        self.console.print(Padding(grid, (0, 0, 0, 2), expand=False))

    def cells(self, exact: Sequence[Sequence[str]], value: Sequence[Sequence[float]]) -> list[list[str]]:
        """A given matrix's table cells, in one form for the whole table (the rule of ``explain``):
        integers (and ``-inf``) as themselves; the other entries as their exact form over their
        decimal when every such exact form is short (at most ``INLINE_EXACT`` characters),
        else all as decimals.  The decimals have :data:`GIVEN_EXTRA` places more than the answers
        are asked to: a step worked from them is right to those places (from 4-place inputs the
        rounding of a dot product can reach the 4th place of its result)."""
        long = any(not is_plain(x) and len(pretty(x)) > INLINE_EXACT for row in exact for x in row)
        places = self.places + GIVEN_EXTRA

        def cell(x: str, v: float) -> str:
            if is_plain(x):
                return self.r.notation(x)
            if long:
                return decimal(v, places)
            return f"{self.r.notation(x)}\n{decimal(v, places)}"

        return [[cell(x, v) for x, v in zip(er, vr)] for er, vr in zip(exact, value)]

    def matrix_tables(self, name: Words, exact: Sequence[Sequence[str]], value: Sequence[Sequence[float]],
                      rows: Sequence[str], cols: Sequence[str]) -> list[RenderableType]:
        cells = self.cells(exact, value)
        shape = (len(exact), len(exact[0]))
        name = str(name)
        title = f"{name} [{shape[1]}]" if name.startswith("b_") else f"{name} {_shape(shape)}"
        return self.r.tables(cells, rows, cols, title=title)

    # -- the session --------------------------------------------------------------------
    def intro(self, ex: Exercise, total: int, settings: quiz.Settings, opening: Sequence[str] = ()) -> None:
        """The session's first lines: why this exercise and where it begins (``opening``), what is
        practised and how to answer."""
        for sentence in opening:
            self.line(sentence)
        self.line(t("practice.intro", title=ex.local_title, id=ex.id, total=total), "bold")
        self.line(t("practice.how.entry" if settings.mode == "entry" else "practice.how.matrix"))
        self.line(t("practice.commands"))

    def show(self, effect: quiz.Effect) -> None:
        """Render one effect (not :class:`quiz.Prompt`, which :meth:`prompt` turns into text,
        nor :class:`~tutor.store.attempt.Attempt`, which goes to the store)."""
        method = getattr(self, "on_" + type(effect).__name__.lower())
        method(effect)

    def head_suffix(self, step: Step, multi_head: bool) -> str:
        """`` (head 1)`` for a per-head step of a multi-head exercise, else nothing."""
        return quiz.head_suffix(step, multi_head)

    def label(self, step: Step, multi_head: bool) -> str:
        """The step's result, named for a learner: ``Q``, ``Q (head 1)``, ``head_1``, ``output``."""
        return quiz.step_label(step, multi_head)

    def prompt(self, p: quiz.Prompt[Step]) -> str:
        """The text before the cursor: ``Q> ``, ``Q row 2> ``, ``Q[t1, d2]> ``, ``Q (head 1)> ``, ``Q …> ``."""
        name, head = quiz.result_name(p.step), self.head_suffix(p.step, p.multi_head)
        if p.cell is not None:
            i, j = p.cell
            text = t("practice.prompt.entry", name=name, head=head, row=p.step.row_labels[i], col=p.step.col_labels[j])
        elif p.row is not None:
            text = t("practice.prompt.row", name=name, head=head, row=p.row)
        elif p.more:
            text = t("practice.prompt.more", name=name, head=head)
        else:
            text = t("practice.prompt", name=name, head=head)
        return self.tx(text) + " "

    def echo(self, prompt: str, line: str) -> None:
        """A line read from a non-terminal stream, shown after its prompt (so a transcript reads as
        typed).  ``prompt`` is already on the screen: the echo is wrapped as if it followed it.
        Control characters are shown escaped; a line over :data:`ECHO_CHARS` characters is cut,
        with its length."""
        shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in line[:ECHO_CHARS])
        if len(line) > ECHO_CHARS:
            shown = t("practice.echo.cut.line", line=shown, length=len(line))
        lines = Text(prompt + self.tx(shown)).wrap(self.console, self.console.width)
        lines[0] = lines[0][len(prompt):]
        self.console.print(Text("\n").join(lines))

    def on_present(self, p: quiz.Present) -> None:
        step = p.step
        title = str(p.title) if p.title else str(KINDS[step.id].title_of(step))
        if p.multi_head and step.kv_head is not None:  # a matrix grouped query heads share: its K/V head's
            head = t("practice.step.kv_head", number=p.number, total=p.total, kv=step.kv_head + 1, title=title)
        elif p.multi_head and step.head is not None:
            head = t("practice.step.head", number=p.number, total=p.total, head=step.head + 1, title=title)
        else:
            head = t("practice.step", number=p.number, total=p.total, title=title)
        self.console.print()
        self.line(head, "bold")
        self.line(step.formula, "cyan", indent=3)
        if p.note:  # what the formula leaves to the exercise (RoPE's pairing)
            self.line(str(p.note), indent=3)
        items: list[RenderableType] = []
        for inp in p.inputs:
            items += self.matrix_tables(inp.name, inp.exact, inp.value, inp.row_labels, inp.col_labels)
        self.console.print(Padding(Columns(items, padding=(0, 3)), (0, 0, 0, 2), expand=False))

    def on_invalid(self, e: quiz.Invalid) -> None:
        self.line(t("practice.invalid", message=e.message))

    def on_rowbyrow(self, e: quiz.RowByRow) -> None:
        self.line(t("practice.rows", rows=e.rows), "dim")

    def on_correct(self, e: quiz.Correct[Step]) -> None:
        key = "practice.correct.marked" if e.attempt == 1 else "practice.correct.retry.marked"
        self.line(t(key, mark=self.right_mark, attempt=e.attempt), "bold green")
        self.explained(e.step)
        for sentence in self.notes.get(e.step.key, ()):  # a right answer here cannot rule these mistakes out
            self.line(t("explain.note", note=sentence), "yellow", indent=2)

    def explained(self, step: Step) -> None:
        """Why the step is computed as it is (the sentences ``explain`` gives it), once its answer is known."""
        for sentence in self.why.get(step.key, ()):
            self.line(sentence, "italic", indent=2)

    def on_wrong(self, e: quiz.Wrong[Step]) -> None:
        step = e.step
        rows, cols = len(e.answer), len(e.answer[0])
        if e.wrong is None:
            self.line(t("practice.wrong.shape.marked", mark=self.wrong_mark, shape=_shape((rows, cols))), "bold red")
        else:
            self.line(t("practice.wrong.marked", wrong=len(e.wrong), total=rows * cols, mark=self.wrong_mark),
                      "bold red")
            bad = set(e.wrong)
            cells = [[f"{self.r.notation(x.text)} {self.wrong_mark}" if (i, j) in bad else self.r.notation(x.text)
                      for j, x in enumerate(row)] for i, row in enumerate(e.answer)]
            styles = [["bold red" if (i, j) in bad else "" for j in range(cols)] for i in range(rows)]
            for table in self.r.tables(cells, step.row_labels, step.col_labels,
                                       title=t("practice.your_answer", name=quiz.result_name(step)), styles=styles):
                self.console.print(Padding(table, (0, 0, 0, 2), expand=False))
        if e.inexact:
            i, j = e.inexact[0]
            self.line(t("practice.inexact", cells=self.where(step, e.inexact), example=f"{step.value[i][j]:.2f}"))
        if e.truncated:
            self.misrounded("truncated", step, e.answer, e.truncated)
        if e.rounded_away:
            self.misrounded("rounded_away", step, e.answer, e.rounded_away)
        if e.coarse and not e.shown:  # a mistake that explains the numbers as written says more
            i, j = e.coarse[0]
            self.line(t("practice.coarse.also", cells=self.where(step, e.coarse, limit=4), places=MIN_PLACES,
                        example=rounded(step.value[i][j], MIN_PLACES)))
        if e.blocked:
            self.line(t("practice.blocked", cells=self.where(step, e.blocked)))
        if not self.diagnoses(e.shown) and e.wrong is not None and not e.inexact and not e.blocked \
                and set(e.truncated + e.rounded_away) != set(e.wrong):
            self.line(t("practice.no_diagnosis"))
        if e.retry:
            self.line(t("practice.retry.entries", count=len(e.retry), mark=self.wrong_mark), "dim")
        else:
            self.line(t("practice.retry"), "dim")

    def diagnoses(self, shown: Sequence[Diagnosis]) -> bool:
        """The mistakes that explain a wrong answer (several: those it cannot tell apart); whether there are any."""
        if len(shown) == 1:
            self.line(t("practice.diagnosis", message=_on_paper(shown[0].message)), "bold")
        elif shown:
            n = len(shown)  # two and three in words; more (four on two-head-causal-3x4's ÷2) counted
            self.line(t(f"practice.diagnosis.alike.{n}") if n <= 3 else t("practice.diagnosis.alike.many", count=n), "bold")
            for d in shown:
                self.bullet(_on_paper(d.message))
        return bool(shown)

    def where(self, step: Step, cells: Sequence[quiz.Cell], limit: int = 0) -> str:
        """Cells named by their labels, ``(t1, t1), (t2, t3)``; ``every entry`` for all of the step's;
        with a ``limit``, at most that many, then "and N more"."""
        if limit and len(cells) == step.shape[0] * step.shape[1] > 1:
            return t("practice.cells.all")
        names = [f"({step.row_labels[i]}, {step.col_labels[j]})" for i, j in cells]
        if limit and len(names) > limit:
            return t("practice.cells.some", cells=t("list.sep").join(names[:limit]), count=len(names) - limit)
        return t("list.sep").join(names)

    def misrounded(self, way: str, step: Step, answer: quiz.Answered, cells: Sequence[quiz.Cell]) -> None:
        """The note for entries cut off (``way`` "truncated") or rounded away from zero ("rounded_away")
        instead of rounded to the nearest, worked out on the first of them."""
        i, j = cells[0]
        written = answer[i][j]
        places = written.places or 0
        key = f"practice.{way}" if len(cells) == 1 else f"practice.{way}.many"
        if len(cells) == step.shape[0] * step.shape[1] > 1:
            key = f"practice.{way}.all"
        self.line(t(key, cells=self.where(step, cells, limit=4), value=trimmed(step.value[i][j], places + 3), places=places,
                    rounded=rounded(step.value[i][j], places), written=written.text))

    def on_coarse(self, e: quiz.Coarse[Step]) -> None:
        step = e.step
        i, j = e.cells[0]
        example = rounded(step.value[i][j], MIN_PLACES)
        if e.retry:
            self.line(t("practice.coarse.entries", places=MIN_PLACES, cells=self.where(step, e.cells, limit=4),
                        example=example, count=len(e.retry)))
        else:
            self.line(t("practice.coarse", places=MIN_PLACES, cells=self.where(step, e.cells, limit=4), example=example))

    def unsaved_warning(self, reason: str, lost: bool = False) -> None:
        """The store could not take the answer just given: it is kept, and saved later --
        or, when ``lost`` (the file turned out to be damaged), not saved at all."""
        self.line(t("practice.unsaved.lost" if lost else "practice.unsaved", reason=reason), "bold yellow")

    def on_hint(self, h: quiz.Hint[Step]) -> None:
        step = h.step
        if h.level == 1:
            self.line(t("practice.hint.1", formula=h.formula), "bold")
            append = ".append" if step.op == "append" else KINDS[step.id].suffix(step)  # K, V with a KV cache: rows
            # appended, not projected; d_Q, d_K with RoPE: turned back
            self.line(t(f"practice.hint.{step.id}{append}", **_hint_fields(step)), indent=3)
        elif h.level == 2:
            self.line(t("practice.hint.2"), "bold")
            self.line(notation_of_work(str(h.work)), indent=3)  # paper notation: one minus sign, as the hints write
        else:
            self.line(t("practice.hint.none"))

    def on_shapeinfo(self, s: quiz.ShapeInfo[Step]) -> None:
        step = s.step
        self.line(t("practice.shape", name=quiz.result_name(step), shape=_shape(step.shape),
                    rows=step.shape[0], cols=step.shape[1]))
        self.line(step.annotation(), indent=3)

    def on_reveal(self, r: quiz.Reveal[Step]) -> None:
        step = r.step
        self.line(t("practice.reveal", name=quiz.result_name(step), shape=_shape(step.shape)), "bold")
        cells, listed = self.r.step_cells(step)
        for table in self.r.tables(cells, step.row_labels, step.col_labels):
            self.console.print(Padding(table, (0, 0, 0, 2), expand=False))
        for text, where in listed:
            labels = [f"({r_}, {c})" for r_, c in where]
            places = t("list.sep").join(labels) + ":"
            exact = self.tx(self.r.notation(text))
            if width(self.tx(places)) + 1 + width(exact) <= self.console.width - 3:  # cells: a label may be Chinese
                self.line(f"{places} {exact}", indent=3)
            else:  # the exact form on a line of its own rather than broken after the places
                packed = pack([self.tx(x) for x in labels[:-1]] + [self.tx(labels[-1] + ":")], self.console.width - 3)
                self.console.print(Padding(Text(packed), (0, 0, 0, 3), expand=False))
                self.line(exact, indent=5)
        self.explained(step)

    def on_skipped(self, s: quiz.Skipped[Step]) -> None:
        self.line(t("practice.skipped"), "dim")

    def on_help(self, h: quiz.Help) -> None:
        self.line(t("practice.how.entry" if h.mode == "entry" else "practice.how.matrix"))
        if h.mode == "matrix":
            self.line(t("practice.how.pasted"))
        self.line(t("practice.numbers"))
        for command in quiz.COMMANDS:
            self.line(t("practice.help.line", command=pad(command, 6), text=t(f"practice.help.{command}")), indent=2)

    def on_summary(self, s: quiz.Summary[Step]) -> None:
        results = s.results
        self.console.print()
        self.line(t(f"practice.end.{s.reason}"), "bold")
        if not results:
            return
        self.line(t("practice.summary" if s.asked == len(results) else "practice.summary.asked",
                    right=s.count("correct"), total=s.asked, first=s.first, shown=s.count("shown"),
                    skipped=s.count("skipped")))
        multi = len({r.step.head for r in results if r.step.head is not None}) > 1
        cells = widest(self.tx(self.label(r.step, multi)) for r in results)
        for n, r in enumerate(results, start=1):
            tries = [a.attempt for a in self.unsaved if (a.step, a.head) == (r.step.id, r.step.head)]
            status = plural("practice.status.with_unsaved", len(tries), status=r.status, tries=_runs(tries)) if tries \
                else r.status
            self.line(f"{n:>2}. {pad(self.tx(self.label(r.step, multi)), cells)}  {status}", indent=2)
        if any(r.outcome not in (None, "given") for r in results) and not self.unsaved:
            self.line(t("practice.saved"), "dim")

def rounded(value: float, places: int) -> str:
    """``value`` rounded to ``places`` decimals, as a learner writes it (``0.11``)."""
    return fixed(value, max(places, 0))


def _runs(numbers: Sequence[int]) -> str:
    """``1, 2, 3, 5`` as ``1-3, 5``."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return t("list.sep").join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _hint_fields(step: Step) -> dict[str, object]:
    ops = step.operands
    # a softmax row is all 0 only where the query may attend to no key (0/0, set to 0): the rows that do not sum to 1
    empty = [step.row_labels[i] for i, row in enumerate(step.value) if not any(row)]
    return {"src": ops[0].name, "w": ops[1].name if len(ops) > 1 else "",
            "bias": t("practice.hint.bias", b=ops[2].name) if len(ops) > 2 else "",
            "d_k": ops[-1].name.lstrip("√") if ops[-1].name.startswith("√") else "",  # the operand √d_k
            "except": plural("practice.hint.weights.except", len(empty), rows=join_and(empty)) if empty else ""}


def _on_paper(message: Words) -> Words:
    """A diagnosis as practice shows it: the worked entry it quotes (its field ``formula``, answer-grammar text from
    :func:`tutor.steps.entry_work`) in paper notation, as hint 2 and explain write worked entries, so that one
    minus sign is shown (``(−0.133061)``, not ``(-0.133061)`` beside the hints' ``−``)."""
    if isinstance(message, Msg) and message.how == "t" and "formula" in dict(message.fields):
        fields = dict(message.fields)
        fields["formula"] = notation_of_work(str(fields["formula"]))
        return Msg(message.key, **fields)
    return message

"""The worked solution for a terminal, with rich.

Everything is written to the :class:`rich.console.Console` passed in; nothing
here prints by itself.  Works without colour (``NO_COLOR``: every highlight is
also a word or a symbol), on ASCII-only streams (notation and box drawing are
transliterated) and in narrow terminals (wide tables are split into column
groups; a number too wide for the terminal is folded onto the next line,
never cut or ended with an ellipsis).  Text from a file reaches the console
with its control characters escaped (:meth:`RichRenderer.tx`).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from rich import box
from rich.columns import Columns
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..base.ascii import asciify, is_utf
from ..base.cells import pad, widest, width
from ..base.messages import Text as Words
from ..base.messages import t
from ..base.textsafe import shown
from ..exact.numbers import Rat, frac_text
from ..steps import KINDS, Solution, Step, Worked
from ..steps.worked import PART
from .outline import Flow, Header, Named, Outline, Rule, StepItem, outline
from .text import decimal, is_plain, pack, pretty

INLINE_EXACT = 16  # longest exact text shown inside a table cell; longer ones are listed below it
GRID_WIDTH = 60  # narrower than this, the exact entries listed below a table are stacked, not in two columns
_SHADES = " ░▒▓█"
_OPERATORS = {"=", "≈", "~", "+", "-", "−", "/", "·", "*"}  # kept with the number after them when a line wraps



def _exercise_line(h: Header) -> str:
    """The header's line naming the exercise and where it was read from, a bundled file's label in the
    language of the run (``bundled:`` is how the loader tags the exercises shipped with attn-tutor)."""
    if not h.source:
        return t("explain.exercise", id=h.id)
    where, colon, file = h.source.partition(":")
    if colon and where == "bundled":
        return t("explain.exercise.bundled", id=h.id, file=file)
    return t("explain.exercise.source", id=h.id, source=h.source)

class RichRenderer:
    """Renders solutions (their :class:`~tutor.render.outline.Outline`) onto one console at one precision.

    ``brief``: the compact view, without the arithmetic that a hand-sized
    exercise (:func:`tutor.steps.hand_sized`) shows under each step.
    """

    blank = False  # a worksheet (tutor.render.html.BlankRichRenderer): the outline leaves the answers out

    def __init__(self, console: Console, precision: int = 4, *, brief: bool = False):
        self.console = console
        self.places = precision
        self.brief = brief
        self.unicode = is_utf(console.encoding)
        self.box = box.ROUNDED if self.unicode else box.ASCII

    # -- primitives ---------------------------------------------------------
    def tx(self, text: Words) -> str:
        """``text`` as this console shows it: control characters escaped (newlines kept for layout),
        then transliterated to ASCII when the stream is not UTF-8."""
        text = shown(str(text), keep="\n")
        return text if self.unicode else asciify(text)

    def equals(self, exact: str, value: float) -> str:
        """``= 0.5000`` when the decimal is the exact value, else ``≈ 0.3333``."""
        shown = decimal(value, self.places, keep_small=True)
        try:
            q = Fraction(exact)  # only plain rationals parse; exp/sqrt forms raise
        except ValueError:
            return f"≈ {shown}"
        return f"{'=' if (q * 10**self.places).denominator == 1 else '≈'} {shown}"

    def rule(self, title: str) -> None:
        """A section rule; a title too long for the width goes on its own line above a plain rule."""
        characters = "─" if self.unicode else "-"
        if width(title) + 8 > self.console.width:  # cells: a Chinese title is twice as wide as its length
            self.console.print(Text(self.tx(title), style="bold"))
            self.console.rule(style="blue", characters=characters)
        else:
            self.console.rule(Text(self.tx(title), style="bold"), style="blue", characters=characters)

    def notation(self, exact: str) -> str:
        """An exact entry as shown: ``2√2`` on a Unicode stream, the answer grammar ``2*sqrt(2)`` otherwise."""
        return pretty(exact) if self.unicode else exact

    def print(self, *items: object, style: str | None = None) -> None:
        self.console.print(*items, style=style)

    def line(self, text: str, style: str = "") -> None:
        """One line of text; its leading spaces are an indent that the lines it wraps onto keep."""
        body = text.lstrip(" ")
        indent = len(text) - len(body)
        shown_text = Text(self.tx(body), style=style)
        self.console.print(Padding(shown_text, (0, 0, 0, indent), expand=False) if indent else shown_text)

    def _chunks(self, label_width: int, widths: Sequence[int]) -> list[range]:
        """Split columns into groups whose table fits the console width."""
        budget = max(self.console.width - 4 - label_width - 3, 10)
        groups, start, used = [], 0, 0
        for j, w in enumerate(widths):
            need = w + 3
            if used and used + need > budget:
                groups.append(range(start, j))
                start, used = j, 0
            used += need
        groups.append(range(start, len(widths)))
        return groups

    def tables(self, rows: Sequence[Sequence[str]], row_labels: Sequence[str], col_labels: Sequence[str],
               *, title: str = "", styles: Sequence[Sequence[str]] | None = None) -> list[RenderableType]:
        """A labelled table of preformatted cells, split into column groups that fit the width."""
        rows = [[self.tx(c) for c in r] for r in rows]
        row_labels = [self.tx(r) for r in row_labels]
        col_labels = [self.tx(c) for c in col_labels]
        label_w = max(widest(row_labels), 1)  # in cells, as the table lays them out: a label may be Chinese
        widths = [widest([col_labels[j], *(x for i in range(len(rows)) for x in rows[i][j].split("\n"))])
                  for j in range(len(col_labels))]
        groups = self._chunks(label_w, widths)
        out: list[RenderableType] = []
        for cols in groups:
            caption = self.tx(title)
            if len(groups) > 1:
                key = "explain.column.caption" if len(cols) == 1 else "explain.columns.caption"
                caption = self.tx(t(key, title=title, first=cols.start + 1, last=cols.stop, total=len(col_labels)))
            table = Table(box=self.box, show_lines=any("\n" in c for r in rows for c in r), padding=(0, 1), expand=False)
            # fold, never cut: wider than the terminal, a label or a number goes on over the next line
            table.add_column("", style="bold", overflow="fold")
            for j in cols:
                table.add_column(col_labels[j], justify="right", overflow="fold")
            for i, r in enumerate(rows):
                table.add_row(row_labels[i], *(Text(r[j], style=styles[i][j] if styles else "") for j in cols))
            out.append(Group(Text(caption, style="bold"), table) if caption else table)
        return out

    def matrix(self, *args: object, **kwargs: object) -> None:
        for item in self.tables(*args, **kwargs):  # type: ignore[arg-type]
            self.console.print(Padding(item, (0, 0, 0, 2), expand=False))

    # -- pieces -------------------------------------------------------------
    def inputs(self, named: Sequence[Named]) -> None:
        """Input matrices side by side where the width allows."""
        items: list[RenderableType] = []
        for n in named:
            m = n.matrix
            cells = [[self.notation(frac_text(v)) for v in row] for row in m]
            shape = f"[{len(m)}×{len(m[0])}]" if len(m) > 1 or n.name[0] != "b" else f"[{len(m[0])}]"
            items += self.tables(cells, n.rows, [f"d{j + 1}" for j in range(len(m[0]))], title=f"{n.name} {shape}")
        self.console.print(Padding(Columns(items, padding=(0, 3)), (0, 0, 0, 2), expand=False))

    def step_cells(self, step: Step) -> tuple[list[list[str]], list[tuple[str, list[tuple[str, str]]]]]:
        """Cells for the table, and the exact entries too long to fit in a cell (grouped by text)."""
        exact = [[str(e) for e in row] for row in step.exact]
        value = step.value
        long = any(not is_plain(x) and len(pretty(x)) > INLINE_EXACT for row in exact for x in row)
        cells: list[list[str]] = []
        listed: dict[str, list[tuple[str, str]]] = {}
        for i, row in enumerate(exact):
            out = []
            for j, x in enumerate(row):
                d = decimal(value[i][j], self.places, keep_small=True)
                if is_plain(x):
                    out.append(self.notation(x))
                elif long:
                    out.append(d)
                    listed.setdefault(x, []).append((step.row_labels[i], step.col_labels[j]))
                else:
                    out.append(f"{self.notation(x)}\n{d}")
            cells.append(out)
        return cells, list(listed.items())

    def arithmetic(self, pieces: Sequence[Worked]) -> None:
        """A step worked out: each piece's label, then its lines aligned after it.

        A line too long for the width is wrapped between its parts
        (:data:`tutor.steps.worked.PART`: ``exp(√2) ≈ 4.1133`` stays on one
        line), then between words; a number is never cut.
        """
        if not pieces:
            return
        self.line("   " + t("explain.worked.label"), "bold")
        label_width = widest(self.tx(p.label + p.sep) for p in pieces)
        room = self.console.width - 5 - label_width
        if room < 24:  # narrow: each label on its own line, its calculation below it
            room = max(self.console.width - 7, 1)
            for piece in pieces:
                self.console.print(Padding(Text(self.tx(piece.label + piece.sep.rstrip()), overflow="fold"), (0, 0, 0, 5),
                                           expand=False))
                for line in (w for line in piece.lines for w in self._parts(self.tx(line), room)):
                    self.console.print(Padding(Text(line, overflow="fold"), (0, 0, 0, 7), expand=False))
            return
        grid = Table.grid(padding=(0, 0))
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        for piece in pieces:
            lines = [wrapped for line in piece.lines for wrapped in self._parts(self.tx(line), room)]
            grid.add_row(Text(self.tx(piece.label + piece.sep)), Text(lines[0]))
            for line in lines[1:]:
                grid.add_row(Text(""), Text(line))
        self.console.print(Padding(grid, (0, 0, 0, 5), expand=False))

    @staticmethod
    def _parts(line: str, room: int) -> list[str]:
        """``line`` in lines of at most ``room`` cells where it can be: broken between its parts
        (:data:`~tutor.steps.worked.PART`), else between words, an operator (``≈``, ``=``, ``+``) kept
        with the number after it."""
        chunks: list[str] = []
        parts = line.split(PART)
        for n, part in enumerate(parts):
            tail = PART.rstrip() if n < len(parts) - 1 else ""
            if width(part + tail) <= room:
                chunks.append(part + tail)
                continue
            words = [w for w in (part + tail).split(" ") if w]
            glued: list[str] = []
            for n, word in enumerate(words):
                if glued and glued[-1] in _OPERATORS:  # an operator goes with the number after it, when they fit
                    glued[-1] += " " + word
                elif word in _OPERATORS and n + 1 < len(words) and width(word) + 1 + width(words[n + 1]) > room and glued:
                    glued[-1] += " " + word  # else it ends the line before, never stands alone
                else:
                    glued.append(word)
            chunks += glued
        out: list[str] = []
        for chunk in chunks:
            joint = " " if out and not out[-1].endswith(",") else "  "
            if out and width(out[-1] + joint + chunk) <= room:
                out[-1] += joint + chunk
            else:
                out.append(chunk)
        return out

    def step(self, item: StepItem) -> None:
        """One step: its title, formula, shape annotation, table (exact entries too long for a cell listed
        below it), arithmetic, why it is there, the notes on what it cannot catch, and its heatmap."""
        step = item.step
        kind = KINDS[step.id]
        self.console.print()
        self.line(f"{item.number}. {item.title}", "bold")
        self.line(f"   {step.formula}", "cyan")
        self.line(f"   {step.annotation()}", "magenta")
        cells, listed = self.step_cells(step)
        styles = None
        if kind.fixed_by_mask is not None:  # the entries a mask fixes, dimmed (and readable without colour)
            styles = [["dim" if v == float("-inf") or v == kind.fixed_by_mask else "" for v in row] for row in step.value]
        self.matrix(cells, step.row_labels, step.col_labels, styles=styles)
        if listed:
            self.line("   " + t("explain.exact_list.label"), "bold")
            rows = []
            labels = []
            for text, where in listed:
                labels.append([self.tx(f"({r}, {c})") for r, c in where])
                v = step.value[step.row_labels.index(where[0][0])][step.col_labels.index(where[0][1])]
                rows.append((t("list.sep").join(labels[-1]) + ":", self.tx(f"{self.notation(text)} {self.equals(text, v)}")))
            if max(width(a) + width(b) for a, b in rows) + 6 <= self.console.width:
                for a, b in rows:
                    self.console.print(Padding(Text(f"{a} {b}"), (0, 0, 0, 5), expand=False))
            elif self.console.width >= GRID_WIDTH:  # too wide for one line: two columns, so wrapped lines keep theirs
                self.exact_columns(rows, labels)
            else:  # narrow: the places, then the entry below them, wrapped between words (a number only folds)
                for (a, b), labs in zip(rows, labels):
                    a = pack(labs[:-1] + [labs[-1] + ":"], self.console.width - 5)
                    self.console.print(Padding(Text(a, overflow="fold"), (0, 0, 0, 5), expand=False))
                    self.console.print(Padding(Text(b, overflow="fold"), (0, 0, 0, 7), expand=False))
        self.arithmetic(item.worked)
        for sentence in item.why:
            self.console.print(Padding(Text(self.tx(sentence), style="italic"), (0, 0, 0, 3), expand=False))
        for sentence in item.notes:
            self.console.print(Padding(Text(self.tx(t("explain.note", note=sentence)), style="yellow"), (0, 0, 0, 3),
                                       expand=False))
        if item.heatmap:
            self.heatmap(step)

    def exact_columns(self, rows: Sequence[tuple[str, str]], labels: Sequence[Sequence[str]]) -> None:
        """The exact entries listed below a table, in two columns: the places, and the entry wrapped in its
        own column.  A list of places too long for its column (a third of the console) is never wrapped in
        the middle beside an entry (issue 20, E: it read as two lists): it takes a line of its own, its
        entry below it in the entries' column."""
        across = self.console.width
        column = max(12, across // 3)
        fitting = [width(a) for a, _ in rows if width(a) <= column]
        at = 5 + (max(fitting) + 1 if fitting else 2)  # where the entries' column starts
        for (a, b), labs in zip(rows, labels):
            lines = list(Text(b).wrap(self.console, across - at, overflow="fold"))
            if width(a) <= column:
                first = Text(pad(a, at - 6) + " ") + lines[0]
                rest = lines[1:]
            else:  # the places on their own line (wrapped between places only when wider than the console)
                first = Text(pack([*labs[:-1], labs[-1] + ":"], across - 5), overflow="fold")
                rest = lines
            self.console.print(Padding(first, (0, 0, 0, 5), expand=False))
            for line in rest:
                self.console.print(Padding(line, (0, 0, 0, at), expand=False))

    def heatmap(self, step: Step) -> None:
        """The weights as shades (darker = more weight), each with its value, so no colour is needed."""
        shades = _SHADES if self.unicode else " .:#@"
        cells, styles = [], []
        for row, exact_row in zip(step.value, step.exact, strict=True):
            out, st = [], []
            for v, e in zip(row, exact_row, strict=True):
                # blank only for a weight that is exactly 0 (a masked key): a float that underflowed to 0
                # (a weight of 1e-695 under a large bias) still takes the lightest shade
                zero = isinstance(e, Rat) and e.q == 0
                level = 0 if zero else 1 if v <= 0 else min(4, 1 + int(v * 4 - 1e-12))
                out.append(f"{shades[level] * 2} {decimal(v, 2, keep_small=True)}")
                grey = 255 - round(v * 180)
                st.append(f"on rgb({grey},{grey},255)" if v > 0 else "")
            cells.append(out)
            styles.append(st)
        self.matrix(cells, step.row_labels, step.col_labels, title=t("explain.heatmap", head=(step.head or 0) + 1), styles=styles)
        bands = t("list.sep").join(t("explain.heatmap.band", shade=shades[k] * 2, low=f"{k / 4 - 0.25:g}", high=f"{k / 4:g}")
                          for k in range(1, 5))
        self.console.print(Padding(Text(self.tx(t("explain.heatmap.legend", bands=bands)), style="dim"), (0, 0, 0, 2),
                                   expand=False))

    # -- whole solution -----------------------------------------------------
    def header(self, h: Header) -> None:
        """The title, the exercise's id and source, description, sizes, the mask and format v2's sentences, X."""
        self.rule(h.title)
        self.line(_exercise_line(h), "dim")
        if h.description is not None:
            self.console.print(Padding(Text(self.tx(h.description)), (0, 0, 0, 2), expand=False))
        self.line(h.sizes, "bold")
        if h.mask is not None:
            self.line(h.mask)
        for note in h.mask_notes:  # said where the mask is
            self.console.print(Padding(Text(self.tx(note), style="italic"), (0, 0, 0, 2), expand=False))
        if h.padding is not None:
            self.line(h.padding)
        for line in h.v2:  # format v2: alignment, grouped K/V heads, the cache, the bias
            self.line(line)
        self.console.print()
        self.inputs(h.inputs)

    def solution(self, sol: Solution, head: int | None = None) -> None:
        """The worked solution of ``sol`` (only ``head``, 0-based, when given; the layer's steps are kept)."""
        self.render(outline(sol, head=head, precision=self.places, brief=self.brief, blank=self.blank))

    def render(self, o: Outline) -> None:
        """Every part of outline ``o`` in order: the header, each head, the layer, the backward pass,
        then the dimension flow and the production view."""
        self.header(o.header)
        for part in o.parts:
            self.console.print()
            self.rule(part.title)
            if part.inputs:
                self.inputs(part.inputs)
            for entry in part.entries:
                if isinstance(entry, Rule):  # the backward pass moves on to another head
                    self.rule(entry.title)
                else:
                    self.step(entry)
        self.flow(o.flow)
        self.production(o)

    def flow(self, f: Flow) -> None:
        """Every step's shape annotation, for the head shown and the layer."""
        self.console.print()
        self.line(t("explain.flow"), "bold")
        for step in f.steps:
            self.line(f"  {step.annotation()}")
        if f.heads > 1:
            self.line(f"  {t('explain.flow.each_head', heads=f.heads)}", "dim")
        for step in (*f.layer, *f.backward):
            self.line(f"  {step.annotation()}")

    def production(self, o: Outline) -> None:
        """The same layer as production code runs it: batched tensors, reshapes and transposes named;
        then every mask of the exercise spelled as PyTorch takes it (its notes are in the header)."""
        self.console.print()
        self.line(t("explain.production"), "bold")
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", overflow="fold")
        table.add_column(overflow="fold")
        for step in o.production:
            shape = Text(self.tx(f"{step.symbolic} = {step.concrete}"))
            shape.append("\n" + self.tx(step.note), style="dim")
            table.add_row(step.name, shape)
        self.console.print(Padding(table, (0, 0, 0, 2), expand=False))
        if not o.masks:
            return
        self.console.print()
        self.line(t("explain.production.masks"), "bold")
        api = None
        for item in o.masks:  # grouped by API: its name, then each argument and what it means there
            m = item.mask
            if m.api != api:
                api = m.api
                self.console.print(Padding(Text(self.tx(m.api_name), style="bold", overflow="fold"), (0, 0, 0, 2), expand=False))
            self.console.print(Padding(Text(self.tx(m.code()), overflow="fold"), (0, 0, 0, 4), expand=False))
            self.console.print(Padding(Text(self.tx(item.meaning), style="dim"), (0, 0, 0, 6), expand=False))


def render(sol: Solution, console: Console, *, head: int | None = None, precision: int = 4, brief: bool = False) -> None:
    """Print the worked solution of ``sol`` on ``console`` (``brief``: without the arithmetic)."""
    RichRenderer(console, precision, brief=brief).solution(sol, head)

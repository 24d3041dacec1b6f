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
from ..base.messages import t
from ..base.textsafe import shown
from ..exact.numbers import Rat, frac_text
from ..exercise.record import Exercise, Matrix
from ..steps import KINDS, Solution, Step, Worked, hand_sized
from ..steps.worked import PART
from .text import decimal, is_plain, pack, pretty, reflow, why

INLINE_EXACT = 16  # longest exact text shown inside a table cell; longer ones are listed below it
GRID_WIDTH = 60  # narrower than this, the exact entries listed below a table are stacked, not in two columns
_SHADES = " ░▒▓█"
_OPERATORS = {"=", "≈", "~", "+", "-", "−", "/", "·", "*"}  # kept with the number after them when a line wraps


class RichRenderer:
    """Renders solutions onto one console at one precision.

    ``brief``: the compact view, without the arithmetic that a hand-sized
    exercise (:func:`tutor.steps.hand_sized`) shows under each step.
    """

    def __init__(self, console: Console, precision: int = 4, *, brief: bool = False):
        self.console = console
        self.places = precision
        self.brief = brief
        self.notes: dict[tuple[str, int | None], list[str]] = {}
        self.unicode = is_utf(console.encoding)
        self.box = box.ROUNDED if self.unicode else box.ASCII

    # -- primitives ---------------------------------------------------------
    def tx(self, text: str) -> str:
        """``text`` as this console shows it: control characters escaped (newlines kept for layout),
        then transliterated to ASCII when the stream is not UTF-8."""
        text = shown(text, keep="\n")
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
        if len(title) + 8 > self.console.width:
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
        label_w = max([len(r) for r in row_labels] + [1])
        widths = [max([len(col_labels[j])] + [max(len(x) for x in rows[i][j].split("\n")) for i in range(len(rows))])
                  for j in range(len(col_labels))]
        groups = self._chunks(label_w, widths)
        out: list[RenderableType] = []
        for cols in groups:
            caption = self.tx(title)
            if len(groups) > 1:
                key = "explain.column" if len(cols) == 1 else "explain.columns"
                caption += "  (" + self.tx(t(key, first=cols.start + 1, last=cols.stop, total=len(col_labels))) + ")"
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
    def inputs(self, named: Sequence[tuple[str, Matrix, Sequence[str]]]) -> None:
        """Input matrices side by side where the width allows."""
        items: list[RenderableType] = []
        for name, m, row_labels in named:
            cells = [[self.notation(frac_text(v)) for v in row] for row in m]
            shape = f"[{len(m)}×{len(m[0])}]" if len(m) > 1 or name[0] != "b" else f"[{len(m[0])}]"
            items += self.tables(cells, row_labels, [f"d{j + 1}" for j in range(len(m[0]))], title=f"{name} {shape}")
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

    def notes_for(self, sol: Solution) -> dict[tuple[str, int | None], list[str]]:
        """The sentences naming the core mistakes this exercise cannot catch, by the step where each is made
        (:func:`tutor.mistakes.invisible.notes`)."""
        from ..mistakes.invisible import notes

        return notes(sol)

    def worked(self, sol: Solution, step: Step) -> tuple[Worked, ...]:
        """The arithmetic shown under ``step``: none in the brief view or beyond a hand-sized exercise."""
        if self.brief or not hand_sized(sol.exercise):
            return ()
        return KINDS[step.id].arithmetic(sol, step, self.places)

    def arithmetic(self, pieces: Sequence[Worked]) -> None:
        """A step worked out: each piece's label, then its lines aligned after it.

        A line too long for the width is wrapped between its parts
        (:data:`tutor.steps.worked.PART`: ``exp(√2) ≈ 4.1133`` stays on one
        line), then between words; a number is never cut.
        """
        if not pieces:
            return
        self.line(f"   {t('explain.worked')}:", "bold")
        label_width = max(len(self.tx(p.label + p.sep)) for p in pieces)
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
        """``line`` in lines of at most ``room`` characters where it can be: broken between its parts
        (:data:`~tutor.steps.worked.PART`), else between words, an operator (``≈``, ``=``, ``+``) kept
        with the number after it."""
        chunks: list[str] = []
        parts = line.split(PART)
        for n, part in enumerate(parts):
            tail = PART.rstrip() if n < len(parts) - 1 else ""
            if len(part) + len(tail) <= room:
                chunks.append(part + tail)
                continue
            words = [w for w in (part + tail).split(" ") if w]
            glued: list[str] = []
            for n, word in enumerate(words):
                if glued and glued[-1] in _OPERATORS:  # an operator goes with the number after it, when they fit
                    glued[-1] += " " + word
                elif word in _OPERATORS and n + 1 < len(words) and len(word) + 1 + len(words[n + 1]) > room and glued:
                    glued[-1] += " " + word  # else it ends the line before, never stands alone
                else:
                    glued.append(word)
            chunks += glued
        out: list[str] = []
        for chunk in chunks:
            joint = " " if out and not out[-1].endswith(",") else "  "
            if out and len(out[-1]) + len(joint) + len(chunk) <= room:
                out[-1] += joint + chunk
            else:
                out.append(chunk)
        return out

    def step(self, number: int, step: Step, ex: Exercise, sol: Solution | None = None) -> None:
        kind = KINDS[step.id]
        title = kind.title
        self.console.print()
        self.line(f"{number}. {title}", "bold")
        self.line(f"   {step.formula}", "cyan")
        self.line(f"   {step.annotation()}", "magenta")
        cells, listed = self.step_cells(step)
        styles = None
        if kind.fixed_by_mask is not None:  # the entries a mask fixes, dimmed (and readable without colour)
            styles = [["dim" if v == float("-inf") or v == kind.fixed_by_mask else "" for v in row] for row in step.value]
        self.matrix(cells, step.row_labels, step.col_labels, styles=styles)
        if listed:
            self.line(f"   {t('explain.exact_list')}:", "bold")
            rows = []
            labels = []
            for text, where in listed:
                labels.append([self.tx(f"({r}, {c})") for r, c in where])
                v = step.value[step.row_labels.index(where[0][0])][step.col_labels.index(where[0][1])]
                rows.append((", ".join(labels[-1]) + ":", self.tx(f"{self.notation(text)} {self.equals(text, v)}")))
            if max(len(a) + len(b) for a, b in rows) + 6 <= self.console.width:
                for a, b in rows:
                    self.console.print(Padding(Text(f"{a} {b}"), (0, 0, 0, 5), expand=False))
            elif self.console.width >= GRID_WIDTH:  # too wide for one line: a grid, so wrapped lines keep their column
                column = max(12, self.console.width // 3)
                grid = Table.grid(padding=(0, 1))
                grid.add_column(max_width=column, overflow="fold")
                grid.add_column(overflow="fold")
                for (a, b), labs in zip(rows, labels):  # the places break between cells, never inside "(t1, t2)"
                    grid.add_row(Text(pack(labs[:-1] + [labs[-1] + ":"], column)), Text(b))
                self.console.print(Padding(grid, (0, 0, 0, 5), expand=False))
            else:  # narrow: the places, then the entry below them, wrapped between words (a number only folds)
                for (a, b), labs in zip(rows, labels):
                    a = pack(labs[:-1] + [labs[-1] + ":"], self.console.width - 5)
                    self.console.print(Padding(Text(a, overflow="fold"), (0, 0, 0, 5), expand=False))
                    self.console.print(Padding(Text(b, overflow="fold"), (0, 0, 0, 7), expand=False))
        if sol is not None:
            self.arithmetic(self.worked(sol, step))
        for sentence in why(step, ex):
            self.console.print(Padding(Text(self.tx(sentence), style="italic"), (0, 0, 0, 3), expand=False))
        for sentence in self.notes.get(step.key, ()):
            self.console.print(Padding(Text(self.tx(t("explain.note", note=sentence)), style="yellow"), (0, 0, 0, 3),
                                       expand=False))
        if kind.heatmap:
            self.heatmap(step)

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
        bands = ", ".join(t("explain.heatmap.band", shade=shades[k] * 2, low=f"{k / 4 - 0.25:g}", high=f"{k / 4:g}")
                          for k in range(1, 5))
        self.console.print(Padding(Text(self.tx(t("explain.heatmap.legend", bands=bands)), style="dim"), (0, 0, 0, 2),
                                   expand=False))

    # -- whole solution -----------------------------------------------------
    def header(self, sol: Solution) -> None:
        ex = sol.exercise
        h0 = ex.heads[0]
        self.rule(ex.title)
        self.line(t("explain.exercise", id=ex.id) + (f"  ({ex.source})" if ex.source else ""), "dim")
        if ex.description:
            self.console.print(Padding(Text(self.tx(reflow(ex.description))), (0, 0, 0, 2), expand=False))
        self.line(t("explain.sizes", L=ex.L, L_k=ex.L_k, d_model=ex.d_model, heads=ex.num_heads,
                    d_k=h0.d_k, d_v=h0.d_v, d_out=ex.d_out), "bold")
        if ex.mask_kind == "causal":
            self.line(t("explain.mask.causal"))
            from ..production.view import notes  # causal with L ≠ L_k, or on cross-attention: said where the mask is

            for note in notes(ex):
                self.console.print(Padding(Text(self.tx(note), style="italic"), (0, 0, 0, 2), expand=False))
        elif ex.mask_kind == "matrix":
            self.line(t("explain.mask.matrix"))
        if ex.key_padding is not None:
            pads = [ex.key_labels[j] for j, keep in enumerate(ex.key_padding) if not keep]
            self.line(t("explain.mask.padding", keys=", ".join(pads) or "-"))
        from .v2 import header_lines

        for line in header_lines(ex):  # format v2: alignment, grouped K/V heads, the cache, the bias
            self.line(line)
        self.console.print()
        named = [("X", ex.x, ex.query_labels)]
        if ex.x_kv is not None:
            named.append(("X_kv", ex.x_kv, ex.key_labels))
        self.inputs(named)

    def weights_of(self, ex: Exercise, h: int) -> None:
        head = ex.heads[h]
        named = [(name, m, [f"r{i + 1}" for i in range(len(m))])
                 for name, m in (("W_Q", head.w_q), ("W_K", head.w_k), ("W_V", head.w_v))]
        named += [(name, (b,), [""]) for name, b in (("b_Q", head.b_q), ("b_K", head.b_k), ("b_V", head.b_v)) if b is not None]
        self.inputs(named)

    def solution(self, sol: Solution, head: int | None = None) -> None:
        ex = sol.exercise
        back = [s for s in sol.steps if KINDS[s.id].backward and (head is None or s.head in (None, head))
                and (head is not None or s.kv_head is None or s.head == s.shared[0])]  # a group's K/V gradient once
        sol = Solution(ex, tuple(s for s in sol.steps if not KINDS[s.id].backward))  # the forward pass first
        self.notes = self.notes_for(sol)
        self.header(sol)
        heads = range(ex.num_heads) if head is None else [head]
        number = 0
        for h in heads:
            self.console.print()
            self.rule(t("explain.head", head=h + 1))  # heads counted from 1 where a learner reads them
            self.weights_of(ex, h)
            for step in sol.for_head(h):
                number += 1
                self.step(number, step, ex, sol)
        if sol.layer_steps:
            self.console.print()
            self.rule(t("explain.layer"))
            if ex.w_o is not None:
                named = [("W_O", ex.w_o, [f"r{i + 1}" for i in range(len(ex.w_o))])]
                if ex.b_o is not None:
                    named.append(("b_O", (ex.b_o,), [""]))
                self.inputs(named)
            for step in sol.layer_steps:
                number += 1
                self.step(number, step, ex, sol)
        if back:  # explain --backward: the gradients in the order they are computed, output to input
            self.console.print()
            self.rule(t("explain.backward"))
            shown: tuple[int | None, int | None] = (None, None)
            for step in back:
                if ex.num_heads > 1 and (step.head, step.kv_head) != shown:  # a rule where the steps change head
                    shown = (step.head, step.kv_head)
                    if step.kv_head is not None:  # a group's K/V gradients: its K/V head's, once
                        self.rule(t("explain.kv_head", kv=step.kv_head + 1,
                                    heads=", ".join(str(h + 1) for h in step.shared)))
                    else:
                        self.rule(t("explain.head", head=step.head + 1) if step.head is not None else t("explain.layer"))
                number += 1
                self.step(number, step, ex)
        self.flow(sol, head, back)

    def flow(self, sol: Solution, head: int | None = None, back: Sequence[Step] = ()) -> None:
        """Every step's shape annotation, for one head (the one shown, else head 0) and the layer."""
        ex = sol.exercise
        self.console.print()
        self.line(t("explain.flow"), "bold")
        for step in sol.for_head(head or 0):
            self.line(f"  {step.annotation()}")
        if ex.num_heads > 1:
            self.line(f"  {t('explain.flow.each_head', heads=ex.num_heads)}", "dim")
        for step in sol.layer_steps:
            self.line(f"  {step.annotation()}")
        for step in back:
            if step.head in (None, head or 0):
                self.line(f"  {step.annotation()}")
        self.production(ex)

    def production(self, ex: Exercise) -> None:
        """The same layer as production code runs it: batched tensors, reshapes and transposes named."""
        from ..production.view import production_view

        steps, _ = production_view(ex)  # its notes are in the header, beside the mask
        self.console.print()
        self.line(t("explain.production"), "bold")
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", overflow="fold")
        table.add_column(overflow="fold")
        for step in steps:
            shape = Text(self.tx(f"{step.symbolic} = {step.concrete}"))
            shape.append("\n" + self.tx(step.note), style="dim")
            table.add_row(step.name, shape)
        self.console.print(Padding(table, (0, 0, 0, 2), expand=False))
        self.pytorch_masks(ex)

    def pytorch_masks(self, ex: Exercise) -> None:
        """Every mask of the exercise spelled as PyTorch takes it, with the polarity it has there."""
        from ..production.masks import pytorch_masks

        masks = pytorch_masks(ex)
        if not masks:
            return
        self.console.print()
        self.line(t("explain.production.masks"), "bold")
        api = None
        for m in masks:  # grouped by API: its name, then each argument and what it means there
            if m.api != api:
                api = m.api
                self.console.print(Padding(Text(m.api_name, style="bold", overflow="fold"), (0, 0, 0, 2), expand=False))
            self.console.print(Padding(Text(self.tx(m.code()), overflow="fold"), (0, 0, 0, 4), expand=False))
            meaning = t(f"explain.production.mask.{m.kind}")
            self.console.print(Padding(Text(self.tx(meaning), style="dim"), (0, 0, 0, 6), expand=False))


def render(sol: Solution, console: Console, *, head: int | None = None, precision: int = 4, brief: bool = False) -> None:
    """Print the worked solution of ``sol`` on ``console`` (``brief``: without the arithmetic)."""
    RichRenderer(console, precision, brief=brief).solution(sol, head)

"""The worked solution as a semantic HTML page (or a blank worksheet): what ``explain --export page.html`` writes.

Built from the outline (:func:`tutor.render.outline.outline`), as the other
formats are: a ``<main>`` holding the header (title, sizes, mask, the inputs
as tables), a ``<section>`` per part and per step (with an ``id``), each
step's formula as MathML (``<math display="block">``, from the LaTeX the
Markdown handout writes, :mod:`.mathml`), its shapes, its matrix as a
``<table>`` with a ``<caption>`` (its name and shape) and ``<th scope>``
headers (the token names or column indices) whose cells hold the exact value
(as text, and as MathML for a fraction, root or exponential, whose
``alttext`` is what assistive technology reads: the text form beside it is
``aria-hidden``) beside its decimal, the arithmetic on paper, why the step is there; the attention
weights as an inline ``<svg>`` heat map and the production view as an
inline ``<svg>`` diagram, each with a ``<title>`` and its numbers as text
(readable without colour).  A print style sheet starts each step on a new
page of A4 paper (``@page { size: A4 }``, for every language: the ISO size
China and most of the world print on), keeps a step's heading and formula
on the page of its table, and needs no background colour; a table wider
than the page (:data:`PAGE_EM`) is split by columns into tables that repeat
the row labels, so that every number prints (up to 16 tokens, 32 columns); the
"why" sentences are italic, except in Chinese (no italics for Han
characters).  Nothing is fetched: no ``<link>``, no
font, no script.  With ``blank`` every step's table has empty cells to
write in.  Every word comes from the catalogues; ``lang`` is the run's.

Returns text; nothing here prints.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from fractions import Fraction

from ..base.cells import width as cells
from ..base.messages import language, t
from ..exact.numbers import Exact, NegInf, Rat, Surd, frac_text
from ..exercise.record import Exercise
from ..steps import Solution, Step, Worked
from .markdown import EXACT_CELLS, Spans, annotation, formula, worksheet_line
from .mathml import ExactMathML, latex_mathml, math
from .outline import Flow, Header, Named, Outline, Part, Rule, StepItem, outline
from .text import decimal, is_plain, pretty


class Markup(str):
    """Text that is already HTML: put into a page as it is (any other ``str`` is escaped)."""


def esc(text: object) -> Markup:
    """``text`` (a sentence, a label, a number) escaped for HTML; markup stays as it is."""
    return text if isinstance(text, Markup) else Markup(html.escape(str(text), quote=True))


def el(tag: str, *children: object, **attrs: object) -> Markup:
    """``<tag attrs>children</tag>``: each child escaped unless it is :class:`Markup`; an attribute
    ``class_`` is ``class``, ``_`` in a name is ``-``; ``None`` and ``False`` attributes are left out."""
    shown = "".join(f' {k.rstrip("_").replace("_", "-")}="{html.escape(str(v), quote=True)}"'
                    for k, v in attrs.items() if v is not None and v is not False)
    return Markup(f"<{tag}{shown}>" + "".join(esc(c) for c in children) + f"</{tag}>" + ("\n" if tag in _BLOCKS else ""))


#: Elements followed by a line break in the file, so that the page reads (and diffs) line by line; whitespace
#: between them is not shown.
_BLOCKS = frozenset({"html", "head", "body", "main", "header", "section", "figure", "table", "caption", "thead",
                     "tbody", "tr", "ul", "li", "p", "h1", "h2", "h3", "h4", "dl", "dt", "dd", "pre", "div", "style"})


_CODE_SPAN = re.compile(r"`([^`\n]*)`")


def prose(text: object) -> Markup:
    """A sentence of the catalogue: escaped, its code spans (a command in backticks) as ``<code>``; a
    :class:`~tutor.render.markdown.Spans` (fields from a file or a roster) cut where its template cuts."""
    if isinstance(text, Spans):
        return Markup("".join(el("code", p) if code else esc(p) for p, code in text))
    parts = _CODE_SPAN.split(str(text))
    return Markup("".join(el("code", p) if i % 2 else esc(p) for i, p in enumerate(parts)))


def paragraph(text: object, class_: str | None = None) -> Markup:
    """A ``<p>`` of one sentence (or of several, kept as written)."""
    return el("p", prose(text), class_=class_)


_CSS = """
:root { color-scheme: light; }
body { font-family: "Noto Sans", "DejaVu Sans", "Noto Sans CJK SC", "Source Han Sans SC", sans-serif;
       line-height: 1.45; margin: 1.5em auto; max-width: 60em; padding: 0 1em; color: #111; background: #fff; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; border-bottom: 1px solid #999; } h3 { font-size: 1.1em; }
table { border-collapse: collapse; margin: 0.6em 0; }
caption { font-weight: bold; text-align: left; padding-bottom: 0.2em; white-space: nowrap; }
th, td { border: 1px solid #888; padding: 0.25em 0.6em; text-align: right; vertical-align: top; }
th { font-weight: bold; background: #f2f2f2; }
td math { math-style: normal; font-size: 1.15em; }
td .exact { display: block; }
td code.exact { font-size: 0.8em; color: #444; overflow-wrap: anywhere; }
td .decimal { display: block; color: #333; }
td.blank { min-width: 6em; height: 2.6em; }
.inputs { display: flex; flex-wrap: wrap; gap: 0 2em; }
.why { font-style: italic; }
:lang(zh) .why { font-style: normal; color: #333; }
.note { border-left: 3px solid #b58900; padding-left: 0.6em; }
dl.formula dt { font-weight: bold; } dl.formula dd { margin: 0 0 0.4em 1.5em; }
code, pre { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; }
svg { max-width: 100%; height: auto; }
figure { margin: 0.6em 0; } figcaption { font-weight: bold; margin-bottom: 0.3em; }
svg text { font-family: "DejaVu Sans Mono", Menlo, Consolas, "Noto Sans Mono CJK SC", monospace; font-size: 13px; fill: #111; }
@page { size: A4; margin: 15mm; }
@media print {
  body { max-width: none; margin: 0; color: #000; }
  section.step { break-before: page; }
  table, svg, figure, .lead { break-inside: avoid; }
  h2, h3, h4, dl.formula, caption { break-after: avoid; }
  table.tall, .lead.tall { break-inside: auto; }
  th { background: none; }
  a { color: inherit; text-decoration: none; }
}
"""


#: How wide a table may be, in em of the page's 16 px font, before it is split by columns into tables that
#: repeat the row labels (F17 of the class trial: an 8-token step's weights lost t6 to t8 past the right edge of
#: the printed page).  A4 is 210 mm; less the 15 mm margins of ``@page``, 180 mm = 680 px = 42.5 em; the rest is
#: room for the estimate of :func:`_cell_em`, which counts characters, not glyphs.
PAGE_EM = 38.0
#: How tall a step's table may be, in em, and still be kept on one page with its heading and formula (A4's
#: 297 mm less the margins is 63 em; the heading, the formula and the shapes take about 12).
PAGE_HEIGHT_EM = 48.0
#: Each cell's padding (0.6 em a side) and borders, in em.
CELL_PAD_EM = 1.3


def _text_em(text: str, size: float = 1.0, mono: bool = False) -> float:
    """About how wide ``text`` prints, in em of the page's font: a terminal cell is 0.6 em in the monospace
    font; the sans font's digits and letters average a little less, a CJK character fills two cells."""
    return cells(text) * (0.6 if mono else 0.58) * size


def _math_em(text: str) -> float:
    """About how wide the MathML of exact form ``text`` (``1/(2 + exp(-5/2) + 2*exp(-2))``) prints, in em: the
    characters MathML prints at 1.15 em (not ``exp(``, brackets, ``*``, spaces; a fraction's numerator sits
    over its denominator), each exponent's at 0.35 em (a superscript; a fraction there is
    stacked, its denominator under its numerator).  Measured on Chromium's print of an 8-token exercise's
    weights: 9.3 em estimated for a cell 7 em wide."""
    depth = 0
    for k, ch in enumerate(text):  # a fraction at the top: as wide as the wider of its numerator and denominator
        depth += (ch == "(") - (ch == ")")
        if ch == "/" and depth == 0:
            return max(_math_em(text[:k]), _math_em(text[k + 1:]))
    exponents = re.findall(r"exp\(([^()]*)\)", text)
    rest = re.sub(r"[()*\s]", "", re.sub(r"exp\(([^()]*)\)", "e", text))
    return _text_em(rest, 1.15) + sum(0.35 * len(re.sub(r"/\d+", "", a)) for a in exponents)


#: The width of one terminal cell in the production view's SVG, in px: 13 px monospace advances 7.8 px (0.6 em)
#: a cell, bold and a fallback font (a CJK one: two cells a character) a little more; and the room between a
#: box's name and its shape.
CELL_PX = 9
GAP_PX = 20


def _lang() -> str:
    return {"zh": "zh-CN"}.get(language(), language())


def _equals(e: Exact, value: float, places: int) -> str:
    """``= 0.5000`` when the decimal is the exact value, else ``≈ 0.3333``."""
    shown = decimal(value, places, keep_small=True)
    if isinstance(e, Rat) and (e.q * 10**places).denominator == 1:
        return "= " + shown
    return "≈ " + shown


def _shape(rows: int, cols: int) -> str:
    return f"{rows} × {cols}"


class PageRenderer:
    """Builds the HTML page of one outline at one precision (``blank``: a worksheet; ``student``: the worksheet
    handed to that student, which says how to hand in rather than where the answer key is)."""

    def __init__(self, precision: int = 4, blank: bool = False, student: str | None = None):
        self.places = precision
        self.blank = blank
        self.student = student
        self.exact_mathml = ExactMathML()
        self.ids: set[str] = set()

    def unique(self, wanted: str) -> str:
        """``wanted`` as an ``id`` no other element of the page has (``-2``, ``-3`` … added when taken)."""
        out, n = wanted, 1
        while out in self.ids:
            n += 1
            out = f"{wanted}-{n}"
        self.ids.add(out)
        return out

    # -- tables ---------------------------------------------------------------------------------------
    def table(self, caption: object, rows: Sequence[Sequence[Markup | str]], row_labels: Sequence[str],
              col_labels: Sequence[str], *, cell_class: str | None = None,
              widths: Sequence[Sequence[float]] | None = None, tall: bool = False) -> Markup:
        """A ``<table>`` with its ``<caption>``, a header row of ``col_labels`` (``<th scope="col">``) and
        each row headed by its label (``<th scope="row">``).

        A table wider than :data:`PAGE_EM` (``widths``: each cell's width in em, else estimated from its
        text) is several tables, each of as many columns as fit, each with the row labels and a caption that
        says which columns it holds (``weights, shape 16 × 16: columns t1 to t8``): on paper, nothing is cut.
        ``tall``: taller than a printed page, so it may break across pages (its header row repeated there) where
        a table otherwise moves whole to the next page, leaving its heading alone on the one before."""
        if widths is None:
            widths = [[_text_em(re.sub(r"<[^>]*>", "", str(c))) for c in row] for row in rows]
        label_em = max((_text_em(r) for r in row_labels), default=0.0) + CELL_PAD_EM
        col_em = [max([_text_em(c) for c in col_labels[j:j + 1]] + [row[j] for row in widths]) + CELL_PAD_EM
                  for j in range(len(col_labels))]
        chunks = _column_chunks(col_em, PAGE_EM - label_em)
        out = []
        for first, last in chunks:
            shown = caption if len(chunks) == 1 else (
                t("html.caption.column", caption=caption, label=col_labels[first]) if first == last else
                t("html.caption.columns", caption=caption, first=col_labels[first], last=col_labels[last]))
            head = el("tr", el("td"), *(el("th", c, scope="col") for c in col_labels[first:last + 1]))
            body = [el("tr", el("th", label, scope="row"), *(el("td", c, class_=cell_class) for c in row[first:last + 1]))
                    for label, row in zip(row_labels, rows, strict=True)]
            out.append(el("table", el("caption", shown), el("thead", head), el("tbody", *body), class_="tall" if tall else None))
        return Markup("".join(out))

    def named(self, n: Named) -> Markup:
        """An input matrix (exact rationals) as a table: rows labelled, columns ``d1 …``."""
        m = n.matrix
        labels = [r or n.name for r in n.rows]  # a bias [1, n] has one empty label: its name heads the row
        cells_ = [[self.rational(v) for v in row] for row in m]
        return self.table(t("html.caption", name=n.name, shape=_shape(len(m), len(m[0]))), cells_, labels,
                          [f"d{j + 1}" for j in range(len(m[0]))])

    def rational(self, q: Fraction) -> Markup:
        """An input entry: the integer as it is, a fraction as text and MathML."""
        text = frac_text(q)
        if q.denominator == 1:
            return esc(pretty(text))
        return Markup(math(self.exact_mathml(Rat(q)), alttext=text) + el("code", text, class_="exact", aria_hidden="true"))

    def inputs(self, named: Sequence[Named]) -> Markup:
        return el("div", *(self.named(n) for n in named), class_="inputs") if named else Markup("")

    def entry(self, e: Exact, value: float, *, with_mathml: bool) -> Markup:
        """One cell of a step's table: the exact value as MathML (a fraction, a root, an exponential) and as
        text in the answer grammar (what a solution file takes, as sympy writes it: ``1/(1 + 2*exp(sqrt(2)))``),
        then its decimal; an integer or −∞ alone, as the terminal writes it."""
        text = str(e)
        if is_plain(text):
            return el("span", pretty(text), class_="exact")
        shown = el("span", _equals(e, value, self.places), class_="decimal")
        if not with_mathml:
            return shown
        # the MathML (its alttext) is what assistive technology reads; the text form says it again: hidden from it
        return Markup(math(self.exact_mathml(e), alttext=pretty(text)) + el("code", text, class_="exact", aria_hidden="true")
                      + shown)

    def step_table(self, step: Step) -> tuple[Markup, bool]:
        """The step's matrix as a table (empty cells on a worksheet), and whether it is in decimals only
        (more than :data:`~tutor.render.markdown.EXACT_CELLS` entries that are not plain numbers)."""
        rows, cols = step.shape
        caption = t("html.caption", name=step.result.name, shape=_shape(rows, cols))
        if self.blank:
            return self.table(caption, [[""] * cols for _ in range(rows)], step.row_labels, step.col_labels,
                              cell_class="blank", widths=[[6.0] * cols for _ in range(rows)]), False  # min-width 6em
        flat = [e for row in step.exact for e in row]
        plain = all(isinstance(e, (Rat, Surd, NegInf)) for e in flat)
        decimals_only = len(flat) > EXACT_CELLS and not plain
        body = [[self.entry(e, v, with_mathml=not decimals_only) for e, v in zip(er, vr, strict=True)]
                for er, vr in zip(step.exact, step.value, strict=True)]
        widths = [[self.entry_em(e, v, with_mathml=not decimals_only) for e, v in zip(er, vr, strict=True)]
                  for er, vr in zip(step.exact, step.value, strict=True)]
        # rows of exact forms (MathML over its text form over the decimal) are about 5.5 em high, others 2 em
        tall = sum(2.0 if decimals_only or all(is_plain(str(e)) for e in row) else 5.5 for row in step.exact) > PAGE_HEIGHT_EM
        return self.table(caption, body, step.row_labels, step.col_labels, widths=widths, tall=tall), decimals_only

    def entry_em(self, e: Exact, value: float, *, with_mathml: bool) -> float:
        """About how wide :meth:`entry` prints, in em: its widest line.  The MathML cannot break: it is taken
        as wide as its text form without what MathML does not print (``exp(``, brackets, ``*``, the ``1/`` of a
        fraction, whose numerator sits over the denominator), measured against Chromium's print of an 8-token
        exercise; the text form at 0.8 em breaks anywhere (``overflow-wrap``), so it counts at most 6 em; then
        the decimal."""
        text = str(e)
        if is_plain(text):
            return _text_em(pretty(text))
        shown = _text_em(_equals(e, value, self.places))
        if not with_mathml:
            return shown
        return max(shown, _math_em(text), min(6.0, _text_em(text, 0.8, mono=True)))

    # -- the pieces of a step -------------------------------------------------------------------------
    def arithmetic(self, pieces: Sequence[Worked]) -> Markup:
        """The step worked out: a list item per entry or row, its further lines in a list under it."""
        if not pieces:
            return Markup("")
        items = []
        for piece in pieces:
            rest = el("ul", *(el("li", str(line)) for line in piece.lines[1:])) if len(piece.lines) > 1 else ""
            items.append(el("li", piece.label + piece.sep + str(piece.lines[0]), rest))
        return Markup(el("h4", t("explain.worked.label")) + el("ul", *items, class_="worked"))

    def step(self, item: StepItem, o: Outline) -> Markup:
        """One step as a ``<section>``: heading, formula and shapes (MathML), the axes, the table, the
        arithmetic, why it is there, the notes, the heat map."""
        step = item.step
        sid = self.unique(f"step-{item.number}")
        lead: list[Markup | str] = [el("h3", f"{item.number}. {item.title}")]
        lead.append(el("dl", el("dt", t("html.formula")),
                       el("dd", Markup(math(latex_mathml(formula(step, o.exercise)), block=True, alttext=step.formula))),
                       el("dt", t("html.shapes")),
                       el("dd", Markup(math(latex_mathml(annotation(step)), alttext=step.annotation()))),
                       class_="formula"))
        if item.axes is not None:
            lead.append(paragraph(item.axes))
        table, decimals_only = self.step_table(step)
        # the heading and the formula stay on the page of the (first) table: printed, a heading alone at the foot
        # of a page with its table on the next was F17 of the class trial
        first_end = table.find("</table>") + len("</table>\n")
        lead.append(Markup(table[:first_end]))
        parts: list[Markup | str] = [el("div", *lead, class_="lead tall" if 'class="tall"' in table else "lead"),
                                     Markup(table[first_end:])]
        if decimals_only:
            parts.append(paragraph(t("handout.decimals_only", id=o.exercise.id)))
        parts.append(self.arithmetic(item.worked))
        parts += [paragraph(sentence, "why") for sentence in item.why]
        parts += [paragraph(t("explain.note", note=sentence), "note") for sentence in item.notes]
        if item.heatmap:
            parts.append(self.heatmap(step, sid))
        return el("section", *parts, id=sid, class_="step")

    def heatmap(self, step: Step, sid: str) -> Markup:
        """The weights as an inline SVG: a grid of cells shaded by weight (darker = more), each holding its
        weight to two decimals, so no colour is needed to read it; ``<title>`` and ``<desc>`` say what it is."""
        rows, cols = step.shape
        label_w = 16 + 8 * max(cells(r) for r in step.row_labels)
        cw, ch, top = max(64, 16 + 8 * max(cells(c) for c in step.col_labels)), 30, 26
        w, h = label_w + cw * cols + 2, top + ch * rows + 2
        title_id, desc_id = self.unique(f"{sid}-heatmap-title"), self.unique(f"{sid}-heatmap-desc")
        out = [el("title", t("explain.heatmap", head=(step.head or 0) + 1), id=title_id),
               el("desc", t("html.heatmap.desc"), id=desc_id)]
        for j, c in enumerate(step.col_labels):
            out.append(el("text", c, x=label_w + cw * j + cw // 2, y=top - 8, text_anchor="middle"))
        for i, (r, row, exact_row) in enumerate(zip(step.row_labels, step.value, step.exact, strict=True)):
            y = top + ch * i
            out.append(el("text", r, x=label_w - 8, y=y + ch // 2 + 5, text_anchor="end"))
            for j, (v, e) in enumerate(zip(row, exact_row, strict=True)):
                zero = isinstance(e, Rat) and e.q == 0
                opacity = 0 if zero else round(0.08 + 0.62 * max(0.0, min(1.0, v)), 3)
                x = label_w + cw * j
                out.append(Markup(f'<rect x="{x}" y="{y}" width="{cw}" height="{ch}" fill="#2f5fb3" '
                                  f'fill-opacity="{opacity}" stroke="#555"></rect>'))
                out.append(el("text", decimal(v, 2, keep_small=True), x=x + cw // 2, y=y + ch // 2 + 5,
                              text_anchor="middle"))
        return el("figure", el("figcaption", t("explain.heatmap", head=(step.head or 0) + 1)),
                  Markup(f'<svg role="img" aria-labelledby="{title_id}" aria-describedby="{desc_id}" '
                         f'viewBox="0 0 {w} {h}" width="{w}" height="{h}">' + "".join(out) + "</svg>"),
                  class_="heatmap")

    # -- whole page -----------------------------------------------------------------------------------
    def header(self, h: Header, ex: Exercise) -> Markup:
        """The title, the exercise's id, the description, sizes, the mask (and its matrix, rows headed by the
        queries and columns by the keys), padding, format v2's sentences, the inputs."""
        parts: list[Markup | str] = [el("h1", h.title)]
        parts.append(paragraph(Spans.of("html.exercise.source", id=h.id, source=h.source) if h.source
                               else t("explain.exercise", id=h.id)))
        if self.blank:
            parts.append(paragraph(worksheet_line(h.id, self.student)))
        if h.description is not None:
            parts += [paragraph(p) for p in h.description.split("\n\n")]
        parts.append(paragraph(h.sizes))
        if h.mask is not None:
            parts.append(paragraph(h.mask))
        parts += [paragraph(n, "why") for n in h.mask_notes]
        if h.mask_matrix is not None:
            m = h.mask_matrix
            parts.append(paragraph(t("html.mask.legend")))
            parts.append(self.table(t("html.caption", name="M", shape=_shape(len(m), len(m[0]))),
                                    [["T" if v else "F" for v in row] for row in m],
                                    _labels(ex.query_labels, len(m)), _labels(ex.key_labels, len(m[0]))))
        if h.padding is not None:
            parts.append(paragraph(h.padding))
        parts += [paragraph(line) for line in h.v2]
        parts.append(self.inputs(h.inputs))
        return el("header", *parts)

    def part(self, n: int, part: Part, o: Outline) -> Markup:
        out: list[Markup | str] = [el("h2", part.title), self.inputs(part.inputs)]
        for entry in part.entries:
            out.append(el("h3", entry.title, class_="rule") if isinstance(entry, Rule) else self.step(entry, o))
        return el("section", *out, id=self.unique(f"part-{n}"), class_="part")

    def flow(self, f: Flow) -> Markup:
        """Every step's shape annotation as MathML, as the terminal's dimension flow lists them."""
        items = [el("li", Markup(math(latex_mathml(annotation(s)), alttext=s.annotation()))) for s in f.steps]
        if f.heads > 1:
            items.append(el("li", t("explain.flow.each_head", heads=f.heads)))
        items += [el("li", Markup(math(latex_mathml(annotation(s)), alttext=s.annotation()))) for s in (*f.layer, *f.backward)]
        return el("section", el("h2", t("explain.flow")), el("ul", *items), id=self.unique("flow"))

    def production(self, o: Outline) -> Markup:
        """The production view as an inline SVG (a box per tensor: its name, its shape as symbols and in
        numbers, what made it), then every mask as PyTorch takes it, as code."""
        title_id, desc_id = self.unique("production-title"), self.unique("production-desc")
        rows = [(s.name, f"{s.symbolic} = {s.concrete}", wrap(str(s.note), 80)) for s in o.production]
        # laid out by measured widths: a name's terminal cells times CELL_PX, then GAP_PX before its shape
        name_w = 10 + CELL_PX * max((cells(n) for n, _, _ in rows), default=4) + GAP_PX
        text_w = CELL_PX * max((cells(line) for _, shape, note in rows for line in (shape, *note)), default=20)
        w = name_w + text_w + 16
        out = [el("title", t("explain.production"), id=title_id), el("desc", t("html.production.desc"), id=desc_id)]
        y = 8
        for n, (name, shape, note) in enumerate(rows):
            box_h = 22 + 18 * len(note)
            if n:  # an arrow from the box above
                out.append(Markup(f'<path d="M {name_w // 2} {y - 14} V {y - 2}" stroke="#555"></path>'
                                  f'<path d="M {name_w // 2 - 4} {y - 6} L {name_w // 2} {y} L {name_w // 2 + 4} {y - 6} Z" '
                                  'fill="#555"></path>'))
            out.append(Markup(f'<rect x="1" y="{y}" width="{w - 2}" height="{box_h}" rx="4" fill="none" stroke="#555"></rect>'))
            out.append(el("text", name, x=10, y=y + 17, font_weight="bold"))
            out.append(el("text", shape, x=name_w, y=y + 17))
            for k, line in enumerate(note):
                out.append(el("text", line, x=name_w, y=y + 35 + 18 * k, fill="#444"))
            y += box_h + 16
        svg = Markup(f'<svg role="img" aria-labelledby="{title_id}" aria-describedby="{desc_id}" '
                     f'viewBox="0 0 {w} {y}" width="{w}" height="{y}">' + "".join(out) + "</svg>")
        parts: list[Markup | str] = [el("h2", t("explain.production")), el("figure", svg, class_="production")]
        if o.masks:
            parts.append(el("h3", t("explain.production.masks")))
            api = None
            for item in o.masks:
                m = item.mask
                if m.api != api:
                    api = m.api
                    parts.append(el("h4", str(m.api_name)))
                parts.append(el("pre", el("code", m.code())))
                parts.append(paragraph(item.meaning))
        return el("section", *parts, id=self.unique("production"))

    def render(self, o: Outline) -> str:
        """The whole page of outline ``o``."""
        body = [self.header(o.header, o.exercise), *(self.part(n, p, o) for n, p in enumerate(o.parts, 1)), self.flow(o.flow),
                self.production(o)]
        head = el("head", Markup('<meta charset="UTF-8">'),
                  Markup('<meta name="viewport" content="width=device-width, initial-scale=1">'),
                  el("title", o.header.title), el("style", Markup(_CSS)))
        return "<!DOCTYPE html>\n" + el("html", head, el("body", el("main", *body)), lang=_lang()) + "\n"


def _column_chunks(widths: Sequence[float], room: float) -> list[tuple[int, int]]:
    """The columns of a table of column ``widths`` (em) in runs that fit ``room`` (em), as ``(first, last)``
    indices: as few runs as fit, of about the same number of columns each; a column wider than ``room`` alone.
    ``_column_chunks([5] * 8, 22) == [(0, 3), (4, 7)]``."""
    n = len(widths)
    if n == 0 or sum(widths) <= room:
        return [(0, max(n - 1, 0))]
    greedy: list[tuple[int, int]] = []
    start, used = 0, 0.0
    for j, w in enumerate(widths):
        if j > start and used + w > room:
            greedy.append((start, j - 1))
            start, used = j, 0.0
        used += w
    greedy.append((start, n - 1))
    k = len(greedy)  # as many runs, balanced (16 columns as 8 + 8, not 13 + 3), when they fit
    size, extra = divmod(n, k)
    even, start = [], 0
    for i in range(k):
        end = start + size + (1 if i < extra else 0)
        even.append((start, end - 1))
        start = end
    fits = all(sum(widths[a:b + 1]) <= room or a == b for a, b in even)
    return even if fits else greedy


def _labels(labels: Sequence[str], n: int) -> list[str]:
    """``labels`` when there are ``n`` of them, else the positions ``1 … n``."""
    return list(labels) if len(labels) == n else [str(i + 1) for i in range(n)]


def wrap(text: str, room: int) -> list[str]:
    """``text`` in lines of at most ``room`` terminal cells, broken at spaces, or anywhere in a run
    without one (Chinese); a line is never empty."""
    out: list[str] = []
    line = ""
    for token in re.findall(r"\S+\s*|\s+", text):
        pieces = [token] if cells(token.rstrip()) <= room else list(token)
        for piece in pieces:
            if line and cells((line + piece).rstrip()) > room:
                out.append(line.rstrip())
                line = piece.lstrip()
            else:
                line += piece
    if line.strip() or not out:
        out.append(line.rstrip())
    return out


def page(sol: Solution, *, head: int | None = None, precision: int = 4, blank: bool = False, brief: bool = False,
         student: str | None = None) -> str:
    """The HTML page of ``sol``'s worked solution (only ``head``, 0-based, when given; the layer's steps are kept):
    a worksheet when ``blank`` (``student``: handed to that student); ``brief`` leaves out the arithmetic.  Raises
    :class:`~tutor.base.errors.ShapeError` as :func:`tutor.render.outline.outline`."""
    return PageRenderer(precision, blank, student).render(outline(sol, head=head, precision=precision, brief=brief, blank=blank))

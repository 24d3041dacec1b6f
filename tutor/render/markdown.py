"""The worked solution as a Markdown handout (or a blank worksheet).

Math is written for KaTeX and GitHub: ``$…$`` inline, ``$$…$$`` blocks on
lines of their own, matrices as ``bmatrix``.  Exact entries come from
sympy's LaTeX printer (each entry's :meth:`~tutor.exact.numbers.Exact.to_sympy`,
cached by its text, since many entries repeat); a matrix with more than
:data:`EXACT_CELLS` entries that are not all plain numbers is shown in
decimals only, so a handout at the size limits takes seconds, not minutes.
With ``blank=True`` the layout is the same but every step's matrix is left
empty (the inputs are still shown): a worksheet.

Returns text; nothing here prints.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from fractions import Fraction
from string import Template
from typing import TYPE_CHECKING

from ..base.decimals import tex
from ..base.messages import t
from ..exact.numbers import Exact, Mix, MixSum, NegInf, Rat, Surd
from ..exercise.record import Exercise, Matrix
from ..steps import KINDS, Operand, Solution, Step, Worked
from .outline import Flow, Header, Named, Outline, Rule, StepItem, outline

if TYPE_CHECKING:
    import sympy

EXACT_CELLS = 64  # larger matrices of softmax expressions are shown in decimals only
BLANK_CELL = r"\qquad"


def _mix_sympy(m: Mix) -> sympy.Expr:
    """A softmax mix in the form the terminal prints: divided by one term's exponential.

    ``Σ c_j e^{a_j} / Σ e^{a_j}`` with numerator and denominator divided by
    ``e^{a_ref}`` (the numerator's exponent when it has only one, else the
    row's largest), and the coefficients' common denominator moved down:
    ``1/(1 + 2e^{√2})`` rather than ``e^{√2}/(e^{√2} + 2e^{2√2})``.  Equal
    in value to :meth:`Mix.to_sympy` (a test checks it).
    """
    import sympy

    row, live = m.row, m.row.live
    nz = [row.keys[j] for j in live if m.cnums[j]]
    ref = nz[0] if nz and all(n == nz[0] for n in nz) else row.top

    def e(j: int) -> sympy.Expr:
        return sympy.exp(row.sympy_exponent(j, ref))

    g = math.gcd(m.cden, *(m.cnums[j] for j in live))
    k = m.cden // g
    num = sympy.Add(*(sympy.Integer(m.cnums[j] // g) * e(j) for j in live if m.cnums[j]))
    den = sympy.Add(*(e(j) for j in live))
    return num / (sympy.Mul(k, den, evaluate=False) if k != 1 else den)


def exact_sympy(e: Exact) -> sympy.Expr:
    """The sympy expression a handout prints for ``e`` (:meth:`Exact.to_sympy`, mixes in the terminal's form)."""
    import sympy

    if isinstance(e, Mix):
        return _mix_sympy(e)
    if isinstance(e, MixSum):
        return sympy.Add(*(_mix_sympy(p) for p in e.parts)) + sympy.Rational(e.const.numerator, e.const.denominator)
    return e.to_sympy()


class _Latex:
    """sympy's LaTeX for exact entries, cached by the entry's text."""

    def __init__(self) -> None:
        self.cache: dict[str, str] = {}

    def __call__(self, e: Exact) -> str:
        key = str(e)
        out = self.cache.get(key)
        if out is None:
            import sympy  # only when a handout is asked for

            out = self.cache[key] = sympy.latex(exact_sympy(e))
        return out


def _fraction_latex(latex: _Latex, q: Fraction) -> str:
    return latex(Rat(q))


def bmatrix(rows: Sequence[Sequence[str]]) -> str:
    r"""``\begin{bmatrix} a & b \\ c & d \end{bmatrix}`` of preformatted LaTeX cells."""
    return r"\begin{bmatrix} " + r" \\ ".join(" & ".join(r) for r in rows) + r" \end{bmatrix}"


_CODE_SPAN = re.compile(r"(`[^`\n]*`)")  # split() puts the spans at the odd indices
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>&$~|#])")
_BLOCK_START = re.compile(r"^(\s*)([-+=>]|\d+(?=[.)]))")


class Spans(tuple[tuple[str, bool], ...]):
    """A catalogue sentence with its fields filled in, cut where the *template* opens and closes a code span
    (a command in backticks): ``(text, in_code)`` pieces, the fields' text inside them as given.

    A field's backtick or ``|`` is the data's, never markup: a student id ``a`b`` inside
    ``student: {student}`` stays inside that code span, and a renderer writes each piece in its own notation
    (:func:`_escape_spans` for Markdown, ``page.prose`` for HTML).  Cutting after filling in would take the
    data's backticks for the template's.
    """

    __slots__ = ()

    @classmethod
    def of(cls, key: str, /, **fields: object) -> Spans:
        """:func:`t` of ``key`` with ``fields``, cut at the template's code spans.  Each text field is filled in
        as a private-use placeholder first (the catalogue has none), so the cut sees the template's
        backticks only; numbers keep their counted specs (``{n:rows}``)."""
        texts = {name: v for name, v in fields.items() if isinstance(v, str)}
        marks = {name: chr(0xE000 + i) for i, name in enumerate(texts)}
        filled = t(key, **{**fields, **marks})
        back = {m: texts[name] for name, m in marks.items()}
        pieces = ((p[1:-1] if i % 2 else p, bool(i % 2)) for i, p in enumerate(_CODE_SPAN.split(filled)))
        return cls(("".join(back.get(c, c) for c in p), code) for p, code in pieces if p or code)

    def __str__(self) -> str:
        return "".join(f"`{p}`" if code else p for p, code in self)


def code_span(text: str) -> str:
    """``text`` as one Markdown code span, shown as written (CommonMark 0.31, section 6.1): fenced by one
    backtick more than its longest run of backticks, and padded with a space at each end when it starts or
    ends with a backtick or a space (one space each side is what a reader strips): the id a`b is written
    between two backticks on each side, x` as two backticks, a space, x`, a space and two backticks."""
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return fence + pad + text + pad + fence


def _escape_spans(s: Spans) -> str:
    """A sentence of :class:`Spans` in Markdown: its code spans fenced by :func:`code_span`, the rest escaped
    as :func:`_escape` escapes plain text (a field's backticks and ``|`` included)."""
    out = "".join(code_span(p) if code else _MD_SPECIAL.sub(r"\\\1", p) for p, code in s)
    return _block_start(out)


def _block_start(out: str) -> str:
    """A list, quote or heading marker at the start of ``out`` escaped (``- x`` -> ``\\- x``, ``1. x`` -> ``1\\. x``)."""
    return _BLOCK_START.sub(lambda m: m[1] + (m[2] + "\\" if m[2][0].isdigit() else "\\" + m[2]), out, count=1)


def _escape_plain(text: str) -> str:
    """Text from a file that is no Markdown (a title): every markup character escaped, backticks too."""
    return _block_start(_MD_SPECIAL.sub(r"\\\1", text))


def _escape(text: str) -> str:
    """A sentence of the catalogue inside Markdown, shown as written (one with text from a file or a roster in
    a code span is a :class:`Spans`, written by :func:`_escape_spans`; a title is :func:`_escape_plain`).

    Every character that could start Markdown or HTML -- emphasis ``_ *``,
    links ``[ ]``, raw HTML and entities ``< > &``, math ``$``, strike-through
    ``~``, table cells ``|``, headings ``#``, a stray backtick -- is
    backslash-escaped, as is a list, quote or heading marker at the start;
    a code span (a command in backticks) is left as it is, and is inert
    anyway.  A ``<script>`` lands in the ``.md`` as ``\\<script\\>``.
    """
    parts = _CODE_SPAN.split(text)
    return _block_start("".join(p if i % 2 else _MD_SPECIAL.sub(r"\\\1", p) for i, p in enumerate(parts)))


def _markdown(text: str) -> str:
    """Markdown from a file (a description): its syntax is kept, but raw HTML and entities show as text."""
    parts = _CODE_SPAN.split(text)
    return "".join(p if i % 2 else re.sub(r"([<&])", r"\\\1", p) for i, p in enumerate(parts))


_WORD = re.compile(r"[A-Za-z]{2,}")


def tex_name(name: str) -> str:
    r"""An operand's name in LaTeX: ``W_Q`` -> ``W_{Q}``, ``Kᵀ`` -> ``K^\top``, ``head_1`` -> ``\text{head}_{1}``, ``√2`` -> ``\sqrt{2}``."""
    if name.startswith("√"):
        return rf"\sqrt{{{name[1:]}}}"
    top = name.endswith("ᵀ")
    base = name.rstrip("ᵀ")
    stem, _, sub = base.partition("_")
    if _WORD.fullmatch(stem):
        stem = r"\text{" + stem + "}"
    if sub:  # a gradient's name nests: d_W_K -> d_{W_{K}}, d_head_1 -> d_{\text{head}_{1}}
        inner = tex_name(sub) if "_" in sub else r"\text{" + sub + "}" if len(sub) > 1 else sub
        stem += "_{" + inner + "}"
    return stem + (r"^\top" if top else "")


def _shape(o: Operand) -> str:
    return r"\,[" + r" \times ".join(map(str, o.shape)) + "]" if o.shape else ""


def annotation(step: Step) -> str:
    r"""The shape annotation in LaTeX: ``X\,[3 \times 4] \cdot W_{Q}\,[4 \times 2] \to Q\,[3 \times 2]``."""
    parts = [tex_name(o.name) + _shape(o) for o in step.operands]
    if step.op == "softmax":
        left = rf"\operatorname{{softmax}}({parts[0]})"
    elif step.op == "concat":
        left = "[" + ", ".join(parts) + "]"
    else:
        op = {"·": r"\cdot", "/": "/", "+": "+"}.get(step.op, step.op)
        left = parts[0]
        for o, text in zip(step.operands[1:], parts[1:]):
            left += f" {'+' if o.name.startswith('b_') else op} {text}"
    out = rf"{left} \to {tex_name(step.result.name)}{_shape(step.result)}"
    if step.kv_head is not None:  # grouped K/V heads: whose matrix this is (as the terminal's annotation says)
        key = "annotation.with_summed" if KINDS[step.id].backward else "annotation.with_shared"
        marker = "\x00"  # where the sentence puts the annotation: the math, between its words in \text{…}
        before, _, after = t(key, annotation=marker, kv=step.kv_head + 1,
                             heads=t("list.sep").join(str(h + 1) for h in step.shared)).partition(marker)
        out = _tex_text(before) + out + _tex_text(after)
    return out


def _tex_text(words: str) -> str:
    r"""Words of a sentence beside the math of an annotation, as TeX in math mode: ``\text{…}``, a space at
    either end written ``\ `` and a comma before the words kept in math (``, K/V head 1`` ->
    ``,\ \text{K/V head 1}``, as the annotation always read); nothing for none."""
    if not words:
        return ""
    lead = r",\ " if words.startswith(", ") else r"\ " if words.startswith(" ") else ""
    tail = r"\ " if words.endswith(" ") else ""
    body = words.removeprefix(",").strip(" ")
    return lead + (r"\text{" + _escape_tex(body) + "}" if body else "") + tail


def _escape_tex(text: str) -> str:
    """Plain text inside ``\text{…}``: the characters TeX treats specially escaped."""
    return re.sub(r"([\\{}$&#%_^~])", r"\\\1", text)


def formula(step: Step, ex: Exercise) -> str:
    """The step's formula in LaTeX (the same formula as :attr:`Step.formula`), from its kind's template.

    A kind without a template is the product of its operands (``Q = X W_Q + b_Q``).
    """
    names = [o.name for o in step.operands]
    bias = next((tex_name(n) for n in names if n.startswith("b_")), None)
    kind = KINDS[step.id]
    template = (ex.rope is not None and kind.latex_rope) or kind.latex or "$result = $op0 $op1$plus"
    d_k = ex.heads[step.head or 0].d_k
    fields = {
        "result": tex_name(step.name), "op0": tex_name(names[0]), "op1": tex_name(names[1]) if len(names) > 1 else "",
        "plus": f" + {bias}" if bias else "", "operands": ", ".join(tex_name(n) for n in names),
        "head": str((step.head or 0) + 1), "src": names[0], "d_k": str(d_k),
        "root": "" if _sqrt_latex(d_k) == rf"\sqrt{{{d_k}}}" else f" = {_sqrt_latex(d_k)}",
        # format v2 in the backward pass: a group's K/V gradient sums its query heads; a cache's new rows
        "sigma": "", "h": "", "new": t("latex.rows_of", rows=t("latex.new_rows")) if ex.has_cache else "",
        "cases": t("latex.masked.cases", i="i", j="j"), "head_columns": t("latex.head_columns", head=(step.head or 0) + 1),
    }
    if step.kv_head is not None and KINDS[step.id].backward and len(step.shared) > 1:
        fields["sigma"] = r"\sum_{h \in \{" + ", ".join(str(h + 1) for h in step.shared) + r"\}} "
        fields["h"] = "_h"
    return Template(template).substitute(fields)


def _sqrt_latex(n: int) -> str:
    from ..exact.numbers import square_free

    s, r = square_free(n)
    if r == 1:
        return str(s)
    return rf"{s}\sqrt{{{r}}}" if s != 1 else rf"\sqrt{{{r}}}"


def _plain(e: Exact) -> bool:
    return isinstance(e, (Rat, Surd, NegInf))


class MarkdownRenderer:
    """Builds the Markdown of one solution at one precision; ``blank`` leaves the answers empty;
    ``brief`` leaves out the arithmetic a hand-sized exercise shows under each step."""

    def __init__(self, precision: int = 4, blank: bool = False, *, brief: bool = False, student: str | None = None):
        self.places = precision
        self.blank = blank
        self.student = student  # a worksheet handed to this student (handouts): how to hand in, no answer key
        self.brief = brief
        self.latex = _Latex()
        self.lines: list[str] = []

    def add(self, *lines: str) -> None:
        """Append lines of Markdown."""
        self.lines.extend(lines)

    def block(self, tex: str) -> None:
        """A display-math block: ``$$``, the LaTeX on one line, ``$$``."""
        self.add("$$", tex, "$$", "")

    def input_matrix(self, m: Matrix) -> str:
        """An input matrix (exact rationals) as a ``bmatrix``."""
        return bmatrix([[_fraction_latex(self.latex, v) for v in row] for row in m])

    def inputs(self, named: Sequence[Named]) -> None:
        """Named input matrices side by side in one block: ``X = [...], W_Q = [...]``."""
        self.block(r",\quad ".join(f"{tex_name(n.name)} = {self.input_matrix(n.matrix)}" for n in named))

    def values(self, step: Step) -> tuple[str, bool]:
        """``name = [exact] ≈ [decimals]`` (``[blank]`` on a worksheet), and whether only decimals are shown."""
        name = tex_name(step.result.name)
        rows, cols = step.shape
        if self.blank:
            return f"{name} = " + bmatrix([[BLANK_CELL] * cols for _ in range(rows)]), False
        cells = [e for row in step.exact for e in row]
        if all(isinstance(e, NegInf) or (isinstance(e, Rat) and e.q.denominator == 1) for e in cells):
            return f"{name} = " + bmatrix([[self.latex(e) for e in row] for row in step.exact]), False
        decimals = bmatrix([[tex(v, self.places, keep_small=True) for v in row] for row in step.value])
        if len(cells) > EXACT_CELLS and not all(_plain(e) for e in cells):
            return rf"{name} \approx {decimals}", True
        return f"{name} = " + bmatrix([[self.latex(e) for e in row] for row in step.exact]) + rf" \approx {decimals}", False

    def arithmetic(self, pieces: Sequence[Worked]) -> None:
        """The step worked out: one list item per entry or row, a row's further lines nested under it."""
        if not pieces:
            return
        self.add(f"**{_escape(t('explain.worked.label'))}**", "")
        for piece in pieces:
            self.add(f"- {_escape(piece.label + piece.sep + str(piece.lines[0]))}")
            self.add(*(f"  - {_escape(str(line))}" for line in piece.lines[1:]))
        self.add("")

    def step(self, item: StepItem, ex: Exercise) -> None:
        """One step: its title, formula, shape annotation, values (or blanks), its arithmetic, why it is
        there and the notes on what it cannot catch (as the outline has them)."""
        step = item.step
        self.add(f"### {item.number}. {item.title}", "")
        self.add(f"${formula(step, ex)}$", "", f"${annotation(step)}$", "")
        if item.axes is not None:
            self.add(_escape(item.axes), "")
        tex, decimals_only = self.values(step)
        self.block(tex)
        if decimals_only:
            self.add(_escape(t("handout.decimals_only", id=ex.id)), "")
        self.arithmetic(item.worked)
        for sentence in item.why:
            self.add(f"> {_escape(sentence)}", "")
        for sentence in item.notes:
            self.add("> " + t("explain.note.markdown", note=_escape(sentence)), "")

    def header(self, h: Header) -> None:
        """Title, id, description, sizes, mask, and the input sequence(s)."""
        self.add(f"# {_escape_plain(h.title)}", "")  # a title from a file: its backticks are text
        self.add(f"*{_escape(t('explain.exercise', id=h.id))}*", "")
        if self.blank:
            self.add(_escape_spans(worksheet_line(h.id, self.student)), "")
        if h.description is not None:
            self.add(_markdown(h.description), "")
        self.add(_escape(h.sizes), "")
        if h.mask is not None:
            self.add(_escape(h.mask), "")
        if h.mask_matrix is not None:
            self.block("M = " + bmatrix([[r"\text{T}" if v else r"\text{F}" for v in row] for row in h.mask_matrix]))
        if h.padding is not None:
            self.add(_escape(h.padding), "")
        for line in h.v2:  # format v2: alignment, grouped K/V heads, the cache, the bias
            self.add(_escape(line), "")
        self.inputs(h.inputs)
        for n in h.inputs:
            self.add(_escape_spans(Spans.of("handout.rows", name=n.name, labels=t("list.sep").join(n.rows))), "")

    def solution(self, sol: Solution, head: int | None = None) -> str:
        """The whole handout (only ``head`` when given; the layer steps are always kept), with the
        core mistakes this exercise cannot catch noted where they are made (not on a worksheet)."""
        return self.render(outline(sol, head=head, precision=self.places, brief=self.brief, blank=self.blank))

    def render(self, o: Outline) -> str:
        """The handout of outline ``o``: the header, each part under its heading, the dimension flow."""
        self.header(o.header)
        for part in o.parts:
            self.add(f"## {_escape(part.title)}", "")  # heads counted from 1 where a learner reads them
            if part.inputs:
                self.inputs(part.inputs)
            for entry in part.entries:
                if isinstance(entry, Rule):  # the backward pass moves on to another head
                    self.add(f"**{_escape(entry.title)}**", "")
                else:
                    self.step(entry, o.exercise)
        self.flow(o.flow)
        self.production(o)
        return "\n".join(self.lines).rstrip("\n") + "\n"

    def production(self, o: Outline) -> None:
        """The production view (issue 24), as the terminal shows it: each tensor of the batched layer, its shape in
        symbols and in numbers, what made it (a line under it); then every mask as PyTorch takes it, grouped by API."""
        self.add("", f"## {_escape(t('explain.production'))}", "")
        for step in o.production:
            self.add(f"- `{step.name}`: `{step.symbolic} = {step.concrete}`", f"  - {_escape(str(step.note))}")
        if not o.masks:
            return
        self.add("", f"### {_escape(t('explain.production.masks'))}", "")
        api = None
        for item in o.masks:
            m = item.mask
            if m.api != api:
                self.add(*([""] if api is not None else []), f"**{_escape(str(m.api_name))}**", "")
                api = m.api
            self.add(f"- `{m.code()}`", f"  - {_escape(item.meaning)}")

    def flow(self, f: Flow) -> None:
        """The shape annotations of the first head's steps (under ``--head`` too) and of the layer's."""
        self.add(f"## {t('explain.flow')}", "")
        for step in f.first:
            self.add(f"- ${annotation(step)}$")
        if f.heads > 1:
            self.add(f"- {_escape(t('explain.flow.each_head', heads=f.heads))}")
        for step in f.layer:
            self.add(f"- ${annotation(step)}$")


def render_markdown(sol: Solution, *, head: int | None = None, precision: int = 4, blank: bool = False,
                    brief: bool = False, student: str | None = None) -> str:
    """The worked solution of ``sol`` as Markdown (a worksheet when ``blank``; ``brief``: no arithmetic;
    ``student``: the worksheet is that student's, and says how to hand in rather than where the answer key is)."""
    return MarkdownRenderer(precision, blank, brief=brief, student=student).solution(sol, head)


def worksheet_line(exercise_id: str, student: str | None) -> Spans:
    """The worksheet's line under its title: with ``student`` (a handout of ``handouts``), how to hand in -- a
    solution file naming the exercise and the student, as ``check`` reads it -- and no answer key; else where
    the answer key is (``explain --blank``, the instructor's own worksheet)."""
    if student is None:
        return Spans.of("handout.worksheet", id=exercise_id)
    return Spans.of("handout.worksheet.student", exercise=_yaml_text(exercise_id), student=_yaml_text(student))


def _yaml_text(text: str) -> str:
    """``text`` as a YAML scalar that reads back as that text (``safe_load``): plain when it can be (``alice``,
    ``two-head-3x4``), else double-quoted (``"ana@uni.example"``, ``"20231234"``, ``"yes"``, ``"王芳"``)."""
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", text) and text.lower() not in {"true", "false", "null", "yes", "no",
                                                                            "on", "off", "y", "n"}:
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

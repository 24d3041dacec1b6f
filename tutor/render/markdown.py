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
from ..steps import KINDS, Operand, Solution, Step, Worked, hand_sized
from .text import reflow, why

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


def _escape(text: str) -> str:
    """Plain text (a title, token labels, a sentence of the catalogue) inside Markdown, shown as written.

    Every character that could start Markdown or HTML -- emphasis ``_ *``,
    links ``[ ]``, raw HTML and entities ``< > &``, math ``$``, strike-through
    ``~``, table cells ``|``, headings ``#``, a stray backtick -- is
    backslash-escaped, as is a list, quote or heading marker at the start;
    a code span (a command in backticks) is left as it is, and is inert
    anyway.  A title ``<script>`` lands in the ``.md`` as ``\\<script\\>``.
    """
    parts = _CODE_SPAN.split(text)
    out = "".join(p if i % 2 else _MD_SPECIAL.sub(r"\\\1", p) for i, p in enumerate(parts))
    return _BLOCK_START.sub(lambda m: m[1] + (m[2] + "\\" if m[2][0].isdigit() else "\\" + m[2]), out, count=1)


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
        key = "annotation.summed" if KINDS[step.id].backward else "annotation.shared"
        out += r",\ \text{" + _escape_tex(t(key, kv=step.kv_head + 1, heads=", ".join(str(h + 1) for h in step.shared))) + "}"
    return out


def _escape_tex(text: str) -> str:
    """Plain text inside ``\text{…}``: the characters TeX treats specially escaped."""
    return re.sub(r"([\\{}$&#%_^~])", r"\\\1", text)


def formula(step: Step, ex: Exercise) -> str:
    """The step's formula in LaTeX (the same formula as :attr:`Step.formula`), from its kind's template.

    A kind without a template is the product of its operands (``Q = X W_Q + b_Q``).
    """
    names = [o.name for o in step.operands]
    bias = next((tex_name(n) for n in names if n.startswith("b_")), None)
    template = KINDS[step.id].latex or "$result = $op0 $op1$plus"
    d_k = ex.heads[step.head or 0].d_k
    fields = {
        "result": tex_name(step.name), "op0": tex_name(names[0]), "op1": tex_name(names[1]) if len(names) > 1 else "",
        "plus": f" + {bias}" if bias else "", "operands": ", ".join(tex_name(n) for n in names),
        "head": str((step.head or 0) + 1), "src": names[0], "d_k": str(d_k),
        "root": "" if _sqrt_latex(d_k) == rf"\sqrt{{{d_k}}}" else f" = {_sqrt_latex(d_k)}",
        # format v2 in the backward pass: a group's K/V gradient sums its query heads; a cache's new rows
        "sigma": "", "h": "", "new": r"[\text{new rows}]" if ex.has_cache else "",
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

    def __init__(self, precision: int = 4, blank: bool = False, *, brief: bool = False):
        self.places = precision
        self.blank = blank
        self.brief = brief
        self.notes: dict[tuple[str, int | None], list[str]] = {}
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

    def inputs(self, named: Sequence[tuple[str, Matrix]]) -> None:
        """Named input matrices side by side in one block: ``X = [...], W_Q = [...]``."""
        self.block(r",\quad ".join(f"{tex_name(name)} = {self.input_matrix(m)}" for name, m in named))

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
        self.add(f"**{_escape(t('explain.worked'))}:**", "")
        for piece in pieces:
            self.add(f"- {_escape(piece.label + piece.sep + piece.lines[0])}")
            self.add(*(f"  - {_escape(line)}" for line in piece.lines[1:]))
        self.add("")

    def step(self, number: int, step: Step, ex: Exercise, sol: Solution | None = None) -> None:
        """One step: its title, formula, shape annotation, values (or blanks), its arithmetic
        (a hand-sized exercise, not ``brief``, not blank) and why it is there."""
        self.add(f"### {number}. {KINDS[step.id].title}", "")
        self.add(f"${formula(step, ex)}$", "", f"${annotation(step)}$", "")
        if KINDS[step.id].axes_note:
            self.add(_escape(t("handout.scores_axes", rows=", ".join(step.row_labels), cols=", ".join(step.col_labels))), "")
        tex, decimals_only = self.values(step)
        self.block(tex)
        if decimals_only:
            self.add(_escape(t("handout.decimals_only", id=ex.id)), "")
        if sol is not None and not (self.blank or self.brief) and hand_sized(ex):
            self.arithmetic(KINDS[step.id].arithmetic(sol, step, self.places))
        for sentence in why(step, ex):
            self.add(f"> {_escape(sentence)}", "")
        for sentence in self.notes.get(step.key, ()):
            self.add(f"> **{_escape(t('explain.note.label'))}** {_escape(sentence)}", "")

    def header(self, sol: Solution) -> None:
        """Title, id, description, sizes, mask, and the input sequence(s)."""
        ex = sol.exercise
        h0 = ex.heads[0]
        self.add(f"# {_escape(ex.title)}", "")
        self.add(f"*{_escape(t('explain.exercise', id=ex.id))}*", "")
        if self.blank:
            self.add(_escape(t("handout.worksheet", id=ex.id)), "")
        if ex.description:
            self.add(_markdown(reflow(ex.description)), "")
        self.add(_escape(t("explain.sizes", L=ex.L, L_k=ex.L_k, d_model=ex.d_model, heads=ex.num_heads,
                           d_k=h0.d_k, d_v=h0.d_v, d_out=ex.d_out)), "")
        if ex.mask_kind == "causal":
            self.add(_escape(t("explain.mask.causal")), "")
        elif ex.mask_kind == "matrix":
            self.add(_escape(t("explain.mask.matrix")), "")
            self.block("M = " + bmatrix([[r"\text{T}" if v else r"\text{F}" for v in row] for row in ex.mask or ()]))
        if ex.key_padding is not None:
            pads = [ex.key_labels[j] for j, keep in enumerate(ex.key_padding) if not keep]
            self.add(_escape(t("explain.mask.padding", keys=", ".join(pads) or "-")), "")
        from .v2 import header_lines

        for line in header_lines(ex):  # format v2: alignment, grouped K/V heads, the cache, the bias
            self.add(_escape(line), "")
        named: list[tuple[str, Matrix]] = [("X", ex.x)]
        if ex.x_kv is not None:
            named.append(("X_kv", ex.x_kv))
        self.inputs(named)
        self.add(_escape(t("handout.rows", name="X", labels=", ".join(ex.query_labels))), "")
        if ex.x_kv is not None:
            self.add(_escape(t("handout.rows", name="X_kv", labels=", ".join(ex.key_labels))), "")

    def weights_of(self, ex: Exercise, h: int) -> None:
        """Head ``h``'s weights and biases."""
        head = ex.heads[h]
        named = [(n, m) for n, m in (("W_Q", head.w_q), ("W_K", head.w_k), ("W_V", head.w_v))]
        named += [(n, (b,)) for n, b in (("b_Q", head.b_q), ("b_K", head.b_k), ("b_V", head.b_v)) if b is not None]
        self.inputs(named)

    def solution(self, sol: Solution, head: int | None = None) -> str:
        """The whole handout (only ``head`` when given; the layer steps are always kept), with the
        core mistakes this exercise cannot catch noted where they are made (not on a worksheet)."""
        ex, full = sol.exercise, sol
        back = [s for s in sol.steps if KINDS[s.id].backward and (head is None or s.head in (None, head))
                and (head is not None or s.kv_head is None or s.head == s.shared[0])]  # a group's K/V gradient once
        sol = Solution(ex, tuple(s for s in sol.steps if not KINDS[s.id].backward))  # the forward pass first
        if not self.blank:
            from ..mistakes.invisible import notes

            self.notes = notes(sol)
        self.header(sol)
        number = 0
        for h in (range(ex.num_heads) if head is None else [head]):
            self.add(f"## {t('explain.head', head=h + 1)}", "")  # heads counted from 1 where a learner reads them
            self.weights_of(ex, h)
            for step in sol.for_head(h):
                number += 1
                self.step(number, step, ex, sol)
        if sol.layer_steps:
            self.add(f"## {t('explain.layer')}", "")
            if ex.w_o is not None:
                named: list[tuple[str, Matrix]] = [("W_O", ex.w_o)]
                if ex.b_o is not None:
                    named.append(("b_O", (ex.b_o,)))
                self.inputs(named)
            for step in sol.layer_steps:
                number += 1
                self.step(number, step, ex, sol)
        if back:  # --backward: the gradients in the order they are computed, output to input
            self.add(f"## {_escape(t('explain.backward'))}", "")
            shown: tuple[int | None, int | None] = (None, None)
            for step in back:
                if ex.num_heads > 1 and (step.head, step.kv_head) != shown:  # a heading where the steps change head
                    shown = (step.head, step.kv_head)
                    if step.kv_head is not None:
                        title = t("explain.kv_head", kv=step.kv_head + 1, heads=", ".join(str(h + 1) for h in step.shared))
                    else:
                        title = t("explain.head", head=step.head + 1) if step.head is not None else t("explain.layer")
                    self.add(f"**{_escape(title)}**", "")
                number += 1
                self.step(number, step, ex, full)
        self.add(f"## {t('explain.flow')}", "")
        for step in sol.for_head(0):
            self.add(f"- ${annotation(step)}$")
        if ex.num_heads > 1:
            self.add(f"- {_escape(t('explain.flow.each_head', heads=ex.num_heads))}")
        for step in sol.layer_steps:
            self.add(f"- ${annotation(step)}$")
        return "\n".join(self.lines).rstrip("\n") + "\n"


def render_markdown(sol: Solution, *, head: int | None = None, precision: int = 4, blank: bool = False,
                    brief: bool = False) -> str:
    """The worked solution of ``sol`` as Markdown (a worksheet when ``blank``; ``brief``: no arithmetic)."""
    return MarkdownRenderer(precision, blank, brief=brief).solution(sol, head)

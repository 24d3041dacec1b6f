"""MathML for the HTML handout: the formulas' LaTeX (a small subset) and the exact entries (through sympy).

:func:`latex_mathml` turns the LaTeX that the Markdown handout writes for a
step's formula and shape annotation (:func:`tutor.render.markdown.formula`,
:func:`~tutor.render.markdown.annotation`: ``\\frac``, ``\\sqrt``, ``\\text``,
sub- and superscripts, ``cases``, a few symbols) into presentation MathML
(MathML Core, which browsers render without a script); a command outside that
subset becomes an ``<merror>`` naming it (a test converts every formula of the
bundled exercises and finds none).  :func:`exact_mathml` is sympy's
presentation printer (``sympy.printing.mathml.mathml(expr, printer="presentation")``)
on the entry as the handout prints it (:func:`tutor.render.markdown.exact_sympy`).
Both return the children of a ``<math>`` element; :func:`math` wraps them.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from ..exact.numbers import Exact, Rat

_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|\d+(?:\.\d+)?|\s+|.", re.S)

#: Commands that stand for one symbol: (MathML element, text).
_SYMBOLS = {
    r"\top": ("mi", "⊤"), r"\cdot": ("mo", "⋅"), r"\circ": ("mo", "∘"), r"\to": ("mo", "→"), r"\times": ("mo", "×"),
    r"\mapsto": ("mo", "↦"), r"\infty": ("mi", "∞"), r"\theta": ("mi", "θ"), r"\partial": ("mi", "∂"),
    r"\sum": ("mo", "∑"), r"\in": ("mo", "∈"), r"\{": ("mo", "{"), r"\}": ("mo", "}"), r"\cos": ("mi", "cos"),
    r"\sin": ("mi", "sin"), r"\exp": ("mi", "exp"), r"\log": ("mi", "log"), r"\approx": ("mo", "≈"),
    r"\qquad": ("mspace", "2em"), r"\quad": ("mspace", "1em"), r"\,": ("mspace", "0.167em"),
    r"\;": ("mspace", "0.278em"), r"\ ": ("mspace", "0.25em"),
}
_IGNORED = {r"\textstyle", r"\displaystyle", r"\big", r"\Big", r"\left", r"\right"}  # sizes: MathML stretches itself
_WORDS = {r"\text": "mtext", r"\mathrm": "mi", r"\operatorname": "mi"}
_OPERATORS = set("+=()[],:;/|<>!") | {"−", "·", "→", "≈", "×"}


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


@dataclass
class _Parser:
    tokens: list[str]  # ending with "", which no token is: the end of the formula
    at: int = 0

    def peek(self) -> str | None:
        while self.tokens[self.at].isspace():
            self.at += 1
        return self.tokens[self.at] or None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ValueError("the formula ends early")
        self.at += 1
        return token

    def raw_group(self) -> str:
        """The text of a ``{…}`` argument as written (spaces kept, ``\\_`` read as ``_``)."""
        if self.take() != "{":
            raise ValueError("an argument must be in braces")
        depth, out = 1, list[str]()
        while token := self.tokens[self.at]:
            self.at += 1
            if token == "{":
                depth += 1
            elif token == "}":
                depth -= 1
                if depth == 0:
                    return "".join(out)
            out.append(token[1:] if len(token) == 2 and token[0] == "\\" and not token[1].isalpha() else token)
        raise ValueError("a brace is not closed")

    def sequence(self, stops: tuple[str, ...] = ()) -> list[str]:
        """Elements up to (not taking) one of ``stops`` or the end."""
        out: list[str] = []
        while (token := self.peek()) is not None and token not in stops:
            if token in ("_", "^"):  # a script with nothing before it: on an empty base
                out.append("<mrow></mrow>")
            else:
                out.append(self.atom())
            out[-1] = self.scripts(out[-1])
        return out

    def scripts(self, base: str) -> str:
        sub = sup = None
        while self.peek() in ("_", "^"):
            mark = self.take()
            arg = self.argument()
            if mark == "_":
                sub = arg
            else:
                sup = arg
        if sub is not None and sup is not None:
            return f"<msubsup>{base}{sub}{sup}</msubsup>"
        if sub is not None:
            return f"<msub>{base}{sub}</msub>"
        if sup is not None:
            return f"<msup>{base}{sup}</msup>"
        return base

    def argument(self) -> str:
        """One argument: a braced group (as one ``<mrow>``) or a single atom."""
        if self.peek() == "{":
            self.take()
            inner = self.sequence(("}",))
            self.take()
            return _row(inner)
        return self.atom()

    def atom(self) -> str:
        token = self.take()
        if token == "{":
            inner = self.sequence(("}",))
            self.take()
            return _row(inner)
        if token == r"\frac":
            return f"<mfrac>{self.argument()}{self.argument()}</mfrac>"
        if token == r"\sqrt":
            return f"<msqrt>{self.argument()}</msqrt>"
        if token in _WORDS:
            tag = _WORDS[token]
            text = self.raw_group()
            attrs = ' mathvariant="normal"' if tag == "mi" and len(text) == 1 else ""
            if tag == "mtext":  # MathML trims a token's spaces at either end: "if query " would touch the i after it
                text = re.sub(r"^ +| +$", lambda m: m[0].replace(" ", "\u00a0"), text)
            return f"<{tag}{attrs}>{_esc(text)}</{tag}>"
        if token == r"\begin":
            return self.environment(self.raw_group())
        if token in _IGNORED:
            return "<mrow></mrow>"
        if token in _SYMBOLS:
            tag, text = _SYMBOLS[token]
            if tag == "mspace":
                return f'<mspace width="{text}"></mspace>'
            return f"<{tag}>{_esc(text)}</{tag}>"
        if token.startswith("\\"):
            return f"<merror><mtext>{_esc(token)}</mtext></merror>"
        if token[0].isdigit():
            return f"<mn>{token}</mn>"
        if token == "-":
            return "<mo>−</mo>"
        if token in _OPERATORS:
            return f"<mo>{_esc(token)}</mo>"
        return f"<mi>{_esc(token)}</mi>"

    def environment(self, name: str) -> str:
        """``cases``, ``bmatrix`` or ``matrix``: rows split at ``\\\\``, cells at ``&``."""
        rows: list[list[str]] = [[]]
        while True:
            cell = self.sequence(("&", r"\\", r"\end"))
            rows[-1].append(f"<mtd>{_row(cell)}</mtd>")
            token = self.take()
            if token == r"\\":
                rows.append([])
            elif token == r"\end":
                self.raw_group()
                break
        align = ' columnalign="left"' if name == "cases" else ""
        table = f"<mtable{align}>" + "".join(f"<mtr>{''.join(r)}</mtr>" for r in rows) + "</mtable>"
        if name == "cases":
            return f'<mrow><mo stretchy="true">{{</mo>{table}</mrow>'
        if name == "bmatrix":
            return f"<mrow><mo>[</mo>{table}<mo>]</mo></mrow>"
        if name == "matrix":
            return table
        return f"<merror><mtext>{_esc(name)}</mtext></merror>"


def _row(items: list[str]) -> str:
    return items[0] if len(items) == 1 else "<mrow>" + "".join(items) + "</mrow>"


def latex_mathml(tex: str) -> str:
    """Presentation MathML (the children of ``<math>``) of ``tex``, LaTeX in the subset the handouts write.

    Raises :class:`ValueError` on unbalanced braces or a formula that ends inside a command; an unknown
    command is an ``<merror>`` in the output, not an error.
    """
    parser = _Parser([*_TOKEN.findall(tex), ""])
    out = parser.sequence()
    return _row(out) if out else "<mrow></mrow>"


class ExactMathML:
    """sympy's presentation MathML of exact entries, cached by the entry's text (many entries repeat)."""

    def __init__(self) -> None:
        self.cache: dict[str, str] = {}

    def __call__(self, e: Exact) -> str:
        """The MathML (children of ``<math>``) of ``e`` as the handout prints it (a softmax mix divided by one
        term's exponential: :func:`tutor.render.markdown.exact_sympy`)."""
        key = str(e)
        out = self.cache.get(key)
        if out is None and isinstance(e, Rat):  # a fraction needs no sympy (the bulk of a large page's entries)
            q = e.q
            body = f"<mn>{abs(q.numerator)}</mn>" if q.denominator == 1 else \
                f"<mfrac><mn>{abs(q.numerator)}</mn><mn>{q.denominator}</mn></mfrac>"
            out = self.cache[key] = f"<mrow><mo>−</mo>{body}</mrow>" if q < 0 else body
        if out is None:
            from sympy.printing.mathml import mathml  # only when a page is asked for

            from .markdown import exact_sympy

            out = self.cache[key] = mathml(exact_sympy(e), printer="presentation")
        return out


def math(children: str, *, block: bool = False, alttext: object = None) -> str:
    """A ``<math>`` element around MathML ``children`` (``display="block"`` when ``block``), with an
    ``alttext`` (the plain text a reader without MathML gets) when given."""
    attrs = ' display="block"' if block else ""
    if alttext is not None:
        attrs += f' alttext="{html.escape(str(alttext))}"'
    return f"<math{attrs}>{children}</math>"  # no xmlns: in HTML the parser puts <math> in MathML's namespace

"""The answer language: its grammar, its tokens, and the parser that reads one entry.

This docstring is the one description of what a learner may type (entries
and the layout of a matrix); :mod:`.matrix` splits a matrix's text into
entries as described here, and :func:`parse_entry` reads each one.

The grammar is fixed and small, read by a hand-written recursive-descent
parser that builds bounded values (:mod:`.values`: exact
rationals and surd/exp forms where cheap, an interval for every value) as it
goes.  Nothing is ever evaluated as code: there is no ``eval``, ``exec`` or
``compile``, and no text is ever handed to ``sympify``/``parse_expr``; sympy
is not used to parse or grade at all (:attr:`.entry.Entry.expr` builds a sympy
expression on request, from Python ints).  ::

    entry   := [+|-] ("inf" | "∞" | "oo")             (alone: -inf, +inf, ∞, .inf, sympy's -oo)
             | expr
    expr    := term (("+" | "-") term)*
    term    := unary (("*" | "/") unary)*             ("×", "·", "⋅" are "*"; "÷" is "/")
    unary   := ("+" | "-") unary | power              ("−" is "-")
    power   := atom [("^" | "**") unary]              (right-associative: 2^3^2 = 2^9)
    atom    := number | "e" | "E" | "(" expr ")"
             | ("sqrt" | "exp" | "cos" | "sin") "(" expr ")"   (cos, sin in radians: RoPE's cos(1), sin(1/100))
             | "√" atom                              (√2, √(2), √√16)
    number  := digits ["." digits] [exponent] | "." digits [exponent]
    exponent:= ("e" | "E") ["+" | "-" | "−"] digits

As in Python and in mathematics, ``-2^2`` is ``-4`` and ``2^-1`` is ``1/2``.
A number or a closing parenthesis directly before ``√``, ``sqrt``, ``exp``, ``cos``, ``sin`` or ``(`` multiplies
(``2√2`` is ``2*sqrt(2)``, as explain prints it), and so before a power of ``e`` (``2e^√2`` is
``2*e^√2``, ``2e**2`` is ``2*e^2``: a number's exponent is digits); before a name otherwise it does
not (``2e`` is an error).
``inf`` (also ``-inf``, ``+inf``, ``∞``, ``infinity``, YAML's ``-.inf``) is
only allowed as a whole entry, for a masked score.

Matrices: rows are separated by ``;`` or line breaks, or each row is in
brackets (``[[1, 2], [3, 4]]``, ``[1, 2], [3, 4]``, ``[1 2; 3 4]``).  Within
a row, commas separate the entries if there is any comma outside
parentheses; otherwise whitespace outside parentheses does, except next to
an operator: ``1 -1`` is two entries, ``1 - 1`` is one (see
:func:`.matrix.split_entries`, which splits them).

Pasted output: a matrix as PyTorch or NumPy prints it is read as it was printed
(:func:`.matrix.printed` unwraps it; nothing in it is evaluated), over as many lines
as it was printed on: ``tensor([[1.8916, 1.8916],`` / ``[0.5000, 0.2500]], dtype=torch.float64)``,
with any of ``dtype=``, ``grad_fn=<SoftmaxBackward0>``, ``requires_grad=True``,
``device='cpu'`` after the numbers; ``array([[1.8916, 1.8916], [0.5   , 0.25  ]], dtype=float32)``;
``print()``'s ``[[1.8916 1.8916]`` / `` [0.5    0.25  ]]``; numbers as they print them
(``1.0000e+00``, ``2.5000e-03``, NumPy's ``1.e-03``, ``1.``, ``-inf``, ``inf``).  A 1-D array is
one row; an array of more axes is read as its one matrix when every leading axis has size 1
(``tensor([[[1., 2.]]])``), and refused, with its shape, when it holds several.  A printout
summarised with ``...`` is refused (its entries are not all there).  ``nan`` (``NaN``, ``.nan``)
is refused with its row and entry: no value asked for is NaN (``check`` reads a solution file's
``nan`` as a wrong entry instead, and says why).

A Chinese input method's full-width forms are read as the ASCII they stand
for, one character for one (``１．５``, ``（``, ``－``, ``；``, ``，``, the
ideographic space, and ``。【】`` for ``.[]``: :func:`tutor.base.halfwidth.halfwidth`),
in every answer that reads numbers: practice, the drills, ``check``.

Exactness: ``0.1`` is the rational 1/10 (read from its text, never through a
binary float), but an entry containing any decimal literal (a ``.`` or an
exponent: ``0.45``, ``1e-3``) is *not exact* -- it claims a rounded value.  So
does a pasted one: ``0.2500`` claims 0.25 ± 0.00005, torch's ``2.`` claims 2 ± 0.5.

Resource guards: every entry is graded within a fixed budget (well under
100 ms for any entry inside these limits; ``make bench`` runs
``benchmarks/answers_budget.py`` over the worst entries we could build), and
an entry beyond a limit is refused with an :class:`~tutor.base.errors.AnswerError`
naming the column, never graded late:

* an entry has at most :data:`MAX_ENTRY_CHARS` characters, a typed matrix
  :data:`.matrix.MAX_MATRIX_CHARS` and :data:`.matrix.MAX_ENTRIES` entries; a number literal
  at most :data:`MAX_DIGITS` digits and a decimal exponent at most
  :data:`MAX_DECIMAL_EXPONENT`; nesting at most :data:`MAX_DEPTH` levels;
* a power's exponent is a whole number or a half of magnitude at most
  :data:`MAX_POWER` (``e^x`` is ``exp(x)`` and takes any real ``x``);
  ``exp``'s argument is at most :data:`MAX_EXP_ARGUMENT` in magnitude;
* the *size of every number the entry creates*, not one power at a time:
  every exact rational (and every coefficient and radicand of an exact
  surd/exp form) has at most :data:`.values.MAX_EXACT_DIGITS`
  (600) digits in numerator and denominator together -- beyond, "too large
  to check exactly; write it as a decimal" (``166 × (10^-64)^64``,
  ``sqrt(1e-93^64+1)``); every intermediate value is at most
  :data:`.values.MAX_MAGNITUDE` in magnitude and, when it is not rational and not
  zero, at least 10^-600 ("too small to check exactly");
* signs and zero tests (division by zero, the square root of a negative
  number) are exact for rationals and surd/exp forms, and otherwise come from
  the value's 256-bit interval: a value whose interval contains 0 is taken as
  zero (within about 10^-77 of it, relative to its parts: its square root is
  0, and dividing by it is refused as "cannot be told from zero").  sympy's
  assumption system is never asked, so nesting ``1/(1 + exp(…))`` costs the
  same at every level;
* the *work as a whole*: every operation, and every evaluation at a higher
  precision (a float after a cancellation, an exact claim's comparison,
  computed while parsing), is charged to a budget of about 60 ms per entry
  and about 3 s for all the entries of one typed matrix or one solution
  file (:data:`.values.MAX_ENTRY_WORK`, :data:`.values.MAX_SHARED_WORK`,
  counted in units of mpmath's time, so independent of the machine's load);
  an entry over either is "too large to check exactly; write it as a
  decimal".  A decimal or a fraction is never refused for work.

>>> parse_entry("1/(1 + 2*exp(sqrt(2)))").expr
1/(1 + 2*exp(sqrt(2)))
>>> e = parse_entry("-0.4500"); (e.expr, e.is_exact, e.places)
(-9/20, False, 4)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Any, NamedTuple, NoReturn

from tutor.base.errors import AnswerError
from tutor.base.halfwidth import halfwidth
from tutor.base.messages import Msg

from . import values as V
from .entry import Entry
from .values import Refused, Value

MAX_ENTRY_CHARS = 2_000
MAX_DIGITS = 100
MAX_DECIMAL_EXPONENT = 400
MAX_DEPTH = 50
MAX_POWER = 64
MAX_EXP_ARGUMENT = 1_000


def refuse(key: str, **fields: Any) -> NoReturn:
    """Raise the :class:`AnswerError` whose text is the catalogue's ``key`` (:mod:`tutor.base.messages`)."""
    raise AnswerError(Msg(key, **fields))


def printable(text: str, limit: int = 60) -> str:
    """``text`` on one line, control characters escaped, cut at ``limit``."""
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


# --- tokens --------------------------------------------------------------------


class _Tok(NamedTuple):
    kind: str  # "num", "name", "op", "end"
    text: str  # as written ("**", "−", "×" ...)
    op: str  # normalised operator ("^", "-", "*" ...), or the name, or ""
    col: int  # 1-based column in the original text


# An exponent's sign may be the typographic minus too (1.5e−3, as pasted), as everywhere a number is read.
_NUMBER = re.compile(r"(?P<int>[0-9]+)(?:\.(?P<frac>[0-9]*))?(?:[eE](?P<exp>[+\-−]?[0-9]+))?|\.(?P<frac2>[0-9]+)(?:[eE](?P<exp2>[+\-−]?[0-9]+))?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPS = {
    "+": "+", "-": "-", "−": "-", "*": "*", "×": "*", "·": "*", "⋅": "*",
    "/": "/", "÷": "/", "^": "^", "(": "(", ")": ")", "√": "√",
}  # fmt: skip
_INF_ALONE = re.compile(r"(?P<sign>[+\-−]?)\s*(?:\.?(?:inf|Inf|INF)|infinity|Infinity|∞|oo)")  # oo: sympy's
_INF_NAMES = {"inf", "Inf", "INF", "infinity", "Infinity", "oo"}
# The names an answer may use: the grammar's one table.  ``atom`` and ``implicit`` read it, and the
# refusals of an unknown name or a logarithm list it, so a function added here is named there too.
FUNCTIONS = ("sqrt", "exp", "cos", "sin")
CONSTANTS = ("e",)
WRITABLE = ", ".join(FUNCTIONS + CONSTANTS)  # a code form: the names as typed (half-width commas in every language)
KNOWN_NAMES = ", ".join((*FUNCTIONS, *CONSTANTS, "inf"))
_NAN_NAMES = {"nan", "NaN", "NAN"}
_NAN_ALONE = re.compile(r"[+\-−]?\.?nan", re.IGNORECASE)  # as Python, NumPy, PyTorch and YAML (.nan) write it


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c.isdigit() and c in "0123456789" or (c == "." and i + 1 < n and text[i + 1] in "0123456789"):
            m = _NUMBER.match(text, i)
            assert m is not None
            toks.append(_Tok("num", m.group(), "", i + 1))
            i = m.end()
        elif c.isascii() and (c.isalpha() or c == "_"):
            m = _NAME.match(text, i)
            assert m is not None
            toks.append(_Tok("name", m.group(), m.group(), i + 1))
            i = m.end()
        elif c == "∞":
            toks.append(_Tok("name", c, "inf", i + 1))
            i += 1
        elif text.startswith("**", i):
            toks.append(_Tok("op", "**", "^", i + 1))
            i += 2
        elif c in _OPS:
            toks.append(_Tok("op", c, _OPS[c], i + 1))
            i += 1
        elif c == "\ufffd":  # what the stream made of bytes it could not decode (tutor.practice.terminal.Lines)
            refuse("answer.undecodable", column=i + 1)
        else:
            refuse("answer.unexpected_char", char=printable(c), column=i + 1, text=printable(text))
    toks.append(_Tok("end", "", "", n + 1))
    return toks


# --- the parser ------------------------------------------------------------------


class _Parser:
    """Recursive descent over the tokens; builds bounded values
    (:class:`.values.Value`) as it goes -- never sympy objects."""

    def __init__(self, text: str, toks: list[_Tok]):
        V.load()
        self.text = text
        self.toks = toks
        self.i = 0
        self.depth = 0
        self.inexact = False

    # -- plumbing
    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def fail(self, key: str, tok: _Tok, **fields: Any) -> NoReturn:
        refuse(key, column=tok.col, text=printable(self.text), **fields)

    def unexpected(self, tok: _Tok) -> NoReturn:
        """Refuse ``tok``: a ``)`` without its ``(``, any other misplaced token, or the end of the text
        where an operand was due (the only place the end is refused here: a missing ``)`` is
        :meth:`close`'s, and :meth:`entry` reaches the end only after a whole expression)."""
        if tok.kind == "end":
            refuse("answer.unexpected_end", text=printable(self.text))
        if tok.op == ")":
            self.fail("answer.unmatched", tok)
        self.fail("answer.unexpected", tok, token=printable(tok.text))

    @contextmanager
    def deeper(self, tok: _Tok) -> Iterator[None]:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.fail("answer.too_deep", tok, limit=MAX_DEPTH)
        try:
            yield
        finally:
            self.depth -= 1

    def op(self, tok: _Tok, fn: Callable[..., Value], *args: Any) -> Value:
        """``fn(*args)``, a bound breached becoming the error at ``tok``'s column; the work of
        an operation whose result is not rational is charged to the budgets in force
        (:func:`.values.charge_operation`: a decimal or a fraction is never refused for work)."""
        try:
            v = fn(*args)
            if v.fraction is None:
                V.charge_operation(fn)
            return v
        except Refused as refused:
            self.fail(refused.key, tok, **refused.fields)

    # -- grammar
    def entry(self) -> Value:
        v = self.expression()
        t = self.peek()
        if t.kind != "end":
            self.unexpected(t)
        return v

    def expression(self) -> Value:
        left = self.term()
        while (t := self.peek()).op in ("+", "-") and t.kind == "op":
            self.take()
            right = self.term()
            left = self.op(t, V.add, left, right, 1 if t.op == "+" else -1)
        return left

    def term(self) -> Value:
        left = self.unary()
        while True:
            t = self.peek()
            if self.implicit(t) or self.power_of_e(t):  # 2√2, 3sqrt(2), 2exp(1), 2(1 + e), 2e^√2: a product
                right = self.power()
                left = self.op(t, V.mul, left, right)
                continue
            if not (t.kind == "op" and t.op in ("*", "/")):
                break
            self.take()
            right = self.unary()
            left = self.op(t, V.mul if t.op == "*" else V.div, left, right)
        return left

    @staticmethod
    def implicit(t: _Tok) -> bool:
        """Whether ``t`` starts a factor written without ``*``: ``√``, ``sqrt``, ``exp``, ``cos``, ``sin`` or ``(``."""
        return (t.kind == "op" and t.op in ("√", "(")) or (t.kind == "name" and t.op in FUNCTIONS)

    def power_of_e(self, t: _Tok) -> bool:
        """Whether ``t`` is ``e`` raised to a power, ``e^x`` or ``e**x``, which multiplies when written
        straight after a factor: ``2e^√2`` is ``2·exp(√2)`` (issue 20, E).  ``e`` alone there stays an
        error (``2e`` reads as a number's exponent left out)."""
        following = self.toks[self.i + 1] if self.i + 1 < len(self.toks) else None
        return t.kind == "name" and t.op in ("e", "E") and following is not None and following.kind == "op" \
            and following.op == "^"

    def unary(self) -> Value:
        t = self.peek()
        if t.kind == "op" and t.op in ("+", "-"):
            self.take()
            with self.deeper(t):
                v = self.unary()
            return v if t.op == "+" else V.neg(v)
        return self.power()

    def power(self) -> Value:
        base = self.atom()
        t = self.peek()
        if t.kind == "op" and t.op == "^":
            self.take()
            with self.deeper(t):
                exponent = self.unary()
            return self.pow(base, exponent, t)
        return base

    def atom(self) -> Value:
        t = self.take()
        if t.kind == "num":
            return self.number(t)
        if t.kind == "op" and t.op == "(":
            with self.deeper(t):
                v = self.expression()
            self.close(t)
            return v
        if t.kind == "op" and t.op == "√":
            with self.deeper(t):
                v = self.atom()
            return self.op(t, V.sqrt, v)
        if t.kind == "name":
            name = t.op
            if name in FUNCTIONS:
                lp = self.take()
                if not (lp.kind == "op" and lp.op == "("):
                    self.fail("answer.needs_parens", t, name=name)
                with self.deeper(lp):
                    v = self.expression()
                self.close(lp)
                if name in ("cos", "sin"):  # RoPE's exact forms (issue 23)
                    return self.op(t, V.cos if name == "cos" else V.sin, v)
                return self.op(t, V.sqrt, v) if name == "sqrt" else self.exp(v, t)
            if name in ("e", "E"):
                return V.e()
            if name in _INF_NAMES:
                self.fail("answer.inf_alone", t)
            if name in _NAN_NAMES:
                self.fail("answer.nan", t, name=name)
            if name.lower() in ("log", "ln"):  # lse = m + log(l): the hint writes it, the grammar has no logarithm
                self.fail("answer.log", t, name=name, names=WRITABLE)
            self.fail("answer.unknown_name", t, name=printable(name, 20), names=KNOWN_NAMES)
        self.unexpected(t)

    def close(self, opening: _Tok) -> None:
        t = self.take()
        if t.kind == "op" and t.op == ")":
            return
        if t.kind == "end":
            self.fail("answer.unclosed", opening)
        self.unexpected(t)

    # -- values
    def number(self, t: _Tok) -> Value:
        m = _NUMBER.fullmatch(t.text)
        assert m is not None
        whole = m["int"] or ""
        frac = m["frac"] if m["int"] is not None else m["frac2"]
        frac = frac or ""
        exp_text = m["exp"] if m["int"] is not None else m["exp2"]
        if len(whole) + len(frac) > MAX_DIGITS:
            self.fail("answer.number_too_long", t, limit=MAX_DIGITS)
        if exp_text is not None and (len(exp_text.lstrip("+-−")) > 6 or abs(_exponent(exp_text)) > MAX_DECIMAL_EXPONENT):
            self.fail("answer.decimal_exponent", t, limit=MAX_DECIMAL_EXPONENT)
        if "." in t.text or exp_text is not None:
            self.inexact = True
        exponent = _exponent(exp_text) if exp_text is not None else 0
        shift = exponent - len(frac)  # value = digits · 10^shift
        digits = int(whole + frac)
        return self.op(t, V.rational, Fraction(digits * 10 ** max(shift, 0), 10 ** max(-shift, 0)))

    def exp(self, v: Value, t: _Tok) -> Value:
        return self.op(t, V.exp, v, MAX_EXP_ARGUMENT)

    def pow(self, base: Value, exponent: Value, t: _Tok) -> Value:
        if base.is_e():
            return self.exp(exponent, t)
        x = exponent.fraction
        if x is None or x.denominator not in (1, 2):
            self.fail("answer.power_form", t)
        if abs(x) > MAX_POWER:
            self.fail("answer.power_too_large", t, limit=MAX_POWER)
        return self.op(t, V.power, base, x)


def _exponent(text: str) -> int:
    """A decimal exponent's digits and sign (``-``, ``+`` or the typographic ``−``) as an int."""
    return int(text.replace("−", "-"))


def _places(m: re.Match[str]) -> int:
    frac = (m["frac"] if m["int"] is not None else m["frac2"]) or ""
    exp_text = m["exp"] if m["int"] is not None else m["exp2"]
    return len(frac) - (_exponent(exp_text) if exp_text is not None else 0)



def decimal_places(text: str) -> list[int]:
    """The places of each decimal literal (a ``.`` or an exponent) in ``text``, in order, for an
    entry that :func:`parse_entry` reads (``[]`` for text it would refuse).

    >>> decimal_places("1.41/2 + 3e-2"), decimal_places("2*sqrt(2)")
    ([2, 2], [])
    """
    try:
        toks = _tokenize(text)
    except AnswerError:
        return []
    out = []
    for tok in toks:
        if tok.kind == "num" and ("." in tok.text or "e" in tok.text.lower()):
            m = _NUMBER.fullmatch(tok.text)
            if m is not None:
                out.append(_places(m))
    return out


def parse_entry(text: str) -> Entry:
    """Parse one number in the answer grammar (see the module docstring).

    >>> parse_entry("3*sqrt(2)/4").expr
    3*sqrt(2)/4
    >>> parse_entry("0.1").expr, parse_entry("0.1").is_exact
    (1/10, False)
    >>> parse_entry("2 + * 3")
    Traceback (most recent call last):
    ...
    tutor.base.errors.AnswerError: unexpected "*" at column 5 in "2 + * 3"
    """
    if not isinstance(text, str):
        refuse("answer.not_text", found=type(text).__name__)
    if len(text) > MAX_ENTRY_CHARS:
        refuse("answer.too_long", length=len(text), limit=MAX_ENTRY_CHARS)
    text = halfwidth(text)  # a Chinese input method's １．５, （, －: one character for one
    stripped = text.strip()
    if not stripped:
        refuse("answer.empty")
    if m := _INF_ALONE.fullmatch(stripped):
        return Entry(stripped, True, None, -1 if m["sign"] in ("-", "−") else 1)
    if _NAN_ALONE.fullmatch(stripped):  # what code that divided 0 by 0 printed: said as such
        refuse("answer.nan_alone", text=printable(stripped))
    toks = _tokenize(text)
    parser = _Parser(text, toks)
    with V.budget(V.Work(V.MAX_ENTRY_WORK)):
        number = parser.entry()
        try:
            value = number.float()
            if not parser.inexact:  # an exact claim: what comparing it will need, computed (and bounded) now
                V.prepare_check(number)
        except Refused as refused:
            refuse(refused.key, column=1, text=printable(text), **refused.fields)
    if not math.isfinite(value):
        refuse("answer.not_real", text=printable(stripped))
    places = None
    body = toks[1:] if toks[0].kind == "op" and toks[0].op in ("+", "-") else toks
    if parser.inexact and len(body) == 2 and body[0].kind == "num":
        num = _NUMBER.fullmatch(body[0].text)
        assert num is not None
        places = _places(num)
    return Entry(stripped, not parser.inexact, places, 0, number)

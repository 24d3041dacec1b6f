"""The safe answer parser, and the comparisons that grade a parsed answer.

Pure: no I/O, no printing, no numpy.  What a learner types at the practice
prompt, and every entry of a solution file, goes through :func:`parse_entry`
(one number), :func:`parse_row` / :func:`parse_matrix` (a row or a matrix
typed on one line) or :func:`entry_from_value` / :func:`matrix_from_value`
(a value a YAML reader already split up).

The grammar is fixed and small, read by a hand-written recursive-descent
parser that builds bounded values (:mod:`tutor.answer_values`: exact
rationals and surd/exp forms where cheap, an interval for every value) as it
goes.  Nothing is ever evaluated as code: there is no ``eval``, ``exec`` or
``compile``, and no text is ever handed to ``sympify``/``parse_expr``; sympy
is not used to parse or grade at all (:attr:`Entry.expr` builds a sympy
expression on request, from Python ints).  ::

    entry   := [+|-] ("inf" | "∞" | "oo")             (alone: -inf, +inf, ∞, .inf, sympy's -oo)
             | expr
    expr    := term (("+" | "-") term)*
    term    := unary (("*" | "/") unary)*             ("×", "·", "⋅" are "*"; "÷" is "/")
    unary   := ("+" | "-") unary | power              ("−" is "-")
    power   := atom [("^" | "**") unary]              (right-associative: 2^3^2 = 2^9)
    atom    := number | "e" | "E" | "(" expr ")"
             | ("sqrt" | "exp") "(" expr ")"
             | "√" atom                              (√2, √(2), √√16)
    number  := digits ["." digits] [exponent] | "." digits [exponent]
    exponent:= ("e" | "E") ["+" | "-" | "−"] digits

As in Python and in mathematics, ``-2^2`` is ``-4`` and ``2^-1`` is ``1/2``.
A number or a closing parenthesis directly before ``√``, ``sqrt``, ``exp`` or ``(`` multiplies
(``2√2`` is ``2*sqrt(2)``, as explain prints it); before a name it does not (``2e`` is an error).
``inf`` (also ``-inf``, ``+inf``, ``∞``, ``infinity``, YAML's ``-.inf``) is
only allowed as a whole entry, for a masked score.

Matrices: rows are separated by ``;`` or line breaks, or each row is in
brackets (``[[1, 2], [3, 4]]``, ``[1, 2], [3, 4]``, ``[1 2; 3 4]``).  Within
a row, commas separate the entries if there is any comma outside
parentheses; otherwise whitespace outside parentheses does, except next to
an operator: ``1 -1`` is two entries, ``1 - 1`` is one (see
:func:`split_entries`).

Exactness: ``0.1`` is the rational 1/10 (read from its text, never through a
binary float), but an entry containing any decimal literal (a ``.`` or an
exponent: ``0.45``, ``1e-3``) is *not exact* -- it claims a rounded value.

Resource guards: every entry is graded within a fixed budget (well under
100 ms for any entry inside these limits; ``make bench`` runs
``benchmarks/answers_budget.py`` over the worst entries we could build), and
an entry beyond a limit is refused with an :class:`~tutor.errors.AnswerError`
naming the column, never graded late:

* an entry has at most :data:`MAX_ENTRY_CHARS` characters, a typed matrix
  :data:`MAX_MATRIX_CHARS` and :data:`MAX_ENTRIES` entries; a number literal
  at most :data:`MAX_DIGITS` digits and a decimal exponent at most
  :data:`MAX_DECIMAL_EXPONENT`; nesting at most :data:`MAX_DEPTH` levels;
* a power's exponent is a whole number or a half of magnitude at most
  :data:`MAX_POWER` (``e^x`` is ``exp(x)`` and takes any real ``x``);
  ``exp``'s argument is at most :data:`MAX_EXP_ARGUMENT` in magnitude;
* the *size of every number the entry creates*, not one power at a time:
  every exact rational (and every coefficient and radicand of an exact
  surd/exp form) has at most :data:`~tutor.answer_values.MAX_EXACT_DIGITS`
  (600) digits in numerator and denominator together -- beyond, "too large
  to check exactly; write it as a decimal" (``166 × (10^-64)^64``,
  ``sqrt(1e-93^64+1)``); every intermediate value is at most
  :data:`MAX_MAGNITUDE` in magnitude and, when it is not rational and not
  zero, at least 10^-600 ("too small to check exactly");
* signs and zero tests (division by zero, the square root of a negative
  number) are exact for rationals and surd/exp forms, and otherwise come from
  the value's 256-bit interval: a value whose interval contains 0 is taken as
  zero (within about 10^-77 of it, relative to its parts: its square root is
  0, and dividing by it is refused as "cannot be told from zero").  sympy's
  assumption system is never asked, so nesting ``1/(1 + exp(…))`` costs the
  same at every level.

>>> parse_entry("1/(1 + 2*exp(sqrt(2)))").expr
1/(1 + 2*exp(sqrt(2)))
>>> e = parse_entry("-0.4500"); (e.expr, e.is_exact, e.places)
(-9/20, False, 4)
>>> [[e.text for e in row] for row in parse_matrix("1 -1; 2 - 1, 3")]
[['1', '-1'], ['2 - 1', '3']]
>>> parse_matrix("1 2; 3")
Traceback (most recent call last):
...
tutor.errors.AnswerError: row 2 has 1 entry, but row 1 has 2
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from tutor import answer_values as V
from tutor.answer_values import MAX_MAGNITUDE, Refused, Value
from tutor.errors import AnswerError

if TYPE_CHECKING:  # sympy (and mpmath, by answer_values) are imported lazily: fast-start commands never load them
    import sympy

    from tutor.exactnum import Exact

__all__ = [
    "DEFAULT_TOLERANCE",
    "MAX_MAGNITUDE",
    "MESSAGES",
    "Entry",
    "Matrix",
    "close",
    "entry_from_value",
    "equals_exactly",
    "matrix_from_value",
    "parse_entry",
    "parse_matrix",
    "parse_row",
    "rounding_interval",
]

# Every user-facing template of this module (to move to tutor.messages).
MESSAGES: dict[str, str] = {
    "answer.empty": "no answer given",
    "answer.too_long": "the answer has {length} characters; at most {limit} are allowed",
    "answer.unexpected": 'unexpected "{token}" at column {column} in "{text}"',
    "answer.unexpected_char": 'unexpected character "{char}" at column {column} in "{text}"',
    "answer.unexpected_end": 'the answer "{text}" ends too early (expected {expected})',
    "answer.unclosed": 'the "(" at column {column} in "{text}" is never closed',
    "answer.unmatched": 'unmatched ")" at column {column} in "{text}"',
    "answer.unknown_name": 'unknown name "{name}" at column {column} in "{text}" (known: sqrt, exp, e, inf)',
    "answer.needs_parens": '"{name}" at column {column} in "{text}" needs parentheses, e.g. {name}(2)',
    "answer.nan": '"{name}" at column {column} in "{text}" is not a number',
    "answer.inf_alone": 'inf at column {column} in "{text}" must stand alone, as inf or -inf',
    "answer.too_deep": 'nesting deeper than {limit} levels at column {column} in "{text}"',
    "answer.number_too_long": 'the number at column {column} in "{text}" has more than {limit} digits',
    "answer.decimal_exponent": 'the exponent of the number at column {column} in "{text}" is beyond ±{limit}',
    "answer.power_form": 'the power at column {column} in "{text}" needs a whole-number or half exponent (e.g. 2, -1, 1/2)',
    "answer.power_too_large": 'the exponent at column {column} in "{text}" is beyond ±{limit}',
    "answer.exp_range": 'the argument of exp at column {column} in "{text}" is beyond ±{limit}',
    "answer.too_large": 'the value at column {column} in "{text}" is too large',
    "answer.too_large_exact": 'the value at column {column} in "{text}" is too large to check exactly (over {limit} digits); write it as a decimal',
    "answer.too_small": 'the value at column {column} in "{text}" is too small to check exactly (not zero, but below 1e-{limit}); write it as a decimal',
    "answer.too_close": 'the value at column {column} in "{text}" is too close to zero to check exactly; write it as a decimal',
    "answer.div_zero": 'division by zero at column {column} in "{text}"',
    "answer.div_near_zero": 'division by a value that cannot be told from zero at column {column} in "{text}" (it cancels to within 1e-77 of its parts)',
    "answer.sqrt_negative": 'square root of a negative number at column {column} in "{text}"',
    "answer.not_real": '"{text}" is not a finite real number',
    "answer.not_text": "expected text, found {found}",
    "answer.bool": "{value} is not a number (true/false are not allowed in a matrix)",
    "answer.bad_value": "expected a number or text, found {found}",
    "answer.int_too_long": "the whole number has more than {limit} digits",
    "matrix.entry": "row {row}, entry {entry}: {message}",
    "matrix.row_entry": "entry {entry}: {message}",
    "matrix.empty_entry": "row {row}, entry {entry} is empty",
    "matrix.row_empty_entry": "entry {entry} is empty",
    "matrix.empty_row": "row {row} is empty",
    "matrix.ragged": "row {row} has {found}, but row 1 has {expected}",
    "matrix.empty_between": "row {row} is empty (two \";\" in a row?); write every row",
    "matrix.no_rows": "no rows given",
    "matrix.one_row": "expected one row, found {found} rows",
    "matrix.too_many": "the matrix has more than {limit} entries",
    "matrix.bracket_unclosed": 'the "[" at column {column} is never closed',
    "matrix.bracket_unmatched": 'unmatched "]" at column {column}',
    "matrix.bracket_deep": 'brackets nested too deeply at column {column} (a matrix is [[1, 2], [3, 4]])',
    "matrix.bracket_mixed": "mix of bracketed rows and bare entries; write every row in brackets, e.g. [[1, 2], [3, 4]]",
    "matrix.not_list": "expected a matrix (a list of rows), found {found}",
    "matrix.row_not_list": "row {row}: expected a list of numbers, found {found}",
}

MAX_ENTRY_CHARS = 2_000
MAX_MATRIX_CHARS = 100_000
MAX_ENTRIES = 4_096
MAX_DIGITS = 100
MAX_DECIMAL_EXPONENT = 400
MAX_DEPTH = 50
MAX_POWER = 64
MAX_EXP_ARGUMENT = 1_000

#: The quiz's default: accepts any answer rounded to 2 decimal places.
DEFAULT_TOLERANCE = 0.005 + 1e-12
#: Exact entries must match to this relative (and absolute) precision.
EXACT_REL_TOL = 1e-9
EXACT_ABS_TOL = 1e-12


def _fail(key: str, **fields: Any) -> NoReturn:
    raise AnswerError(MESSAGES[key].format(**fields))


def _show(text: str, limit: int = 60) -> str:
    """``text`` on one line, control characters escaped, cut at ``limit``."""
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


# --- the entry value -----------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One parsed number.

    ``text`` is what was written (stripped); ``is_exact`` is False when any
    decimal literal appears; ``places`` is the number of decimal places
    written when the whole entry is one decimal literal with an optional
    sign, else ``None``.  With an exponent, ``places`` counts the places of
    the value, so that the claim is always ``± 0.5·10^-places``: ``1e-3`` has
    3, ``1.5E2`` has -1.  ``infinity`` is -1 for ``-inf``, 1 for ``inf``, else
    0; ``number`` is the bounded value the parser built (``None`` for an
    infinity; see :mod:`tutor.answer_values`).  Two entries are equal when
    they were written alike.

    >>> parse_entry("0.45").places, parse_entry("1").places, parse_entry("2*0.5").places
    (2, None, None)
    >>> parse_entry("-inf").value()
    -inf
    """

    text: str
    is_exact: bool
    places: int | None = None
    infinity: int = 0
    number: Value | None = field(default=None, compare=False, repr=False)

    def value(self) -> float:
        """The value as a float (rounded from its interval); ±inf for an infinity."""
        return self._float

    @cached_property
    def _float(self) -> float:
        if self.infinity:
            return self.infinity * math.inf
        assert self.number is not None
        return self.number.float()

    @property
    def fraction(self) -> Fraction | None:
        """The exact value when it is rational (``0.45`` is 9/20), else ``None``."""
        return None if self.number is None else self.number.fraction

    @cached_property
    def expr(self) -> sympy.Expr:
        """The value as a sympy expression (``-oo`` for ``-inf``), built on first use.

        Built from the parser's exact forms and, for the rest, without
        sympy's automatic evaluation where that is what explodes
        (reciprocals, powers, ``exp`` of a sum): nothing sympy evaluates
        numerically while building, however deep the entry.
        """
        import sympy

        if self.infinity:
            return sympy.oo if self.infinity > 0 else -sympy.oo
        assert self.number is not None
        return _to_sympy(self.number)

    def __str__(self) -> str:
        return self.text


#: A sub-expression with at most this many operations beyond the exact forms is built
#: with sympy's evaluation (cheap at this size); a larger one without it where it explodes.
_SYMPY_EVALUATES = 12


def _to_sympy(root: Value) -> sympy.Expr:
    """``root`` as a sympy expression (iteratively: a chain of a thousand sums is fine).

    Exact forms become sympy's exact objects; a small sub-expression is built
    with sympy's evaluation (so ``exp(e)/exp(e)`` is 1, as sympy makes it); a
    large one without the evaluation that asks sympy's assumptions about
    nested ``exp`` (three times the work per level of ``1/(1 + exp(…))``).
    """
    import sympy

    def rational(c: Fraction) -> sympy.Expr:
        return sympy.Rational(c.numerator, c.denominator)

    def root_of(n: int) -> sympy.Expr:
        if n == 1:
            return sympy.Integer(1)
        if n.bit_length() <= 64:
            return sympy.sqrt(sympy.Integer(n))
        return sympy.Pow(sympy.Integer(n), sympy.Rational(1, 2), evaluate=False)  # no factoring

    def lin(terms: tuple[tuple[int, Fraction], ...]) -> sympy.Expr:
        return sympy.Add(*(rational(c) * root_of(n) for n, c in terms))

    built: dict[int, sympy.Expr] = {}
    size: dict[int, int] = {}
    stack = [root]
    while stack:
        v = stack[-1]
        if id(v) in built:
            stack.pop()
            continue
        if v.lin is not None:
            built[id(v)], size[id(v)] = lin(v.lin), 1
        elif v.mono is not None:
            r, n, exponent = v.mono
            built[id(v)], size[id(v)] = rational(r) * root_of(n) * sympy.exp(lin(exponent)), 1
        else:
            assert v.tree is not None
            kids = [k for k in v.tree[1:] if isinstance(k, Value) and id(k) not in built]
            if kids:
                stack.extend(kids)
                continue
            op, a = v.tree[0], built[id(v.tree[1])]
            b = built.get(id(v.tree[2])) if op in ("+", "-", "*", "/") else None
            size[id(v)] = 1 + sum(size[id(k)] for k in v.tree[1:] if isinstance(k, Value))
            built[id(v)] = _sympy_op(v.tree, a, b, evaluate=size[id(v)] <= _SYMPY_EVALUATES)
        stack.pop()
    return built[id(root)]


def _sympy_op(tree: tuple[Any, ...], a: sympy.Expr, b: sympy.Expr | None, *, evaluate: bool) -> sympy.Expr:
    """One operation of a :class:`Value` tree on the built operands ``a`` (and ``b``).

    Evaluated (as sympy itself builds it: ``x/x`` is 1) for a small sub-expression; else
    without the evaluation that asks sympy's assumptions about its operands.
    """
    import sympy

    op = tree[0]
    if op in ("+", "-", "*", "/"):
        assert b is not None
    if evaluate:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return a / b
        if op == "neg":
            return -a
        if op == "sqrt":
            return sympy.sqrt(a)
        if op == "exp":
            return sympy.exp(a)
        return a ** sympy.Integer(tree[2])
    if op == "+":
        return sympy.Add(a, b)
    if op == "-":
        return sympy.Add(a, sympy.Mul(-1, b))
    if op == "*":
        return sympy.Mul(a, b)
    if op == "/":
        return sympy.Mul(a, _power(b, sympy.Integer(-1)))
    if op == "neg":
        return -a
    if op == "sqrt":
        return _power(a, sympy.Rational(1, 2))
    if op == "exp":
        return sympy.exp(a, evaluate=False)
    return _power(a, sympy.Integer(tree[2]))


def _power(base: sympy.Expr, k: sympy.Expr) -> sympy.Expr:
    """``base^k`` unevaluated (evaluating asks sympy's assumptions about ``base``), but
    ``exp(x)^k`` as ``exp(k·x)``, so that a product cancels as sympy's own would."""
    import sympy

    if isinstance(base, sympy.exp):
        return sympy.exp(k * base.args[0], evaluate=False)
    return sympy.Pow(base, k, evaluate=False)


Matrix = tuple[tuple[Entry, ...], ...]


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
_NAN_NAMES = {"nan", "NaN", "NAN"}


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
        else:
            _fail("answer.unexpected_char", char=_show(c), column=i + 1, text=_show(text))
    toks.append(_Tok("end", "", "", n + 1))
    return toks


# --- the parser ------------------------------------------------------------------


class _Parser:
    """Recursive descent over the tokens; builds bounded values
    (:class:`tutor.answer_values.Value`) as it goes -- never sympy objects."""

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
        _fail(key, column=tok.col, text=_show(self.text), **fields)

    def unexpected(self, tok: _Tok, expected: str) -> NoReturn:
        if tok.kind == "end":
            _fail("answer.unexpected_end", text=_show(self.text), expected=expected)
        if tok.op == ")":
            self.fail("answer.unmatched", tok)
        self.fail("answer.unexpected", tok, token=_show(tok.text))

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
        """``fn(*args)``, a bound breached becoming the error at ``tok``'s column."""
        try:
            return fn(*args)
        except Refused as refused:
            self.fail(refused.key, tok, **refused.fields)

    # -- grammar
    def entry(self) -> Value:
        v = self.expression()
        t = self.peek()
        if t.kind != "end":
            self.unexpected(t, "the end")
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
            if self.implicit(t):  # 2√2, 3sqrt(2), 2exp(1), 2(1 + e): a product, as the tables print it
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
        """Whether ``t`` starts a factor written without ``*``: ``√``, ``sqrt``, ``exp`` or ``(``."""
        return (t.kind == "op" and t.op in ("√", "(")) or (t.kind == "name" and t.op in ("sqrt", "exp"))

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
            if name in ("sqrt", "exp"):
                lp = self.take()
                if not (lp.kind == "op" and lp.op == "("):
                    self.fail("answer.needs_parens", t, name=name)
                with self.deeper(lp):
                    v = self.expression()
                self.close(lp)
                return self.op(t, V.sqrt, v) if name == "sqrt" else self.exp(v, t)
            if name in ("e", "E"):
                return V.e()
            if name in _INF_NAMES:
                self.fail("answer.inf_alone", t)
            if name in _NAN_NAMES:
                self.fail("answer.nan", t, name=name)
            self.fail("answer.unknown_name", t, name=_show(name, 20))
        self.unexpected(t, "a number")

    def close(self, opening: _Tok) -> None:
        t = self.take()
        if t.kind == "op" and t.op == ")":
            return
        if t.kind == "end":
            self.fail("answer.unclosed", opening)
        self.unexpected(t, '")"')

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


def parse_entry(text: str) -> Entry:
    """Parse one number in the answer grammar (see the module docstring).

    >>> parse_entry("3*sqrt(2)/4").expr
    3*sqrt(2)/4
    >>> parse_entry("0.1").expr, parse_entry("0.1").is_exact
    (1/10, False)
    >>> parse_entry("2 + * 3")
    Traceback (most recent call last):
    ...
    tutor.errors.AnswerError: unexpected "*" at column 5 in "2 + * 3"
    """
    if not isinstance(text, str):
        _fail("answer.not_text", found=type(text).__name__)
    if len(text) > MAX_ENTRY_CHARS:
        _fail("answer.too_long", length=len(text), limit=MAX_ENTRY_CHARS)
    stripped = text.strip()
    if not stripped:
        _fail("answer.empty")
    if m := _INF_ALONE.fullmatch(stripped):
        return Entry(stripped, True, None, -1 if m["sign"] in ("-", "−") else 1)
    toks = _tokenize(text)
    parser = _Parser(text, toks)
    number = parser.entry()
    if not math.isfinite(number.float()):
        _fail("answer.not_real", text=_show(stripped))
    places = None
    body = toks[1:] if toks[0].kind == "op" and toks[0].op in ("+", "-") else toks
    if parser.inexact and len(body) == 2 and body[0].kind == "num":
        num = _NUMBER.fullmatch(body[0].text)
        assert num is not None
        places = _places(num)
    return Entry(stripped, not parser.inexact, places, 0, number)


# --- values a YAML/JSON reader already split ---------------------------------------


def entry_from_value(value: object) -> Entry:
    """One entry from a loaded YAML/JSON value: an int, a str, or a float.

    A str (including a YAML reader's ``str`` subclass that keeps a plain
    scalar's text) is parsed as written, so ``"0.4500"`` keeps its 4 places.
    A float is re-parsed from its shortest ``repr`` (``0.45`` → 2 places; a
    YAML loader that already turned ``0.4500`` into a float has lost the
    trailing zeros).  Booleans, ``None`` and anything else are refused.

    >>> entry_from_value(3).expr, entry_from_value(0.25).places, entry_from_value("1/3").expr
    (3, 2, 1/3)
    """
    if isinstance(value, bool):
        _fail("answer.bool", value=str(value).lower())
    if isinstance(value, int):
        if value.bit_length() > MAX_DIGITS * 10 // 3:
            _fail("answer.int_too_long", limit=MAX_DIGITS)
        return parse_entry(str(value))
    if isinstance(value, float):
        return parse_entry(repr(value))
    if isinstance(value, str):
        return parse_entry(str(value))
    _fail("answer.bad_value", found=_describe(value))


def _describe(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _check_shape(rows: Sequence[Sequence[Entry]]) -> None:
    if not rows:
        _fail("matrix.no_rows")
    for r, row in enumerate(rows, start=1):
        if not row:
            _fail("matrix.empty_row", row=r)
    for r, row in enumerate(rows[1:], start=2):
        if len(row) != len(rows[0]):
            _fail("matrix.ragged", row=r, found=_entries(len(row)), expected=len(rows[0]))


def matrix_from_value(value: object) -> Matrix:
    """A matrix from a loaded YAML/JSON list of lists (see :func:`entry_from_value`).

    >>> [[e.text for e in row] for row in matrix_from_value([[1, "1/2"], [0.25, "-inf"]])]
    [['1', '1/2'], ['0.25', '-inf']]
    """
    if not isinstance(value, (list, tuple)):
        _fail("matrix.not_list", found=_describe(value))
    rows: list[tuple[Entry, ...]] = []
    count = 0
    for r, row in enumerate(value, start=1):
        if not isinstance(row, (list, tuple)):
            _fail("matrix.row_not_list", row=r, found=_describe(row))
        count += len(row)
        if count > MAX_ENTRIES:
            _fail("matrix.too_many", limit=MAX_ENTRIES)
        entries = []
        for c, v in enumerate(row, start=1):
            try:
                entries.append(entry_from_value(v))
            except AnswerError as err:
                _fail("matrix.entry", row=r, entry=c, message=str(err))
        rows.append(tuple(entries))
    _check_shape(rows)
    return tuple(rows)


# --- matrices typed on one line ------------------------------------------------------

_BINARY_START = "*/^×·⋅÷"
_SIGNS = "+-−"
_ENDS_WITH_FUNCTION = re.compile(r"(?<![A-Za-z0-9_])(?:sqrt|exp)$")


def _split_depth0(text: str, seps: str) -> list[str]:
    """Split ``text`` at characters in ``seps`` outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(depth - 1, 0)
        elif c in seps and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _chunks(text: str) -> list[tuple[int, int]]:
    """The (start, end) spans of ``text`` between runs of whitespace outside
    parentheses."""
    spans, depth, start = [], 0, None
    for i, c in enumerate(text):
        if c.isspace() and depth == 0:
            if start is not None:
                spans.append((start, i))
                start = None
            continue
        if start is None:
            start = i
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(depth - 1, 0)
    if start is not None:
        spans.append((start, len(text)))
    return spans


def _joins(before: str, after: str) -> bool:
    """Whether the whitespace between two chunks is inside one entry."""
    if before[-1] in _SIGNS or before[-1] in _BINARY_START or before[-1] == "√":
        return True
    if _ENDS_WITH_FUNCTION.search(before):
        return True
    return after[0] in _BINARY_START or after in ("+", "-", "−")


def split_entries(row: str) -> list[str]:
    """Split one row's text into the texts of its entries.

    If a comma appears outside parentheses, commas separate the entries
    (``1 + 2, 3`` is 3 and 3).  Otherwise whitespace outside parentheses
    separates them, except next to an operator: a gap does not separate when
    the text before it ends with an operator (``+ - * / ^ √`` or ``sqrt``/
    ``exp``), or the text after it starts with ``* / ^`` or is a lone ``+`` or
    ``-``.  So a sign glued to a number starts a new entry and a spaced
    operator does not.  Each entry's text is sliced from ``row`` as written.

    >>> split_entries("1 -1"), split_entries("1 - 1"), split_entries("1/(1 + 2) 3")
    (['1', '-1'], ['1 - 1'], ['1/(1 + 2)', '3'])
    """
    parts = _split_depth0(row, ",")
    if len(parts) > 1:
        return [p.strip() for p in parts]
    spans: list[tuple[int, int]] = []
    for start, end in _chunks(row):
        if spans and _joins(row[spans[-1][0] : spans[-1][1]], row[start:end]):
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return [row[start:end] for start, end in spans]


def _bracket_groups(text: str, offset: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The depth-1 ``[...]`` groups of ``text`` as (inner text, column of the
    inner text's first character), and the characters other than whitespace,
    ``,`` and ``;`` found outside them.  ``offset`` + index + 1 is a column."""
    groups: list[tuple[str, int]] = []
    outside: list[tuple[str, int]] = []
    depth, start = 0, 0
    for i, c in enumerate(text):
        if c == "[":
            if depth == 0:
                start = i
            depth += 1
        elif c == "]":
            if depth == 0:
                _fail("matrix.bracket_unmatched", column=offset + i + 1)
            depth -= 1
            if depth == 0:
                groups.append((text[start + 1 : i], offset + start + 2))
        elif depth == 0 and not (c.isspace() or c in ",;"):
            outside.append((c, offset + i + 1))
    if depth:
        _fail("matrix.bracket_unclosed", column=offset + start + 1)
    return groups, outside


def _entries(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def _split_rows(text: str) -> list[str]:
    """Rows separated by ``;`` or line breaks.  Blank lines and one trailing ``;`` are
    ignored; an empty row between two ``;`` (``1 1;;2 2``) is an error, not dropped."""
    pieces = _split_depth0(text, ";")
    rows: list[str] = []
    for n, piece in enumerate(pieces):
        lines = [r for r in _split_depth0(piece, "\n\r") if r.strip()]
        if not lines and n < len(pieces) - 1:
            _fail("matrix.empty_between", row=len(rows) + 1)
        rows += lines
    return rows


def _row_texts(text: str) -> list[str]:
    """Split a whole matrix's text into the texts of its rows."""
    if "[" not in text and "]" not in text:
        return _split_rows(text)
    groups, outside = _bracket_groups(text, 0)
    if outside:  # any bracket makes every row bracketed
        _fail("matrix.bracket_mixed")
    if len(groups) == 1:
        inner, col = groups[0]
        if "[" in inner:  # [[1, 2], [3, 4]]: the outer pair wraps the rows
            rows, inside = _bracket_groups(inner, col - 1)
            if inside:
                _fail("matrix.bracket_mixed")
        else:  # [1, 2] or [1 2; 3 4]
            return _split_rows(inner)
    else:  # [1, 2], [3, 4]
        rows = groups
    for inner, col in rows:
        if "[" in inner:
            _fail("matrix.bracket_deep", column=col + inner.index("["))
    return [inner for inner, _ in rows]


def _parse_rows(text: str, *, one_row: bool) -> Matrix:
    if not isinstance(text, str):
        _fail("answer.not_text", found=type(text).__name__)
    if len(text) > MAX_MATRIX_CHARS:
        _fail("answer.too_long", length=len(text), limit=MAX_MATRIX_CHARS)
    if not text.strip():
        _fail("answer.empty")
    row_texts = _row_texts(text)
    if one_row and len(row_texts) != 1:
        _fail("matrix.one_row", found=len(row_texts))
    split = [split_entries(row_text) for row_text in row_texts]
    if sum(len(texts) for texts in split) > MAX_ENTRIES:  # counted before any entry is parsed: refused at once
        _fail("matrix.too_many", limit=MAX_ENTRIES)
    rows: list[tuple[Entry, ...]] = []
    for r, texts in enumerate(split, start=1):
        entries = []
        for c, entry_text in enumerate(texts, start=1):
            if not entry_text:
                _fail("matrix.row_empty_entry" if one_row else "matrix.empty_entry", row=r, entry=c)
            try:
                entries.append(parse_entry(entry_text))
            except AnswerError as err:
                _fail("matrix.row_entry" if one_row else "matrix.entry", row=r, entry=c, message=str(err))
        rows.append(tuple(entries))
    _check_shape(rows)
    return tuple(rows)


def parse_matrix(text: str) -> Matrix:
    """Parse a matrix typed on one line (or several).

    Rows are separated by ``;`` or line breaks (blank rows are ignored), or
    written in brackets: ``[[1, 1], [2, 2]]``, ``[1, 1], [2, 2]``,
    ``[1 1; 2 2]``.  Entries within a row follow :func:`split_entries`.
    Ragged rows are an error naming the row.

    >>> [[e.text for e in row] for row in parse_matrix("1 -1; 2 - 1 3")]
    [['1', '-1'], ['2 - 1', '3']]
    """
    return _parse_rows(text, one_row=False)


def parse_row(text: str) -> tuple[Entry, ...]:
    """Parse one row (for row-by-row input): ``1 1``, ``1, 1`` or ``[1, 1]``.

    A trailing ``,`` after the closing bracket (``[1, 1],``, as when pasting
    a line of ``[[1, 1],\\n [2, 2]]``) is ignored.

    >>> [e.text for e in parse_row("[1, 1/2],")]
    ['1', '1/2']
    """
    if isinstance(text, str):
        stripped = text.strip()
        if stripped.endswith(",") and stripped[:-1].rstrip().endswith("]"):
            text = stripped[:-1]
    return _parse_rows(text, one_row=True)[0]


# --- comparisons ---------------------------------------------------------------------


def close(entry: Entry, expected: float, *, tolerance: float = DEFAULT_TOLERANCE, exact: Exact | None = None) -> bool:
    """Whether ``entry`` is a right answer for ``expected``.

    Infinite values match only the same infinity.  An entry with decimals
    passes within ``tolerance``.  An exact entry claims exactly its value:
    given the true value ``exact`` (from :mod:`tutor.exactnum`) it must equal
    it (:func:`equals_exactly`: ``1000000001/1000000000`` is not 1); given
    only the float ``expected``, it must equal that float to
    :data:`EXACT_REL_TOL` (relative; :data:`EXACT_ABS_TOL` near zero), which
    is what a float can tell.

    >>> close(parse_entry("0.45"), 0.4502), close(parse_entry("9/20"), 0.4502)
    (True, False)
    """
    v = entry.value()
    if math.isnan(expected):
        return False
    if entry.is_exact and exact is not None:
        return equals_exactly(entry, exact)
    if math.isinf(v) or math.isinf(expected):
        return v == expected
    if entry.is_exact:
        return math.isclose(v, expected, rel_tol=EXACT_REL_TOL, abs_tol=EXACT_ABS_TOL)
    return abs(v - expected) <= tolerance


def equals_exactly(entry: Entry, true: Exact) -> bool:
    """Whether the value of ``entry`` (exact or with decimals: ``0.0`` is 0) is exactly ``true``.

    ``-inf`` equals only a masked score; rationals compare as fractions; a
    one-term surd such as ``3*sqrt(2)/4`` compares with a surd by its square;
    the rest (softmax values, entries with ``exp``) compare at a precision
    that shows every part of the entry -- see
    :func:`tutor.answer_values.equals_exact` for the bounds and the argument
    that distinct values do not collide.

    >>> from fractions import Fraction
    >>> from tutor.exactnum import Rat
    >>> equals_exactly(parse_entry("1000000001/1000000000"), Rat(Fraction(1)))
    False
    >>> equals_exactly(parse_entry("2/2"), Rat(Fraction(1))), equals_exactly(parse_entry("1.0"), Rat(Fraction(1)))
    (True, True)
    """
    from tutor.exactnum import NegInf

    if entry.infinity:
        return entry.infinity < 0 and isinstance(true, NegInf)
    assert entry.number is not None
    return V.equals_exact(entry.number, true)


def rounding_interval(entry: Entry) -> tuple[float, float]:
    """The values ``entry`` claims: ``v ± 0.5·10^-places`` for a decimal
    written to ``places`` places, else the zero-width ``(v, v)``.

    Only a lone decimal literal carries a rounding claim; an expression that
    contains decimals (``1.41/2``) claims its value exactly.

    >>> rounding_interval(parse_entry("0.45")), rounding_interval(parse_entry("1/2"))
    ((0.445, 0.455), (0.5, 0.5))
    """
    exact = entry.fraction
    if entry.places is None or exact is None:
        v = entry.value()
        return v, v
    half = Fraction(1, 2) * Fraction(10) ** -entry.places
    return float(exact - half), float(exact + half)

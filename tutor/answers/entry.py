"""One parsed number (:class:`Entry`) and a parsed matrix (:data:`Matrix`).

An entry keeps what was written, whether it claims an exact value, the
decimal places it is rounded to, and the bounded value the parser built
(:mod:`.values`); its sympy expression is built only on request
(:attr:`Entry.expr`), never from text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .values import Value

if TYPE_CHECKING:  # sympy (and mpmath, by .values) are imported lazily: fast-start commands never load them
    import sympy


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
    infinity; see :mod:`.values`).  Two entries are equal when
    they were written alike.

    >>> from tutor.answers import parse_entry
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
        if op in ("cos", "sin"):  # RoPE's cos(m·θ), sin(m·θ) (issue 23)
            return sympy.cos(a) if op == "cos" else sympy.sin(a)
        return a ** sympy.Integer(tree[2])
    # Add and Mul unevaluated too: Mul's flattening rebuilds ``Pow(1 + exp(…), -1)`` with evaluation,
    # whose assumptions evaluate the nested exp numerically (tens of seconds at 13 levels of a sigmoid).
    if op == "+":
        return sympy.Add(a, b, evaluate=False)
    if op == "-":
        return sympy.Add(a, sympy.Mul(-1, b, evaluate=False), evaluate=False)
    if op == "*":
        return sympy.Mul(a, b, evaluate=False)
    if op == "/":
        return sympy.Mul(a, _power(b, sympy.Integer(-1)), evaluate=False)
    if op == "neg":
        return -a
    if op == "sqrt":
        return _power(a, sympy.Rational(1, 2))
    if op == "exp":
        return sympy.exp(a, evaluate=False)
    if op in ("cos", "sin"):
        return sympy.cos(a, evaluate=False) if op == "cos" else sympy.sin(a, evaluate=False)
    return _power(a, sympy.Integer(tree[2]))


def _power(base: sympy.Expr, k: sympy.Expr) -> sympy.Expr:
    """``base^k`` unevaluated (evaluating asks sympy's assumptions about ``base``), but
    ``exp(x)^k`` as ``exp(k·x)``, so that a product cancels as sympy's own would."""
    import sympy

    if isinstance(base, sympy.exp):
        return sympy.exp(k * base.args[0], evaluate=False)
    return sympy.Pow(base, k, evaluate=False)


#: A parsed matrix: rows of entries, every row as long as the first.
Matrix = tuple[tuple[Entry, ...], ...]

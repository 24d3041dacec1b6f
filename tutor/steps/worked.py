"""The pieces of a worked entry: operands in a product, the result, a dot product, a softmax row.

A step kind's ``work`` function (:class:`tutor.steps.kind.StepKind`) writes
one entry of its step with these: ``Q[t1, :]·K[t2, :] = 1·2 + 1·2 = 4``, in
the answer grammar a learner types.  Its ``arithmetic`` function writes the
whole step out as it is done on paper (:class:`Worked`, in notation: every
dot product expanded, every ``exp`` of a softmax row, the row's sum, each
weight as ``e_j / Σ``), which every renderer of a worked solution shows.
Pure: no printing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ..base.decimals import fixed, legible
from ..base.messages import Text
from ..exact.numbers import Exact, Rat, frac_text, notation
from ..exact.rotary import Trig
from ..exercise.record import Exercise
from .records import Step

#: An exercise is *hand-sized* when no size exceeds this: L, L_k, d_model (and d_kv), every head's
#: d_k and d_v, and d_out.  ``explain`` shows the arithmetic of such exercises unless asked ``--brief``.
HAND_SIZED = 4


def hand_sized(ex: Exercise) -> bool:
    """Whether ``ex`` is small enough to be worked out on paper in full (every size at most :data:`HAND_SIZED`)."""
    sizes = [ex.L, ex.L_k, ex.d_model, len(ex.kv[0]), ex.d_out]
    sizes += [n for hd in ex.heads for n in (hd.d_k, hd.d_v)]
    return max(sizes) <= HAND_SIZED


#: What separates the parts of a line of arithmetic that belong together (``exp(√2) ≈ 4.1133``):
#: a renderer that must wrap a line wraps it here first.
PART = ",  "


@dataclass(frozen=True)
class Worked:
    """One piece of a step's arithmetic, in notation (``·``, ``√``, ``Σ``; renderers transliterate).

    ``label`` says what is worked out: an entry (``scores[t1, t2]``) or a row
    (``t1``); ``lines`` the calculation, the first line following the label
    after ``sep`` (``" = "`` for an entry, ``": "`` for a row).
    """

    label: str
    lines: tuple[Text, ...]  # notation; a clause in words is a Msg
    sep: str = " = "


def factor(e: Exact | Fraction, value: float, places: int = 6) -> str:
    """An operand in a product: a short exact rational as written (parenthesised when it has a
    sign or a slash), otherwise its decimal at ``places`` (one that rounds to 0 kept legible: ``1.2e-5``)."""
    if isinstance(e, Fraction):
        e = Rat(e)
    if isinstance(e, Rat) and len(frac_text(e.q)) <= 6:
        text = frac_text(e.q)
        return f"({text})" if "/" in text or text.startswith("-") else text
    text = legible(value, places)
    return f"({text})" if text.startswith("-") else text


def exact_factor(e: Exact | Fraction, value: float, places: int = 6, limit: int = 24) -> str:
    """An operand in a product written exactly when its text is short (RoPE's ``cos(1)``, ``(cos(2) - sin(2))``,
    parenthesised when it is a sum or has a sign), else as :func:`factor` writes it."""
    if isinstance(e, Trig) and len(str(e)) <= limit:
        text = str(e)
        return f"({text})" if " " in text or text.startswith("-") else text
    return factor(e, value, places)


def total(e: Exact, value: float, places: int = 4, *, rounded: bool = False) -> str:
    """``= 4``, ``= 2*sqrt(2) ≈ 2.8284``, ``≈ 0.1084``: the result of a worked entry.  ``rounded``: the
    operands written are rounded decimals that do not give an exact result as written (``≈ 1``, not ``= 1``)."""
    if isinstance(e, Rat):
        return f"{'≈' if rounded else '='} {frac_text(e.q)}"
    if math.isinf(value):
        return "= -inf"
    text = str(e)
    if len(text) <= 16:
        return f"= {text} ≈ {legible(value, places)}"
    return f"≈ {legible(value, places)}"


def dot(pairs: Sequence[tuple[str, str]]) -> str:
    """``1·2 + 1·2``: a dot product written out."""
    return " + ".join(f"{a}·{b}" for a, b in pairs)


def softmax_row(src: Step, i: int, j: int, weight: float | None = None) -> str:
    """``exp(a_ij) / (exp(a_i1) + …) = 4.1133 / (4.1133 + …)`` for a weights entry (not masked).  With the
    entry's ``weight``: the exponentials at more than 4 places where the division as written would not round
    to it at 4 (F8 of the class trial)."""
    row = src.value[i]
    top = max(v for v in row if not math.isinf(v))
    shift = top if abs(top) > 20 else 0.0  # keep exp() readable (and from underflowing): divide by exp(max)

    def power(v: float) -> str:
        if math.isinf(v):
            return "0"
        by = f"({fixed(shift, 4)})" if shift < 0 else fixed(shift, 4)
        return f"exp({fixed(v, 4)} - {by})" if shift else f"exp({fixed(v, 4)})"

    def number(v: float, p: int) -> str:
        return "0" if math.isinf(v) else fixed(math.exp(v - shift), p)

    p = 4
    while weight is not None and p < MOST_PLACES:
        terms = [Fraction(number(v, p)) for v in row]
        if sum(terms) != 0 and rounds_to(terms[j] / sum(terms), weight, 4):
            break
        p += 1
    return (f"{power(row[j])} / ({' + '.join(power(v) for v in row)}) = "
            f"{number(row[j], p)} / ({' + '.join(number(v, p) for v in row)})")


def entry_name(step: Step, i: int, j: int) -> str:
    """``scores[t1, t2]``: an entry named by its step's result and its row and column labels."""
    return f"{step.name}[{step.row_labels[i]}, {step.col_labels[j]}]"


# --- a whole step worked out (the kinds' ``arithmetic``) ---------------------------------------------


def result(e: Exact, value: float, places: int, *, rounded: bool = False) -> str:
    """The result of an arithmetic line, in notation: ``= 2``, ``= 3/2 = 1.5000``, ``= 2√2 ≈ 2.8284``, ``≈ 0.1084``.

    ``=`` before a decimal only when the decimal is the exact value; a decimal
    that rounds to 0 is kept legible (``1.2e−5``).  ``rounded``: the line's
    operands are rounded decimals that do not give the exact result as
    written, so even an exact result follows ``≈`` (``0.3333·3 + … ≈ 3``).
    """
    if math.isinf(value):
        return "= −∞"
    shown = notation(legible(value, places))
    if rounded and isinstance(e, Trig):  # decimals that do not give RoPE's exact value: only ≈ is true
        return f"≈ {shown}"
    if isinstance(e, Rat):
        lead = "≈" if rounded else "="
        if e.q.denominator == 1:
            return f"{lead} {e.q.numerator}".replace("-", "−")
        exact_decimal = (e.q * 10**max(places, 0)).denominator == 1
        return f"{lead} {notation(frac_text(e.q))} {'=' if exact_decimal else '≈'} {shown}"
    text = str(e)
    if len(text) <= 16:
        return f"= {notation(text)} ≈ {shown}"
    return f"≈ {shown}"


def written(text: str) -> Fraction | None:
    """The number an operand as written stands for (``2``, ``(−1/2)``, ``0.1084``, ``1.2e-5``), or
    ``None`` when it is no plain number (``√2``)."""
    try:
        return Fraction(text.strip("()").replace("−", "-"))
    except ValueError:
        return None


def as_written(pairs: Sequence[tuple[str, str]], extra: str, e: Exact) -> bool:
    """Whether the dot product as written (``pairs`` of operands, an added term ``extra``) gives the
    exact rational ``e`` itself, so that ``=`` is true of the decimals a learner reads."""
    factors = [f for pair in pairs for f in pair]
    if isinstance(e, Trig) or any(written(f) is None for f in factors):  # RoPE's exact factors (cos(1)): the
        return not any("." in f for f in factors) and "." not in extra  # sum is exact unless a decimal is written
    if not isinstance(e, Rat):
        return True  # an irrational result follows ≈ anyway
    total_ = Fraction(0)
    for a, b in pairs:
        x, y = written(a), written(b)
        if x is None or y is None:
            return False
        total_ += x * y
    if extra:
        z = written(extra)
        if z is None:
            return False
        total_ += z
    return total_ == e.q


def products(pairs: Sequence[tuple[str, str]], extra: str = "") -> str:
    """``1·2 + 0·1 + 2``: a dot product written out in notation, with an added term (a bias) if given."""
    return notation(dot(pairs) + (f" + {extra}" if extra else ""))


#: How many more decimals than its result the operands of a worked line carry at first (``check``'s comments
#: do the same): 4-place weights times V summed give 1.9711 where the value is 1.9713 (F8 of the class trial), and
#: a learner who follows the line is marked wrong.  :func:`entry_products` adds more where even these do not.
CARRY = 2

#: The most decimals an operand is ever given (a line that still did not add up would say ``≈`` of its terms).
MOST_PLACES = 12


def adds_up(pairs: Sequence[tuple[str, str]], extra: str, value: float, places: int) -> bool:
    """Whether the dot product as written (``pairs`` of operands, an added term ``extra``), computed,
    rounds at ``places`` to the decimal of ``value`` that the line prints as its result.  A line with an
    operand that is no plain number (RoPE's ``cos(1)``) is taken as it is: its arithmetic is not decimals."""
    terms = [f for pair in pairs for f in pair] + ([extra] if extra else [])
    if any(written(f) is None for f in terms):
        return True
    numbers = [(written(a) or Fraction(0)) * (written(b) or Fraction(0)) for a, b in pairs]  # none is None here
    total_ = sum(numbers, Fraction(0)) + (written(extra) or Fraction(0) if extra else Fraction(0))
    return math.isinf(value) or rounds_to(total_, value, places)


def rounds_to(x: Fraction, value: float, places: int) -> bool:
    """Whether ``x`` rounds at ``places`` to the decimal of ``value`` shown there (:func:`legible`), and not
    by a tie (``2.674850`` to 4 places: 2.6748 or 2.6749, as the learner rounds)."""
    shown = legible(value, places)
    if "e" in shown:  # a value that rounds to 0: shown with two significant digits
        return legible(float(x), places) == shown
    return abs(x - Fraction(shown)) < Fraction(1, 2 * 10**places) if places >= 0 else legible(float(x), places) == shown


def carried(make: Callable[[int], tuple[list[tuple[str, str]], str]], value: float, places: int = 4,
            start: int = 6) -> tuple[list[tuple[str, str]], str]:
    """The operands ``make(p)`` gives (pairs and an added term) at ``start`` places, or more until, computed as
    written, they round at ``places`` to ``value`` (:func:`adds_up`): for the one-entry lines of ``check`` and
    ``practice``, as :func:`entry_products` does for a whole step."""
    p = start
    pairs, extra = make(p)
    while not adds_up(pairs, extra, value, places) and p < MOST_PLACES:
        p += 1
        pairs, extra = make(p)
    return pairs, extra


def entry_products(step: Step, pairs_of: Callable[[int, int, int], tuple[list[tuple[str, str]], str]],
                   places: int) -> tuple[Worked, ...]:
    """Every entry of ``step`` as its dot product: ``Q[t1, d1] = 1·1 + 0·1 + 1·0 + 0·0 = 1``.

    ``pairs_of(i, j, p)`` gives the factors of entry ``(i, j)``, decimals at ``p`` places, and an added
    term (``""`` for none).  The result is shown at ``places``; the operands at :data:`CARRY` more, and
    more again until the products as written, computed, round to the result shown (each entry on its own:
    ``0.028705·1 + 0.485648·2 + 0.485648·2 ≈ 1.9713``, where 4-place weights would sum to 1.9711).
    """
    rows, cols = step.shape
    out = []
    for i in range(rows):
        for j in range(cols):
            e, value = step.exact[i][j], step.value[i][j]
            p = places + CARRY
            pairs, extra = pairs_of(i, j, p)
            while not adds_up(pairs, extra, value, places) and p < MOST_PLACES:
                p += 1
                pairs, extra = pairs_of(i, j, p)
            tail = result(e, value, places, rounded=not as_written(pairs, extra, e))
            out.append(Worked(entry_name(step, i, j), (f"{products(pairs, extra)} {tail}",)))
    return tuple(out)


def _is_zero(e: Exact) -> bool:
    return isinstance(e, Rat) and e.q == 0


def softmax_arithmetic(src: Step, weights: Step, i: int, places: int, *, none_left: Text,
                       sum_label: str) -> Worked:
    """Row ``i`` of a softmax worked out: the ``exp`` of each score, their sum, each weight ``e_j / Σ``.

    ``src`` is the step the softmax reads (the scaled or masked scores),
    ``weights`` its result.  A blocked score is ``exp(−∞) = 0``; when a row's
    largest score is over 20 in size (above 20, or below −20) every ``exp`` is
    taken of the score minus that maximum (the weights do not change, and the
    numbers stay readable: neither overflowing nor underflowing to 0).
    ``none_left`` is the line for a row with no key left to attend;
    ``sum_label`` the name of the sum (``Σ``).
    """
    row = src.value[i]
    label = src.row_labels[i]
    live = [v for v in row if not math.isinf(v)]
    if not live:
        return Worked(label, (none_left,), ": ")
    top = max(live)
    shift = top if abs(top) > 20 else 0.0  # exp(-800) underflows to 0: Σ would read 0, each weight 0 / 0
    exps = [0.0 if math.isinf(v) else math.exp(v - shift) for v in row]  # e_j (shifted)

    ones = [not math.isinf(v) and (v == shift if shift else _is_zero(src.exact[i][j])) for j, v in enumerate(row)]  # exp(0) = 1
    live_j = [j for j, v in enumerate(row) if not math.isinf(v)]
    exact_sum = all(ones[j] for j in live_j)  # every term is 1: the sum is a whole number

    def lines(p: int) -> tuple[tuple[str, str, str], bool]:
        """The row's three lines with each e_j at ``p`` places, and whether every weight as written
        (``e_j / Σ``, both as printed), computed, rounds to the weight shown at ``places``."""

        def number(j: int) -> str:
            """e_j as it is carried on: ``1`` for exp(0), else its decimal."""
            return "1" if ones[j] else notation(legible(exps[j], p))

        def power(j: int) -> str:
            if math.isinf(row[j]):
                return "exp(−∞) = 0"
            if shift:
                sign = "=" if ones[j] else "≈"
                by = notation(legible(shift, p))
                by = f"({by})" if shift < 0 else by  # exp(−800 − (−799.2929))
                return f"exp({notation(legible(row[j], p))} − {by}) {sign} {number(j)}"
            if ones[j]:
                return "exp(0) = 1"
            return f"exp({notation(str(src.exact[i][j]))}) ≈ {number(j)}"

        # Σ is the sum of the e_j as written (F8 of the class trial: the sum of the true e_j, rounded,
        # is not the sum of the rounded terms printed before it), so the line is "=" wherever it can be
        terms = [written(number(j)) for j in live_j]
        carried = sum((x for x in terms if x is not None), Fraction(0))  # every e_j is a plain decimal
        total_text = notation(legible(float(carried), p))
        sum_sign = "=" if written(total_text) == carried else "≈"
        if exact_sum:
            total_text, sum_sign = str(len(live_j)), "="
        sign = "=" if exact_sum else "≈"
        sum_line = f"{sum_label} {sign} {' + '.join(number(j) for j in live_j)} {sum_sign} {total_text}" \
            if len(live_j) > 1 else f"{sum_label} {sign} {total_text}"
        shares, adds = [], True
        den = written(total_text)
        for j, v in enumerate(row):
            w = weights.exact[i][j]
            if math.isinf(v):
                shares.append("0")
                continue
            num = written(number(j))
            quotient = num / den if num is not None and den else None
            if quotient is not None and not rounds_to(quotient, weights.value[i][j], places):
                adds = False
            if isinstance(w, Rat):
                tail = result(w, weights.value[i][j], places, rounded=quotient != w.q)
            else:
                tail = f"≈ {notation(legible(weights.value[i][j], places))}"
            shares.append(f"{number(j)} / {total_text} {tail}")
        return (PART.join(power(j) for j in range(len(row))), sum_line, f"{weights.name}: " + PART.join(shares)), adds

    p = places  # the e_j at the weights' places, and more where the weights as written would not round right
    text, adds = lines(p)
    while not adds and p < MOST_PLACES:
        p += 1
        text, adds = lines(p)
    return Worked(label, text, ": ")

"""What a learner types, read safely, and graded: the answer grammar (a
recursive-descent parser; nothing is ever evaluated as code), bounded exact
values and intervals, matrices typed on one line (or pasted as PyTorch or
NumPy printed them) or read from YAML, and the one grading rule of ``practice``
and ``check``.

Pure: no I/O, no printing, no numpy.  What a learner types at the practice
prompt, and every entry of a solution file, goes through :func:`parse_entry`
(one number), :func:`parse_row` / :func:`parse_matrix` (a row or a matrix
typed on one line) or :func:`entry_from_value` / :func:`matrix_from_value`
(a value a YAML reader already split up); :func:`close`,
:func:`judge` grades what they return, by the one rule (documented there).
Nothing is ever evaluated as code.

* :mod:`.grammar` -- the answer language (its grammar, documented there
  once), the tokens and the recursive-descent parser: :func:`parse_entry`;
* :mod:`.values` -- the bounded values the parser builds: exact rationals
  and surd/exp forms where cheap, a 256-bit interval for every value;
* :mod:`.entry` -- :class:`Entry`, one parsed number (and its sympy form, on request);
* :mod:`.matrix` -- a matrix's text split into rows and entries, and
  matrices a YAML reader built;
* :mod:`.grading` -- the one grading rule of ``practice`` and ``check``:
  :func:`judge` (an entry's claim, and whether the true value lies in it),
  :func:`practice_verdict` (practice's policy on coarse answers),
  :func:`claim`, :func:`equals_exactly`.

Every sentence these modules raise is a key of :mod:`tutor.base.messages`
(``answer.*``, ``matrix.*``).

>>> parse_entry("1/(1 + 2*exp(sqrt(2)))").expr
1/(1 + 2*exp(sqrt(2)))
>>> [[e.text for e in row] for row in parse_matrix("1 -1; 2 - 1, 3")]
[['1', '-1'], ['2 - 1', '3']]
"""

from .entry import Entry, Matrix
from .grading import (
    MIN_PLACES,
    ROUNDED_AWAY,
    TRUNCATED,
    Judgement,
    Verdict,
    claim,
    equals_exactly,
    judge,
    practice_verdict,
)
from .grammar import (
    MAX_DECIMAL_EXPONENT,
    MAX_DEPTH,
    MAX_DIGITS,
    MAX_ENTRY_CHARS,
    MAX_EXP_ARGUMENT,
    MAX_POWER,
    parse_entry,
)
from .matrix import (
    MAX_ENTRIES,
    MAX_MATRIX_CHARS,
    entry_counts,
    entry_from_value,
    matrix_from_value,
    matrix_texts,
    parse_matrix,
    parse_row,
    printed,
    printout_begins,
    printout_open,
    split_entries,
)
from .values import MAX_MAGNITUDE

__all__ = [
    "MAX_DECIMAL_EXPONENT",
    "MAX_DEPTH",
    "MAX_DIGITS",
    "MAX_ENTRIES",
    "MAX_ENTRY_CHARS",
    "MAX_EXP_ARGUMENT",
    "MAX_MAGNITUDE",
    "MAX_MATRIX_CHARS",
    "MAX_POWER",
    "MIN_PLACES",
    "ROUNDED_AWAY",
    "TRUNCATED",
    "Entry",
    "Judgement",
    "Matrix",
    "Verdict",
    "claim",
    "entry_counts",
    "entry_from_value",
    "equals_exactly",
    "judge",
    "matrix_from_value",
    "matrix_texts",
    "parse_entry",
    "parse_matrix",
    "parse_row",
    "practice_verdict",
    "printed",
    "printout_begins",
    "printout_open",
    "split_entries",
]

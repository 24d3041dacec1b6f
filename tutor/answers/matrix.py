"""Matrices: the text of a whole matrix or one row split into entries, and matrices a YAML reader built.

The layout is the one :mod:`.grammar` documents (rows separated by ``;`` or
line breaks, or each in brackets; entries by commas, or by whitespace that is
not next to an operator); each entry is read by
:func:`.grammar.parse_entry`.  Every error names the row and entry.

>>> [[e.text for e in row] for row in parse_matrix("1 -1; 2 - 1, 3")]
[['1', '-1'], ['2 - 1', '3']]
>>> parse_matrix("1 2; 3")
Traceback (most recent call last):
...
tutor.base.errors.AnswerError: row 2 has 1 entry, but row 1 has 2
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tutor.base import messages
from tutor.base.errors import AnswerError

from .entry import Entry, Matrix
from .grammar import MAX_DIGITS, parse_entry, refuse
from .values import MAX_SHARED_WORK, Work, budget

MAX_MATRIX_CHARS = 100_000
MAX_ENTRIES = 4_096


# --- values a YAML/JSON reader already split -------------------------------------------


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
        refuse("answer.bool", value=str(value).lower())
    if isinstance(value, int):
        if value.bit_length() > MAX_DIGITS * 10 // 3:
            refuse("answer.int_too_long", limit=MAX_DIGITS)
        return parse_entry(str(value))
    if isinstance(value, float):
        return parse_entry(repr(value))
    if isinstance(value, str):
        return parse_entry(str(value))
    refuse("answer.bad_value", found=_describe(value))


def _describe(value: object) -> str:
    """What a loaded value is, as an error names it: the catalogue's ``found.*`` words, else its type's name."""
    if value is None:
        return messages.t("found.null")
    if isinstance(value, (list, tuple)):
        return messages.t("found.list")
    if isinstance(value, dict):
        return messages.t("found.mapping")
    return type(value).__name__


def _check_shape(rows: Sequence[Sequence[Entry]]) -> None:
    if not rows:
        refuse("matrix.no_rows")
    for r, row in enumerate(rows, start=1):
        if not row:
            refuse("matrix.empty_row", row=r)
    for r, row in enumerate(rows[1:], start=2):
        if len(row) != len(rows[0]):
            refuse("matrix.ragged", row=r, found=len(row), expected=len(rows[0]))


def matrix_from_value(value: object) -> Matrix:
    """A matrix from a loaded YAML/JSON list of lists (see :func:`entry_from_value`).

    >>> [[e.text for e in row] for row in matrix_from_value([[1, "1/2"], [0.25, "-inf"]])]
    [['1', '1/2'], ['0.25', '-inf']]
    """
    if not isinstance(value, (list, tuple)):
        refuse("matrix.not_list", found=_describe(value))
    if sum(len(row) for row in value if isinstance(row, (list, tuple))) > MAX_ENTRIES:  # before any entry is read
        refuse("matrix.too_many", limit=MAX_ENTRIES)
    with budget(Work(MAX_SHARED_WORK, "answer.too_costly_total")):  # all its entries together, as typed
        return _matrix_rows(value)


def _matrix_rows(value: list[Any] | tuple[Any, ...]) -> Matrix:
    rows: list[tuple[Entry, ...]] = []
    for r, row in enumerate(value, start=1):
        if not isinstance(row, (list, tuple)):
            refuse("matrix.row_not_list", row=r, found=_describe(row))
        entries = []
        for c, v in enumerate(row, start=1):
            try:
                entries.append(entry_from_value(v))
            except AnswerError as err:
                refuse("matrix.entry", row=r, entry=c, message=str(err))
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
                refuse("matrix.bracket_unmatched", column=offset + i + 1)
            depth -= 1
            if depth == 0:
                groups.append((text[start + 1 : i], offset + start + 2))
        elif depth == 0 and not (c.isspace() or c in ",;"):
            outside.append((c, offset + i + 1))
    if depth:
        refuse("matrix.bracket_unclosed", column=offset + start + 1)
    return groups, outside


def _split_rows(text: str) -> list[str]:
    """Rows separated by ``;`` or line breaks.  Blank lines and one trailing ``;`` are
    ignored; an empty row between two ``;`` (``1 1;;2 2``) is an error, not dropped."""
    pieces = _split_depth0(text, ";")
    rows: list[str] = []
    for n, piece in enumerate(pieces):
        lines = [r for r in _split_depth0(piece, "\n\r") if r.strip()]
        if not lines and n < len(pieces) - 1:
            refuse("matrix.empty_between", row=len(rows) + 1)
        rows += lines
    return rows


def _row_texts(text: str) -> list[str]:
    """Split a whole matrix's text into the texts of its rows."""
    if "[" not in text and "]" not in text:
        return _split_rows(text)
    groups, outside = _bracket_groups(text, 0)
    if outside:  # any bracket makes every row bracketed
        refuse("matrix.bracket_mixed")
    if len(groups) == 1:
        inner, col = groups[0]
        if "[" in inner:  # [[1, 2], [3, 4]]: the outer pair wraps the rows
            rows, inside = _bracket_groups(inner, col - 1)
            if inside:
                refuse("matrix.bracket_mixed")
        else:  # [1, 2] or [1 2; 3 4]
            return _split_rows(inner)
    else:  # [1, 2], [3, 4]
        rows = groups
    for inner, col in rows:
        if "[" in inner:
            refuse("matrix.bracket_deep", column=col + inner.index("["))
    return [inner for inner, _ in rows]


def _parse_rows(text: str, *, one_row: bool) -> Matrix:
    """The rows of a typed matrix; all its entries together share one work budget
    (:data:`.values.MAX_SHARED_WORK`), as each entry has its own."""
    with budget(Work(MAX_SHARED_WORK, "answer.too_costly_total")):
        return _read_rows(text, one_row=one_row)


def _split(text: str, *, one_row: bool) -> list[list[str]]:
    """The texts of the entries of each row, none of them read yet (refused: not text, too long, empty,
    brackets amiss, too many entries)."""
    if not isinstance(text, str):
        refuse("answer.not_text", found=type(text).__name__)
    if len(text) > MAX_MATRIX_CHARS:
        refuse("answer.too_long", length=len(text), limit=MAX_MATRIX_CHARS)
    if not text.strip():
        refuse("answer.empty")
    row_texts = _row_texts(text)
    if one_row and len(row_texts) != 1:
        refuse("matrix.one_row", found=len(row_texts))
    split = [split_entries(row_text) for row_text in row_texts]
    if sum(len(texts) for texts in split) > MAX_ENTRIES:  # counted before any entry is parsed: refused at once
        refuse("matrix.too_many", limit=MAX_ENTRIES)
    return split


def entry_counts(text: str, *, one_row: bool = False) -> list[int]:
    """How many entries each row of a typed matrix (or row) has, none of them read: a caller checks the
    shape it expects with these before the work of parsing (issue 20, E: a 368-entry line for a step of
    2 columns was read whole first).  Raises :class:`AnswerError` as :func:`parse_matrix` would for the
    text's layout.

    >>> entry_counts("1 -1; 2 - 1 3"), entry_counts("[1, 1/2]", one_row=True)
    ([2, 2], [2])
    """
    return [len(texts) for texts in _split(_pasted_row(text) if one_row else text, one_row=one_row)]


def _read_rows(text: str, *, one_row: bool) -> Matrix:
    split = _split(text, one_row=one_row)
    rows: list[tuple[Entry, ...]] = []
    for r, texts in enumerate(split, start=1):
        entries = []
        for c, entry_text in enumerate(texts, start=1):
            if not entry_text:
                refuse("matrix.row_empty_entry" if one_row else "matrix.empty_entry", row=r, entry=c)
            try:
                entries.append(parse_entry(entry_text))
            except AnswerError as err:
                refuse("matrix.row_entry" if one_row else "matrix.entry", row=r, entry=c, message=str(err))
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
    return _parse_rows(_pasted_row(text), one_row=True)[0]


def _pasted_row(text: str) -> str:
    """A row without the ``,`` after its closing bracket (``[1, 1],``, a line of a pasted ``[[1, 1],\\n [2, 2]]``)."""
    if isinstance(text, str):
        stripped = text.strip()
        if stripped.endswith(",") and stripped[:-1].rstrip().endswith("]"):
            return stripped[:-1]
    return text


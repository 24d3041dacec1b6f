"""Matrices: the text of a whole matrix or one row split into entries, and matrices a YAML reader built.

The layout is the one :mod:`.grammar` documents (rows separated by ``;`` or
line breaks, or each in brackets; entries by commas, or by whitespace that is
not next to an operator; or as PyTorch and NumPy print it, which :func:`printed`
brings to that layout); each entry is read by
:func:`.grammar.parse_entry`.  Every error names the row and entry.

>>> [[e.text for e in row] for row in parse_matrix("1 -1; 2 - 1, 3")]
[['1', '-1'], ['2 - 1', '3']]
>>> parse_matrix("1 2; 3")
Traceback (most recent call last):
...
tutor.base.errors.AnswerError: row 2 has 1 entry, but row 1 has 2
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, NoReturn

from tutor.base.errors import AnswerError
from tutor.base.halfwidth import halfwidth
from tutor.base.messages import Msg, Text

from .entry import Entry, Matrix
from .grammar import MAX_DIGITS, parse_entry, printable, refuse
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


def _describe(value: object) -> Text:
    """What a loaded value is, as an error names it: the catalogue's ``found.*`` words, else its type's name."""
    if value is None:
        return Msg("found.null")
    if isinstance(value, (list, tuple)):
        return Msg("found.list")
    if isinstance(value, dict):
        return Msg("found.mapping")
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


def _refuse_at(whole: str, index: int, key: str, **fields: Any) -> NoReturn:
    """Refuse with ``key`` at ``whole[index]``: its column, and its line when ``whole`` is on several lines
    (a pasted printout)."""
    start = max(whole.rfind("\n", 0, index), whole.rfind("\r", 0, index)) + 1
    if len(whole.strip().splitlines()) > 1:
        line = len(whole[:start].splitlines()) + 1 if start else 1
        refuse("matrix.on_line", line=line, message=Msg(key, column=index - start + 1, **fields))
    refuse(key, column=index + 1, **fields)


def _bracket_groups(text: str, offset: int, whole: str) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The depth-1 ``[...]`` groups of ``text`` as (inner text, column of the
    inner text's first character), and the characters other than whitespace,
    ``,`` and ``;`` found outside them.  ``text`` is ``whole[offset:]`` (up to its end):
    ``offset`` + index + 1 is a column of ``whole``."""
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
                _refuse_at(whole, offset + i, "matrix.bracket_unmatched")
            depth -= 1
            if depth == 0:
                groups.append((text[start + 1 : i], offset + start + 2))
        elif depth == 0 and not (c.isspace() or c in ",;"):
            outside.append((c, offset + i + 1))
    if depth:
        _refuse_at(whole, offset + start, "matrix.bracket_unclosed")
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
    groups, outside = _bracket_groups(text, 0, text)
    if outside:  # any bracket makes every row bracketed
        refuse("matrix.bracket_mixed")
    if len(groups) == 1:
        inner, col = groups[0]
        if "[" in inner:  # [[1, 2], [3, 4]]: the outer pair wraps the rows
            rows, inside = _bracket_groups(inner, col - 1, text)
            if inside:
                refuse("matrix.bracket_mixed")
        else:  # [1, 2] or [1 2; 3 4]
            return _split_rows(inner)
    else:  # [1, 2], [3, 4]
        rows = groups
    for inner, col in rows:
        if "[" in inner:
            _refuse_at(text, col - 1 + inner.index("["), "matrix.bracket_deep")
    return [inner for inner, _ in rows]


# --- matrices as PyTorch and NumPy print them ------------------------------------------

_CALL = re.compile(r"\s*(?P<name>tensor|array)\s*\(")
#: What may follow the numbers inside tensor(...) / array(...): keyword arguments as torch and numpy
#: print them (dtype=torch.float64, grad_fn=<SoftmaxBackward0>, requires_grad=True, device='cuda:0',
#: dtype=float32).  They are read past, never used.
_KEYWORD = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_]*\s*=\s*(?:<[A-Za-z0-9_.]+>|'[^'\n]*'|\"[^\"\n]*\"|[A-Za-z0-9_.+\-]+)\s*")
#: The most axes a pasted array is looked at for size-1 leading axes (torch prints any number);
#: deeper brackets are left to the layout's own error.
MAX_PRINTED_AXES = 8


def _blank(text: str, start: int, end: int) -> str:
    """``text`` with ``text[start:end]`` turned into spaces (line breaks kept): every column stays where it was."""
    return text[:start] + "".join(c if c in "\n\r" else " " for c in text[start:end]) + text[end:]


def printed(text: str) -> str:
    """A matrix's text as PyTorch or NumPy printed it, brought to the layout of :mod:`.grammar`; other
    text unchanged.  Every character keeps its column (what is dropped becomes spaces), so an error
    in an entry names the column of the pasted text.

    ``tensor(...)`` and ``array(...)`` are unwrapped, and the keyword arguments after the numbers
    (``dtype=torch.float64``, ``grad_fn=<SoftmaxBackward0>``, ``requires_grad=True``, ``device='cpu'``)
    dropped; an array with more than two axes is read as its one matrix when every leading axis has
    size 1 (``[[[1., 2.]]]``), and refused, with its shape, when it holds several.  A printout
    summarised with ``...`` is refused: its entries are not all there.  Nothing is evaluated: this
    only finds brackets, parentheses and commas.

    >>> printed("tensor([[0.5000, 0.2500]], dtype=torch.float64)").strip()
    '[[0.5000, 0.2500]]'
    >>> printed("[[[1. 2.]\\n  [3. 4.]]]").split()
    ['[[1.', '2.]', '[3.', '4.]]']
    """
    if (cut := text.find("...")) >= 0:
        _refuse_at(text, cut, "matrix.printed_summarized")
    return _unit_axes_dropped(_call_unwrapped(text))


def printout_open(text: str) -> bool:
    """Whether ``text`` leaves a ``(`` or ``[`` open: a printout pasted line by line goes on.

    >>> printout_open("tensor([[1., 2.],"), printout_open("tensor([[1., 2.],\\n        [3., 4.]])")
    (True, False)
    """
    depth = 0
    for c in text:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
    return depth > 0


def printout_begins(line: str) -> bool:
    """Whether ``line``, the first of an answer, begins a printout that goes on over the next lines:
    ``tensor(`` or ``array(`` with a bracket left open and a ``,`` at the end (where PyTorch and NumPy
    break the line; ``tensor([[1, 2]`` is read at once, and refused), ``[[[`` (an array of more axes,
    as ``print()`` shows it) with a bracket left open, or ``[[`` and a first row without commas that
    runs on (``print()`` wraps a row too wide for its line).  A ``[[1, 2],`` whose first row closes is
    typed row by row instead, and ``[[1, 2`` is read at once.

    >>> printout_begins("tensor([[1.8916, 1.8916],"), printout_begins("tensor([[1, 2]"), printout_begins("[[1, 2],")
    (True, False, False)
    """
    stripped = line.strip()
    if not printout_open(stripped):
        return False
    if _CALL.match(stripped):
        return stripped.endswith(",")
    return stripped.startswith("[[[") or (stripped.startswith("[[") and not any(c in stripped for c in "],"))


def _call_unwrapped(text: str) -> str:
    """``tensor(DATA, keywords...)`` or ``array(DATA, ...)`` as ``DATA``, in place."""
    m = _CALL.match(text)
    if m is None:
        return text
    name, opening = m["name"], m.end() - 1
    stack: list[int] = []  # where each "(" or "[" still open inside the call began
    data_end, close = None, None
    for i in range(m.end(), len(text)):
        c = text[i]
        if c in "([":
            stack.append(i)
        elif c in ")]":
            if not stack:
                if c == "]":
                    _refuse_at(text, i, "matrix.bracket_unmatched")
                close = i
                break
            stack.pop()
        elif c == "," and not stack and data_end is None:
            data_end = i
    if close is None:
        if stack:
            _refuse_at(text, stack[0], "matrix.bracket_unclosed")
        _refuse_at(text, opening, "matrix.printed_unclosed", name=name)
    if rest := text[close + 1 :].strip():
        after = text.index(rest[0], close + 1)
        _refuse_at(text, after, "matrix.printed_after", name=name, text=printable(rest, 20))
    if data_end is None:
        data_end = close
    start = data_end + 1
    for piece in _split_depth0(text[start:close], ",") if data_end < close else []:
        if not _KEYWORD.fullmatch(piece):
            at = start + len(piece) - len(piece.lstrip())
            _refuse_at(text, at, "matrix.printed_argument", name=name, text=printable(piece.strip(), 30))
        start += len(piece) + 1
    data = _blank(_blank(text, data_end, len(text)), 0, m.end())
    if data.count("[") <= 1:  # a 1-D array: a line break in it is where the printout wrapped its one row
        data = data.replace("\r\n", "  ").replace("\n", " ").replace("\r", " ")
    return data


def _unit_axes_dropped(text: str) -> str:
    """An array of more than two axes whose leading axes all have size 1 as its one matrix
    (``[[[1, 2], [3, 4]]]`` as ``[[1, 2], [3, 4]]``, in place); several matrices are refused."""
    depth = deepest = 0
    for c in text:
        if c == "[":
            depth += 1
            deepest = max(deepest, depth)
        elif c == "]":
            depth -= 1
            if depth < 0:
                return text  # unmatched: the layout's own error names it
    if depth or not 3 <= deepest <= MAX_PRINTED_AXES:
        return text
    groups, outside = _bracket_groups(text, 0, text)  # balanced: never refused here
    shape = _axes(groups[0][0]) if len(groups) == 1 and not outside else None
    if shape is None or len(shape) <= 2:
        return text  # not one regular array: the layout's own error names what is amiss
    if any(n != 1 for n in shape[:-2]):
        count = math.prod(shape[:-2])
        refuse("matrix.printed_batch", shape=", ".join(map(str, shape)), count=count,
               rows=shape[-2], cols=shape[-1])
    for _ in shape[:-2]:  # drop the outermost pair of brackets, once per leading axis
        first, last = text.index("["), text.rindex("]")
        text = _blank(_blank(text, last, last + 1), first, first + 1)
    return text


def _axes(inner: str) -> tuple[int, ...] | None:
    """The shape of the array whose text inside its outer brackets is ``inner``, or ``None`` when its
    parts differ in shape (or it mixes brackets and bare entries)."""
    if "[" not in inner:
        return (len(split_entries(inner)) if inner.strip() else 0,)
    groups, outside = _bracket_groups(inner, 0, inner)
    if outside:
        return None
    shapes = {_axes(part) for part, _ in groups}
    if len(shapes) != 1 or None in shapes:
        return None
    (shape,) = shapes
    assert shape is not None
    return (len(groups), *shape)


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
    text = printed(halfwidth(text))  # a Chinese input method's ；，【】 and ideographic space, as ASCII
    if not text.strip():  # tensor([]) or array([])
        refuse("matrix.no_rows")
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


def matrix_texts(text: str) -> list[list[str]]:
    """The texts of the entries of each row of a matrix written as text (typed, or pasted as PyTorch or
    NumPy printed it), none of them read: for a reader that reads each entry itself (a solution file's
    step given as text, where ``nan`` is an entry).  Raises :class:`AnswerError` as :func:`parse_matrix`
    would for the text's layout.

    >>> matrix_texts("tensor([[1.4142,   -inf],\\n        [   nan, 2.8284]])")
    [['1.4142', '-inf'], ['nan', '2.8284']]
    """
    return _split(text, one_row=False)


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


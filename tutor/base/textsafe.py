"""Text from a file or a store, made safe to show: the one escaping rule.

A title, a token label, a file name or a stored row may hold characters a
terminal acts on instead of showing: C0 and C1 control characters (ESC starts
the sequences that set a window's title, clear the screen or print a link;
U+009B is a one-character CSI), DEL, the Unicode format characters (the bidi
overrides and isolates such as U+202E that reorder what follows, zero-width
characters, the soft hyphen), line and paragraph separators, and lone
surrogates (undecodable bytes of a file name).  :func:`shown` writes each of
them as a Python-style escape (``\\x1b``, ``\\u202e``; an undecodable byte of
a file name as ``\\xff``), so it is seen and never acted on; every other
character, ASCII or not, is left as it is.  The result never holds such a
character, so applying it twice changes nothing.

:func:`shown_stream` is the same rule for what is written to a terminal
stream, letting through only the colour sequences (SGR) a renderer emits.
:func:`spreadsheet_cell` is the rule for a CSV cell a spreadsheet opens (a
gradebook, a roster index), :func:`spreadsheet_text` reads such a cell back.

Pure: no I/O, usable from every layer.
"""

from __future__ import annotations

import re
import unicodedata

#: Unicode categories that are escaped: controls, format characters, surrogates,
#: line and paragraph separators.  (Private-use and unassigned code points are shown.)
UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e]")
_SGR = re.compile(r"(\x1b\[[0-9;:]*m)")  # Select Graphic Rendition: colour and weight, nothing else


def escape_char(ch: str) -> str:
    """``ch`` as a visible escape: ``\\x1b``, ``\\u202e``, ``\\U000e0041``; a surrogate-escaped byte as ``\\xff``."""
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not valid UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def is_unsafe(ch: str) -> bool:
    """True when a terminal may act on ``ch`` (or hide it) rather than show it."""
    return unicodedata.category(ch) in UNSAFE_CATEGORIES


def shown(text: str, keep: str = "") -> str:
    """``text`` with every unsafe character escaped; the characters in ``keep`` (``"\\n"``, ``"\\t"``) are left.

    >>> shown("a\\x1b]0;title\\x07b\\u202ec")
    'a\\\\x1b]0;title\\\\x07b\\\\u202ec'
    >>> shown("line 1\\nline 2", keep="\\n")
    'line 1\\nline 2'
    """
    if text.isprintable():  # the common case: nothing to do (isprintable is False for \n and \t)
        return text

    def one(m: re.Match[str]) -> str:
        ch = m.group()
        return ch if ch in keep or not is_unsafe(ch) else escape_char(ch)

    return _NOT_PRINTABLE_ASCII.sub(one, text)


def lines(text: str) -> list[str]:
    """``text`` split at its newlines (``\\n``) only, for text that may hold a file's or a user's characters.

    ``str.splitlines`` also breaks at U+2028 LINE SEPARATOR, U+2029 PARAGRAPH SEPARATOR, U+0085 NEXT
    LINE, the vertical tab, the form feed and U+001C..U+001E: a message quoting such text would be cut
    there, the character acted on instead of shown escaped by :func:`shown`.

    A final newline ends the last line, as for ``splitlines`` (``"a\\n"`` is one line); ``""`` is one empty line.

    >>> lines("no\\u2028such\\nid\\n")
    ['no\\u2028such', 'id']
    """
    parts = text.split("\n")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def shown_stream(text: str) -> str:
    """:func:`shown` for text on its way to a terminal: newlines, tabs and SGR colour sequences pass.

    The last line of defence on standard output and standard error: whatever a
    renderer forgot to escape, only colour can get through, never a title,
    a screen clear or a link.
    """
    if text.isprintable():
        return text
    if "\x1b" not in text:
        return shown(text, keep="\n\t")
    parts = _SGR.split(text)  # odd indices are SGR sequences
    return "".join(p if i % 2 else shown(p, keep="\n\t") for i, p in enumerate(parts))


#: The first characters OWASP's "CSV Injection" page lists as starting a formula in a spreadsheet.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(text: str) -> str:
    """``text`` safe in a CSV cell a spreadsheet opens: shown (:func:`shown`), and behind a ``'`` when a
    spreadsheet would run it as a formula (:data:`FORMULA_START` first, after any spaces), as OWASP advises.

    >>> spreadsheet_cell("=HYPERLINK(1)"), spreadsheet_cell(" -1"), spreadsheet_cell("Ana")
    ("'=HYPERLINK(1)", "' -1", 'Ana')
    """
    text = shown(text)
    return "'" + text if text.lstrip(" ").startswith(FORMULA_START) else text


def spreadsheet_text(cell: str) -> str:
    """A cell :func:`spreadsheet_cell` wrote, read back: the ``'`` it put before a formula dropped.

    >>> spreadsheet_text("'=HYPERLINK(1)"), spreadsheet_text("'quoted")
    ('=HYPERLINK(1)', "'quoted")
    """
    return cell[1:] if cell[:1] == "'" and cell[1:].lstrip(" ").startswith(FORMULA_START) else cell

"""Chinese text in a layout made for English: where a line may break, and joining lines.

Chinese is written without spaces between words: a line may break between
any two characters, except before closing punctuation (``，。）``) or after
opening punctuation (``（“``), the rules of 标点符号用法 (GB/T 15834) that
every browser applies (CSS Text 3, ``line-break``).  rich breaks lines only
at spaces, so a Chinese sentence is one long "word" that it moves whole to
the next line: :data:`WORD` makes each Chinese character a word of its own
(with the punctuation that clings to it), and is rich's own pattern for text
without Chinese (:func:`tutor.render.console.make_console`
installs it).  Joining the lines of a paragraph (Markdown, a YAML ``>``
block) puts no space between two Chinese characters (CSS Text 4's
line-break transformation): :func:`join_lines`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

#: Characters of scripts written without spaces: CJK ideographs (and extensions), kana, CJK symbols
#: and punctuation, full-width forms (code point ranges, first and last).
UNSPACED_RANGES = ((0x2E80, 0x2FDF), (0x3000, 0x30FF), (0x3100, 0x312F), (0x31A0, 0x31FF), (0x3400, 0x4DBF),
                   (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0xFE30, 0xFE4F), (0xFF00, 0xFFEF), (0x20000, 0x3FFFF))
UNSPACED = "".join(f"{chr(a)}-{chr(b)}" for a, b in UNSPACED_RANGES)
#: Punctuation that never begins a line.
CLOSING = "、。，．：；！？）」』】》〉”’\uff09\uff0c\uff1a\uff1b\uff01\uff1f\uff0e…"
#: Punctuation that never ends a line.
OPENING = "（「『【《〈“‘\uff08"
_PUNCTUATION = set(OPENING + CLOSING)
_FIRST = min(a for a, _ in UNSPACED_RANGES)


def unspaced(ch: str) -> bool:
    """True for a character of a script written without spaces (:data:`UNSPACED_RANGES`)."""
    code = ord(ch)
    return code >= _FIRST and any(a <= code <= b for a, b in UNSPACED_RANGES)


@cache
def _word_pattern() -> re.Pattern[str]:
    """:data:`WORD`'s pattern for text with Chinese in it, compiled when first needed (its character classes
    take some 20 ms to compile: a run of English text never pays it)."""
    return re.compile(
        rf"\s*(?:[{OPENING}]*(?![{OPENING}{CLOSING}])[{UNSPACED}][{CLOSING}]*|[{OPENING}]*[^\s{UNSPACED}]+[{CLOSING}]*|\S)\s*")


_RICH_WORD = re.compile(r"\s*\S+\s*")


class _Words:
    """One "word" of a line that may be broken between words (what rich's ``re_word.match`` gives): optional
    spaces, then an unspaced-script character with the opening punctuation before it and the closing after
    it, or a run of other characters (with the punctuation that clings to it), then spaces.  Text without
    Chinese is matched by rich's own pattern, ``\\s*\\S+\\s*``, as it always was."""

    def __init__(self) -> None:
        self._text: str | None = None
        self._pattern = _RICH_WORD

    def match(self, text: str, pos: int = 0) -> re.Match[str] | None:
        if text is not self._text:  # rich asks for each word of one text in turn: look at the text once
            self._text = text
            self._pattern = _word_pattern() if has_unspaced(text) else _RICH_WORD
        return self._pattern.match(text, pos)


def has_unspaced(text: str) -> bool:
    """True when ``text`` has a character of a script written without spaces (Chinese)."""
    return any(unspaced(ch) for ch in text if ord(ch) >= _FIRST)


def pieces(text: str) -> list[str]:
    """The pieces of ``text`` no line may break, without their spaces: words, and each Chinese character with
    the punctuation that clings to it.

    >>> pieces("未设置时，若 LC_ALL、LC_MESSAGES")
    ['未', '设', '置', '时，', '若', 'LC_ALL、', 'LC_MESSAGES']
    """
    return [w.strip() for w in _word_pattern().findall(text) if w.strip()]


#: The word pattern rich breaks lines with (:func:`tutor.render.console.line_breaks` installs it).
WORD = _Words()


def join_lines(parts: Iterable[str]) -> str:
    """The stripped ``parts`` joined into one line: by a space, except between two characters of an
    unspaced script (Chinese) and beside Chinese punctuation (which never has a space beside it).

    >>> join_lines(["softmax 的输入", "是注意力分数", "and then"]), join_lines(["Q、K、", "V"])
    ('softmax 的输入是注意力分数 and then', 'Q、K、V')
    """
    out = ""
    for part in (p.strip() for p in parts):
        if not part:
            continue
        if out and not (unspaced(out[-1]) and unspaced(part[0]) or out[-1] in _PUNCTUATION or part[0] in _PUNCTUATION):
            out += " "
        out += part
    return out

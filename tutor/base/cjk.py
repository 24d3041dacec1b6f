"""Chinese text in a layout made for English: where a line may break, and joining lines.

Chinese is written without spaces between words: a line may break between
any two characters, except before closing punctuation (``，。）``) or after
opening punctuation (``（“``), the rules of 标点符号用法 (GB/T 15834) that
every browser applies (CSS Text 3, ``line-break``).  rich breaks lines only
at spaces, so a Chinese sentence is one long "word" that it moves whole to
the next line: :data:`WORD` is a word pattern that makes each Chinese
character a word of its own (with the punctuation that clings to it), and is
the same as rich's own for text without Chinese (:func:`tutor.render.console.make_console`
installs it).  Joining the lines of a paragraph (Markdown, a YAML ``>``
block) puts no space between two Chinese characters (CSS Text 4's
line-break transformation): :func:`join_lines`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: Characters of scripts written without spaces: CJK ideographs (and extensions), kana, CJK symbols
#: and punctuation, full-width forms.
UNSPACED = "\u2e80-\u2fdf\u3000-\u30ff\u3100-\u312f\u31a0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff"
#: Punctuation that never begins a line.
CLOSING = "、。，．：；！？）」』】》〉”’\uff09\uff0c\uff1a\uff1b\uff01\uff1f\uff0e…"
#: Punctuation that never ends a line.
OPENING = "（「『【《〈“‘\uff08"

#: One "word" of a line that may be broken between words: optional spaces, then an unspaced-script
#: character with the opening punctuation before it and the closing after it, or a run of other
#: characters (with the punctuation that clings to it), then spaces.  Without Chinese in the text it
#: matches what ``\s*\S+\s*`` (rich's word) matches.
WORD = re.compile(
    rf"\s*(?:[{OPENING}]*(?![{OPENING}{CLOSING}])[{UNSPACED}][{CLOSING}]*|[{OPENING}]*[^\s{UNSPACED}]+[{CLOSING}]*|\S)\s*"
)

_UNSPACED_CHAR = re.compile(rf"[{UNSPACED}]")
_PUNCTUATION = set(OPENING + CLOSING)


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
        if out and not (_UNSPACED_CHAR.match(out[-1]) and _UNSPACED_CHAR.match(part[0])
                        or out[-1] in _PUNCTUATION or part[0] in _PUNCTUATION):
            out += " "
        out += part
    return out

"""Read a user-written YAML file into plain values, remembering where each came from.

PyYAML implements YAML 1.1, whose implicit typing surprises people (``yes``
is a boolean, ``010`` is eight, ``1:20`` is eighty).  The contract follows
YAML 1.2's core schema, so this module only *composes* the document with
PyYAML's safe loader (no construction, no Python objects, no code) and
types every plain scalar itself by the YAML 1.2 core rules:

* ``null``/``~``/empty -> ``None``; ``true``/``false`` (three spellings) -> ``bool``;
* anything YAML 1.2 reads as a number -> :class:`YNum` (a ``str`` holding the
  text, so an entry is read exactly from what was written);
* everything else, and every quoted scalar -> ``str``.

It also catches what PyYAML lets through silently: duplicate keys, merge keys,
aliases that expand past a size limit (refused before the document is walked),
recursive aliases, nesting deeper than any exercise needs, and explicit tags;
and it warns about plain integers with a leading zero (``010`` is ten here,
eight to YAML 1.1 tools).  Each problem is a :class:`tutor.base.errors.Problem`
with a 1-based line and column.
"""

from __future__ import annotations

import decimal
import os
import re
import stat
import unicodedata
from dataclasses import dataclass, field
from typing import Any, ClassVar

import yaml

from ..base.cjk import unspaced
from ..base.errors import Problem
from ..base.messages import Text, t
from ..base.outfile import file_kind, os_reason

Path = tuple[str | int, ...]

MAX_FILE_BYTES = 1_000_000
MAX_VALUES = 100_000  # scalars and collections after alias expansion
MAX_DEPTH = 12  # the deepest value of an exercise is heads[i].w_q[r][c]: 5 levels
MAX_SHOWN = 40  # a value quoted in a message is cut to this many characters
MAX_NUMBER_TEXT = 100  # no YAML 1.1 warning is worked out for a plain number longer than this (it is an error anyway)


class YNum(str):
    """A plain scalar that YAML 1.2's core schema reads as a number; holds its text."""

    __slots__ = ()


_NULL = {"", "~", "null", "Null", "NULL"}
_TRUE = {"true", "True", "TRUE"}
_FALSE = {"false", "False", "FALSE"}
# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution)
_NUMBER = re.compile(
    r"[-+]?[0-9]+"
    r"|0o[0-7]+|0x[0-9a-fA-F]+"
    r"|[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"
    r"|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)"
)
_LEADING_ZERO = re.compile(r"[-+]?0[0-9]+")
_EXPONENT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)[eE](?P<exp>[-+]?[0-9]+)")
_YAML11_FLOAT = re.compile(r"[-+]?([0-9][0-9_]*)?\.[0-9_]*[eE][-+][0-9]+")  # PyYAML needs a dot and a signed exponent
_STR_TAG = "tag:yaml.org,2002:str"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MAP_TAG = "tag:yaml.org,2002:map"


class _ComposeOnly(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe loader (libyaml's when present) that leaves every plain scalar untyped (tag ``str``)."""

    yaml_implicit_resolvers: ClassVar[dict] = {}
    _DEFAULT_TAGS: ClassVar[dict] = {yaml.ScalarNode: _STR_TAG, yaml.SequenceNode: _SEQ_TAG, yaml.MappingNode: _MAP_TAG}

    def resolve(self, kind: type, value: object, implicit: object) -> str:
        """An untagged node's tag: the default of its kind (typing happens in :func:`plain_value`)."""
        return self._DEFAULT_TAGS[kind]


def plain_value(text: str) -> Any:
    """Type one plain scalar by YAML 1.2's core schema."""
    if text in _NULL:
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if _NUMBER.fullmatch(text):
        return YNum(text)
    return text


@dataclass
class Document:
    """A parsed YAML document: plain values plus the position of every node.

    ``marks[path]`` is the (line, column) of the value at ``path``;
    ``key_marks[path]`` that of the mapping key that introduced it.
    ``poisoned`` holds the paths whose value a reported problem replaced
    (by ``None``), so later passes do not report them a second time;
    ``merged`` the mappings that had a merge key (their missing fields may
    have been meant to come from it).  ``warnings`` are not errors: the file
    still loads.
    """

    filename: str
    value: Any = None
    marks: dict[Path, tuple[int, int] | yaml.Node] = field(default_factory=dict)  # a node: its start mark, read lazily
    key_marks: dict[Path, tuple[int, int]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    poisoned: set[Path] = field(default_factory=set)
    merged: set[Path] = field(default_factory=set)

    def where(self, path: Path, *, key: bool = False) -> tuple[int | None, int | None]:
        """Position of ``path`` (its key's if ``key``), else of its nearest ancestor."""
        if key and path in self.key_marks:
            return self.key_marks[path]
        p = path
        while True:
            if p in self.marks:
                m = self.marks[p]
                return _mark(m) if isinstance(m, yaml.Node) else m
            if not p:
                return (None, None)
            p = p[:-1]

    def problem(self, path: Path, message: Text, hint: Text = "", *, key: bool = False) -> Problem:
        line, col = self.where(path, key=key)
        return Problem(self.filename, line, col, format_path(path), message, hint)


def format_path(path: Path) -> str:
    """``("heads", 0, "w_q", 2, 1)`` -> ``heads[0].w_q[2][1]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            if codepoints(part):  # an invisible or look-alike character in a key: shown as an escape
                part = ascii(part)[1:-1]
            out += f".{part}" if out else part
    return out


class _TooBig(Exception):
    pass


def _tag(tag: str) -> str:
    return "!!" + tag[len("tag:yaml.org,2002:"):] if tag.startswith("tag:yaml.org,2002:") else tag


def _mark(node: yaml.Node) -> tuple[int, int]:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


def _describe_node(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return t("found.mapping")
    if isinstance(node, yaml.SequenceNode):
        return t("found.list") if node.value else t("found.empty_list")
    return describe(node.value)


# Letters that look like ASCII ones (Cyrillic, Greek) and dashes that look like '-':
# what a key or value was probably meant to say.
_LOOK_ALIKE = str.maketrans({
    **dict(zip("\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0455\u0456\u0458\u04bb\u0501\u051b\u051d\u043a",
               "aeopcyxsijhdqwk")),  # Cyrillic а е о р с у х ѕ і ј һ ԁ ԛ ԝ к
    **dict(zip("\u0410\u0412\u0415\u0405\u0406\u0408\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425",
               "ABESIJKMHOPCTX")),  # Cyrillic А В Е Ѕ І Ј К М Н О Р С Т Х
    **dict(zip("\u03b9\u03ba\u03bd\u03bf\u03c1\u03c5\u03c7", "ikvopux")),  # Greek ι κ ν ο ρ υ χ
    **dict(zip("\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7",
               "ABEZHIKMNOPTYX")),  # Greek Α Β Ε Ζ Η Ι Κ Μ Ν Ο Ρ Τ Υ Χ
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2212", "-"),  # hyphens, en dash, minus sign
})


def codepoint(ch: str) -> str:
    """``U+200B ZERO WIDTH SPACE``: a character by its code point and Unicode name (control characters: the number alone)."""
    code = f"U+{ord(ch):04X}"
    if unicodedata.category(ch) == "Cc" and not unicodedata.name(ch, ""):
        return t("char.control.named", code=code)
    name = unicodedata.name(ch, "")
    return f"{code} {name}" if name else code  # the Unicode name: notation, in English in every language


def shown(text: str) -> str:
    """``text`` quoted, every non-ASCII or control character as an escape: ``'x\\u200b'``; long text cut."""
    if len(text) > MAX_SHOWN:
        text = text[: MAX_SHOWN - 3] + "..."
    return ascii(text)


def codepoints(text: str, limit: int = 3) -> str:
    """The non-ASCII and control characters of ``text`` named: ``U+200B ZERO WIDTH SPACE (invisible)``,
    ``U+0445 CYRILLIC SMALL LETTER HA (looks like 'x')``, ...; ``""`` if there are none."""
    found = list(dict.fromkeys(ch for ch in text if not (" " <= ch <= "~")))
    names = []
    for ch in found[:limit]:
        looks = ascii_look_alike(ch)
        if not looks:
            names.append(t("char.invisible", char=codepoint(ch)))
        elif looks != ch and looks.isascii():
            names.append(t("char.looks_like", char=codepoint(ch), ascii=looks))
        else:
            names.append(codepoint(ch))
    if len(found) > limit:
        names.append("...")
    return ", ".join(names)


def _suspect(ch: str) -> bool:
    """True for a character worth naming in a message: outside printable ASCII, and not Chinese written as
    Chinese (an ideograph is shown as it is; a full-width letter, which looks like ASCII, is named)."""
    return not (" " <= ch <= "~") and not (unspaced(ch) and ascii_look_alike(ch) == ch)


def ascii_look_alike(text: str) -> str:
    """What ``text`` looks like: invisible characters dropped, look-alike and full-width letters as ASCII.

    ``'x\\u200b'`` -> ``'x'``; Cyrillic ``'\\u0445'`` -> ``'x'``; ``'\\u2212 1'`` -> ``'- 1'``.
    """
    text = unicodedata.normalize("NFKC", text).translate(_LOOK_ALIKE)
    return "".join(ch for ch in text if unicodedata.category(ch) not in ("Cf", "Cc", "Mn", "Zs") or ch == " ")


def _cut(text: str) -> tuple[str, int | None]:
    """``text`` cut to :data:`MAX_SHOWN` characters, and its length when it was cut."""
    return (text, None) if len(text) <= MAX_SHOWN else (text[: MAX_SHOWN - 3], len(text))


def describe(value: Any) -> str:
    """How a found value is named in messages: ``the text 'yes'``, ``a list``...

    Long values are cut (with their length); text with characters outside
    printable ASCII is shown with escapes and the characters named by code
    point, so an invisible or look-alike character explains the error.
    """
    if value is None:
        return t("found.null")
    if isinstance(value, bool):
        return t("found.bool", value=str(value).lower())
    if isinstance(value, (YNum, int, float)):
        text, length = _cut(str(value))
        return t("found.number", value=text) if length is None else t("found.number.cut", value=text, length=length)
    if isinstance(value, str):
        names = codepoints(value) if any(_suspect(ch) for ch in value) else ""
        if names:
            return t("found.text.codepoints", value=shown(value), names=names)
        return t("found.text", value=value if len(value) <= MAX_SHOWN else value[: MAX_SHOWN - 3] + "...")
    if isinstance(value, (list, tuple)):
        return t("found.list") if value else t("found.empty_list")  # "expected a row, found a list" read as a contradiction
    if isinstance(value, dict):
        return t("found.mapping")
    return t("found.text", value=str(value))


def _alias_keys(text: str) -> dict[tuple[int, int, int], tuple[int, int]]:
    """Where each alias used as a mapping key is written: ``(line, column, pair) -> (line, column)``.

    The composer gives an alias the node of its anchor (and the anchor's
    position), so the alias's own position is read from the parser's events:
    a mapping is known by the (0-based) line and column where it starts, a
    key by its pair's index.
    """
    out: dict[tuple[int, int, int], tuple[int, int]] = {}
    stack: list[list[Any]] = []  # per open collection: [mapping start (line, col) or None for a list, children so far]
    for event in yaml.parse(text, Loader=_ComposeOnly):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            mark = event.start_mark
            stack.append([(mark.line, mark.column) if isinstance(event, yaml.MappingStartEvent) else None, 0])
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            stack.pop()
            if stack:
                stack[-1][1] += 1
        elif isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)) and stack:
            start, seen = stack[-1]
            if isinstance(event, yaml.AliasEvent) and start is not None and seen % 2 == 0:
                out[(*start, seen // 2)] = (event.start_mark.line + 1, event.start_mark.column + 1)
            stack[-1][1] += 1
    return out


def _alias_values(text: str) -> dict[Path, tuple[int, int]]:
    """Where each alias used as a value is written, by the path of that value: ``path -> (line, column)``.

    As for :func:`_alias_keys`, the composer gives an alias its anchor's node (and position); the alias's
    own position is read from the parser's events, following the path as the walker builds it (a
    mapping's values by their plain keys, a list's items by their index).
    """
    out: dict[Path, tuple[int, int]] = {}
    stack: list[list[Any]] = []  # per open collection: [its path, is a mapping, children so far, the last key]

    def here() -> Path | None:  # the path of the node an event starts, None for a mapping's key
        if not stack:
            return ()
        path, mapping, seen, key = stack[-1]
        if not mapping:
            return (*path, seen)
        return None if seen % 2 == 0 or key is None else (*path, key)

    for event in yaml.parse(text, Loader=_ComposeOnly):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            at = here()
            stack.append([at if at is not None else ("?",), isinstance(event, yaml.MappingStartEvent), 0, None])
            continue
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            stack.pop()
        elif isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)) and stack:
            path, mapping, seen, _ = stack[-1]
            if mapping and seen % 2 == 0:  # a key: the next value's name (an alias or a tagged key: none)
                stack[-1][3] = event.value if isinstance(event, yaml.ScalarEvent) else None
            elif isinstance(event, yaml.AliasEvent) and (at := here()) is not None:
                out[at] = (event.start_mark.line + 1, event.start_mark.column + 1)
        else:
            continue
        if stack:
            stack[-1][2] += 1
    return out


class _Walker:
    def __init__(self, doc: Document, text: str = ""):
        self.doc = doc
        self.text = text
        self.count = 0
        self.active: set[int] = set()
        self.keys_seen: set[int] = set()  # key nodes met so far: meeting one again means an alias
        self.values_seen: set[int] = set()  # scalar value nodes met so far (an alias key may repeat one)
        self._alias_keys: dict[tuple[int, int, int], tuple[int, int]] | None = None
        self._alias_values: dict[Path, tuple[int, int]] | None = None
        self.walked: set[int] = set()  # every node walked: meeting one again means an alias
        self.aliased = 0  # how deep the walk is inside an alias's value: its parts have no place of their own

    def key_mark(self, mapping: yaml.MappingNode, pair: int, key_node: yaml.Node, alias: bool) -> tuple[int, int]:
        """Where a key is written: its node's position, or for an alias the alias's own position."""
        if alias and self.text:
            if self._alias_keys is None:
                try:
                    self._alias_keys = _alias_keys(self.text)
                except yaml.YAMLError:  # pragma: no cover - the text was composed already
                    self._alias_keys = {}
            found = self._alias_keys.get((mapping.start_mark.line, mapping.start_mark.column, pair))
            if found is not None:
                return found
        return _mark(key_node)

    def alias_mark(self, path: Path) -> tuple[int, int] | None:
        """Where the alias that gives ``path`` its value is written (``None`` when not found)."""
        if not self.text:
            return None
        if self._alias_values is None:
            try:
                self._alias_values = _alias_values(self.text)
            except yaml.YAMLError:  # pragma: no cover - the text was composed already
                self._alias_values = {}
        return self._alias_values.get(path)

    def poison(self, path: Path, message: str, hint: str = "") -> None:
        self.doc.problems.append(self.doc.problem(path, message, hint))
        self.doc.poisoned.add(path)

    def yaml11_reading(self, text: str, path: Path) -> None:
        """Warn when a YAML 1.1 tool would read this plain number differently (``010``, ``1e3``).

        No text is converted to a number here unless it is short: a longer one
        is an error where numbers are read (and Python refuses to convert
        integers of more than 4,300 digits).
        """
        if len(text) > MAX_NUMBER_TEXT:
            return
        if _LEADING_ZERO.fullmatch(text):
            sign = text[0] if text[0] in "+-" else ""
            number = sign.replace("+", "") + (text.lstrip("+-").lstrip("0") or "0")
            self.doc.warnings.append(self.doc.problem(
                path, t("yaml.leading_zero", text=text, value=number), t("yaml.leading_zero.hint", value=number)))
        elif (m := _EXPONENT.fullmatch(text)) and not _YAML11_FLOAT.fullmatch(text) and abs(int(m["exp"])) <= 20:
            number = format(decimal.Decimal(text), "f")
            number = number.rstrip("0").rstrip(".") if "." in number else number
            self.doc.warnings.append(self.doc.problem(
                path, t("yaml.exponent", text=text, value=number), t("yaml.exponent.hint", value=number)))

    def walk(self, node: yaml.Node, path: Path) -> Any:
        self.count += 1
        if self.count > MAX_VALUES:  # a file without aliases written with that many values
            raise _TooBig(path)
        alias = id(node) in self.walked
        self.walked.add(id(node))
        if alias and not self.aliased:  # a problem in an alias's value is reported where the alias is written
            self.doc.marks[path] = self.alias_mark(path) or self.doc.marks.get(path) or node
        elif not self.aliased:
            self.doc.marks.setdefault(path, node)  # the mark is computed only if a problem needs it
        if isinstance(node, yaml.ScalarNode):
            self.values_seen.add(id(node))
        if id(node) in self.active:
            self.poison(path, t("yaml.recursive_alias"), t("yaml.recursive_alias.hint"))
            return None
        if isinstance(node, yaml.ScalarNode):
            if node.tag != _STR_TAG:
                self.poison(path, t("yaml.tag", tag=_tag(node.tag)), t("yaml.tag.hint"))
                return None
            if node.style:  # quoted or block scalar: text  (plain: None (Python) or "" (libyaml))
                return node.value
            self.yaml11_reading(node.value, path)
            return plain_value(node.value)
        if len(path) >= MAX_DEPTH:
            self.poison(path, t("yaml.too_deep", limit=MAX_DEPTH), t("yaml.too_deep.hint"))
            return None
        self.active.add(id(node))
        self.aliased += alias
        try:
            if isinstance(node, yaml.SequenceNode):
                if node.tag != _SEQ_TAG:
                    self.poison(path, t("yaml.tag", tag=_tag(node.tag)), t("yaml.tag.hint"))
                return [self.walk(child, path + (i,)) for i, child in enumerate(node.value)]
            if node.tag != _MAP_TAG:
                self.poison(path, t("yaml.tag", tag=_tag(node.tag)), t("yaml.tag.hint"))
            return self._mapping(node, path)
        finally:
            self.active.discard(id(node))
            self.aliased -= alias

    def _mapping(self, node: yaml.MappingNode, path: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for pair, (key_node, value_node) in enumerate(node.value):
            alias = id(key_node) in self.keys_seen or id(key_node) in self.values_seen
            self.keys_seen.add(id(key_node))
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != _STR_TAG:
                line, col = _mark(key_node)
                self.doc.problems.append(
                    Problem(self.doc.filename, line, col, format_path(path),
                            t("yaml.key_type", found=_describe_node(key_node)), t("yaml.key_type.hint"))
                )
                continue
            key = key_node.value
            child = path + (key,)
            if not self.aliased:  # inside an alias's value, a key's place is the alias's
                self.doc.key_marks.setdefault(child, _mark(key_node))
            if key == "<<" and not key_node.style:
                self.doc.merged.add(path)
                line, col = _mark(key_node)
                self.doc.problems.append(
                    Problem(self.doc.filename, line, col, format_path(path) or "<<",
                            t("yaml.merge_key"), t("yaml.merge_key.hint"))
                )
                continue
            if key in first_line:
                line, col = self.key_mark(node, pair, key_node, alias)
                self.doc.problems.append(
                    Problem(self.doc.filename, line, col, format_path(child),
                            t("yaml.duplicate_key", key=key, first=first_line[key]),
                            t("yaml.duplicate_key.hint"))
                )
                continue
            first_line[key] = self.key_mark(node, pair, key_node, alias)[0]
            out[key] = self.walk(value_node, child)
        return out


def _tab_lines(text: str) -> list[tuple[int, int]]:
    """``(line, column)`` of the first tab in each line's indentation (1-based)."""
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in indent:
            out.append((n, indent.index("\t") + 1))
    return out


def _reader_problem(filename: str, err: yaml.reader.ReaderError, text: str) -> Problem:
    """A character YAML does not allow (NUL, another control character), at its line and column.

    libyaml gives the position as a byte offset into the UTF-8 text, PyYAML's
    reader as a character index: either way it is checked against the
    character named in the error, else the first occurrence of it is used.
    """
    ch = chr(err.character) if isinstance(err.character, int) else str(err.character)
    index = -1
    if isinstance(err.position, int):
        candidates = [err.position]
        if err.encoding != "unicode":  # libyaml: a byte offset
            candidates.insert(0, len(text.encode("utf-8")[: err.position].decode("utf-8", "ignore")))
        index = next((i for i in candidates if 0 <= i < len(text) and text[i] == ch), -1)
    if index < 0:
        index = text.find(ch)
    line = col = None
    if index >= 0:
        line = text.count("\n", 0, index) + 1
        col = index - (text.rfind("\n", 0, index) + 1) + 1
    return Problem(filename, line, col, "", t("yaml.bad_character", char=codepoint(ch)), t("yaml.bad_character.hint"))


def _syntax_problems(filename: str, err: yaml.YAMLError, text: str) -> list[Problem]:
    """The parser's error; a tab is reported at every line indented with one, not only the first."""
    if isinstance(err, yaml.reader.ReaderError):
        return [_reader_problem(filename, err, text)]
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    line = mark.line + 1 if mark is not None else None
    col = mark.column + 1 if mark is not None else None
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    at_tab = mark is not None and 0 <= mark.index < len(text) and text[mark.index] == "\t"
    if at_tab or "'\\t'" in problem or "\t" in problem:
        tabs: list[tuple[int | None, int | None]] = list(_tab_lines(text))
        if line is not None and all(n != line for n, _ in tabs):
            tabs = sorted([*tabs, (line, col or 1)], key=lambda nc: (nc[0] or 0, nc[1] or 0))
        return [Problem(filename, n, c, "", t("yaml.tab"), t("yaml.tab.hint")) for n, c in tabs or [(line, col)]]
    return [Problem(filename, line, col, "", t("yaml.syntax", problem=parser_problem(problem, getattr(err, "context", None))),
                    t("yaml.syntax.hint"))]


#: The YAML parser's problems, as libyaml and PyYAML word them (the parser's English whatever the language of
#: the run), each with the key that says it (``yaml.problem.<kind>``); context (``while parsing a block
#: collection``) tells PyYAML's one ``expected <block end>`` apart.
PARSER_PROBLEMS = (
    (r"did not find expected ',' or '\]'|expected ',' or '\]', but got .*", None, "flow_sequence"),
    (r"did not find expected ',' or '\}'|expected ',' or '\}', but got .*", None, "flow_mapping"),
    (r"did not find expected '-' indicator", None, "dash"),
    (r"expected <block end>, but found .*", r"while parsing a block collection", "dash"),
    (r"did not find expected key|expected <block end>, but found .*", None, "key"),
    (r"mapping values are not allowed (?:here|in this context)", None, "mapping_values"),
    (r"block sequence entries are not allowed (?:here|in this context)", None, "block_sequence"),
    (r"could not find expected ':'", None, "colon"),
    (r"found character .*that cannot start any token", None, "token"),
    (r"found unexpected end of stream", None, "end"),
    (r"did not find expected node content|expected the node content, but found .*", None, "content"),
    (r"found unknown escape character.*", None, "escape"),
    (r"found undefined alias.*", None, "alias"),
    (r"(?:did not find )?expected alphabetic or numeric character.*", None, "anchor"),
    (r"but found another document|found unexpected document (?:indicator|separator)", None, "documents"),
)


def parser_problem(problem: str, context: str | None = None) -> str:
    """The YAML parser's ``problem`` (and its ``context``) in the language of the run: a kind of
    :data:`PARSER_PROBLEMS` by its key, any other the parser's words quoted as a detail (``yaml.problem.unlisted``)."""
    for pattern, within, kind in PARSER_PROBLEMS:
        if re.fullmatch(pattern, problem) and (within is None or re.fullmatch(within, context or "")):
            return t(f"yaml.problem.{kind}")
    return t("yaml.problem.unlisted", detail=problem)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [v for _, v in node.value]
    return []


def _expanded_size(root: yaml.Node) -> dict[int, int]:
    """How many values each node expands to with its aliases followed (capped just past the limit).

    Linear in the number of *distinct* nodes, so an alias bomb is measured at
    once, without expanding it.  Iterative (no recursion limit); a recursive
    alias counts as one value (the walker reports it).
    """
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            sizes[key] = min(MAX_VALUES + 1, 1 + sum(sizes.get(id(c), 1) for c in _children(node)))
            continue
        if key in sizes or key in open_:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 1
            continue
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes and id(c) not in open_)
    return sizes


def _too_big(doc: Document, root: yaml.Node, sizes: dict[int, int]) -> Problem:
    """The alias-expansion problem, at the top-level key where the count passes the limit (a file
    with that many values written out, aliases or not, is said to be that large)."""
    if len(sizes) > MAX_VALUES:  # the distinct values alone pass the limit: the aliases are not the cause
        hint, message = "", t("yaml.too_many_values", limit=MAX_VALUES)
    else:
        hint, message = t("yaml.alias_expansion.fix"), t("yaml.alias_expansion", limit=MAX_VALUES)
    if isinstance(root, yaml.MappingNode):
        total = 1
        for key_node, value_node in root.value:
            total += sizes.get(id(value_node), 1)
            if total > MAX_VALUES:
                line, col = _mark(key_node)
                name = key_node.value if isinstance(key_node, yaml.ScalarNode) else ""
                return Problem(doc.filename, line, col, name, message, hint)
    line, col = _mark(root)
    return Problem(doc.filename, line, col, "", message, hint)


def parse_yaml(text: str, filename: str) -> Document:
    """Compose ``text`` safely and type it by YAML 1.2; problems are collected, not raised."""
    doc = Document(filename)
    try:
        node = yaml.compose(text, Loader=_ComposeOnly)
    except yaml.YAMLError as err:
        doc.problems.extend(_syntax_problems(filename, err, text))
        return doc
    except RecursionError:  # the pure-Python composer recurses once per nesting level
        doc.problems.append(Problem(filename, None, None, "", t("yaml.too_deep", limit=MAX_DEPTH), t("yaml.too_deep.hint")))
        return doc
    if node is None:
        doc.problems.append(Problem(filename, 1, 1, "", t("yaml.empty"), t("yaml.empty.hint")))
        return doc
    if "*" in text:  # only an alias can make the document larger than its text
        sizes = _expanded_size(node)
        if sizes[id(node)] > MAX_VALUES:
            doc.problems.append(_too_big(doc, node, sizes))
            return doc
    try:
        doc.value = _Walker(doc, text).walk(node, ())
    except _TooBig as too_big:  # without an alias (else _expanded_size said it): a file written that large
        doc.problems = [doc.problem(too_big.args[0], t("yaml.too_many_values", limit=MAX_VALUES))]
        doc.value = None
    return doc


def _position(data: bytes, offset: int) -> tuple[int, int]:
    """1-based ``(line, column)`` of byte ``offset`` of UTF-8 ``data``; the column counts characters."""
    start = data.rfind(b"\n", 0, offset) + 1
    before = data[start:offset]
    if start == 0 and before.startswith(b"\xef\xbb\xbf"):  # a byte-order mark is not a column
        before = before[3:]
    return data.count(b"\n", 0, offset) + 1, len(before.decode("utf-8", "replace")) + 1


def read_text(path: str, display: str | None = None) -> tuple[str | None, list[Problem]]:
    """The UTF-8 text of ``path``, or problems (unreadable, not a regular file, too large, not UTF-8).

    Never blocks: the file is opened without waiting (``O_NONBLOCK``: a FIFO
    with no writer does not hang the open) and read only when ``fstat`` says
    it is a regular file, so a FIFO, a device or a directory is a problem,
    not a hang.  A file too large or not UTF-8 is reported at the line and
    column where it breaks the rule.
    """
    name = display or str(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        return None, [Problem(name, None, None, "", t("file.unreadable", reason=os_reason(err)))]
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, [Problem(name, None, None, "", t("file.not_regular", kind=file_kind(info.st_mode)))]
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        return None, [Problem(name, None, None, "", t("file.unreadable", reason=os_reason(err)))]
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        size = max(info.st_size, len(data))
        line, col = _position(data, MAX_FILE_BYTES)
        return None, [Problem(name, line, col, "", t("file.too_large.at", size=f"{size:,}", limit=f"{MAX_FILE_BYTES:,}"),
                              t("file.too_large.hint"))]
    bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        return data[bom:].decode("utf-8"), []
    except UnicodeDecodeError as err:
        line, col = _position(data, bom + err.start)
        return None, [Problem(name, line, col, "", t("file.not_utf8.at", byte=f"0x{data[bom + err.start]:02X}"),
                              t("file.not_utf8.hint"))]

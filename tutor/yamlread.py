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
eight to YAML 1.1 tools).  Each problem is a :class:`tutor.errors.Problem`
with a 1-based line and column.
"""

from __future__ import annotations

import decimal
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import yaml

from .errors import Problem
from .messages import t

Path = tuple[str | int, ...]

MAX_FILE_BYTES = 1_000_000
MAX_VALUES = 100_000  # scalars and collections after alias expansion
MAX_DEPTH = 12  # the deepest value of an exercise is heads[i].w_q[r][c]: 5 levels


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

    def problem(self, path: Path, message: str, hint: str = "", *, key: bool = False) -> Problem:
        line, col = self.where(path, key=key)
        return Problem(self.filename, line, col, format_path(path), message, hint)


def format_path(path: Path) -> str:
    """``("heads", 0, "w_q", 2, 1)`` -> ``heads[0].w_q[2][1]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
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
        return t("found.list")
    return describe(node.value)


def describe(value: Any) -> str:
    """How a found value is named in messages: ``the text 'yes'``, ``a list``..."""
    if value is None:
        return t("found.null")
    if isinstance(value, bool):
        return t("found.bool", value=str(value).lower())
    if isinstance(value, (YNum, int, float)):
        return t("found.number", value=str(value))
    if isinstance(value, str):
        return t("found.text", value=value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, (list, tuple)):
        return t("found.list")
    if isinstance(value, dict):
        return t("found.mapping")
    return t("found.text", value=str(value))


class _Walker:
    def __init__(self, doc: Document):
        self.doc = doc
        self.count = 0
        self.active: set[int] = set()

    def poison(self, path: Path, message: str, hint: str = "") -> None:
        self.doc.problems.append(self.doc.problem(path, message, hint))
        self.doc.poisoned.add(path)

    def yaml11_reading(self, text: str, path: Path) -> None:
        """Warn when a YAML 1.1 tool would read this plain number differently (``010``, ``1e3``)."""
        if _LEADING_ZERO.fullmatch(text):
            number = str(int(text))
            self.doc.warnings.append(self.doc.problem(
                path, t("yaml.leading_zero", text=text, value=number), t("yaml.leading_zero.hint", value=number)))
        elif (m := _EXPONENT.fullmatch(text)) and not _YAML11_FLOAT.fullmatch(text) and abs(int(m["exp"])) <= 20:
            number = format(decimal.Decimal(text), "f")
            number = number.rstrip("0").rstrip(".") if "." in number else number
            self.doc.warnings.append(self.doc.problem(
                path, t("yaml.exponent", text=text, value=number), t("yaml.exponent.hint", value=number)))

    def walk(self, node: yaml.Node, path: Path) -> Any:
        self.count += 1
        if self.count > MAX_VALUES:  # not reached after _expanded_size; kept as a guard
            raise _TooBig(path)
        self.doc.marks.setdefault(path, node)  # the mark is computed only if a problem needs it
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

    def _mapping(self, node: yaml.MappingNode, path: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != _STR_TAG:
                line, col = _mark(key_node)
                self.doc.problems.append(
                    Problem(self.doc.filename, line, col, format_path(path),
                            t("yaml.key_type", found=_describe_node(key_node)), t("yaml.key_type.hint"))
                )
                continue
            key = key_node.value
            child = path + (key,)
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
                line, col = _mark(key_node)
                self.doc.problems.append(
                    Problem(self.doc.filename, line, col, format_path(child),
                            t("yaml.duplicate_key", key=key, first=first_line[key]),
                            t("yaml.duplicate_key.hint"))
                )
                continue
            first_line[key] = _mark(key_node)[0]
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


def _syntax_problems(filename: str, err: yaml.YAMLError, text: str) -> list[Problem]:
    """The parser's error; a tab is reported at every line indented with one, not only the first."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    line = mark.line + 1 if mark is not None else None
    col = mark.column + 1 if mark is not None else None
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    at_tab = mark is not None and 0 <= mark.index < len(text) and text[mark.index] == "\t"
    if at_tab or "'\\t'" in problem or "\t" in problem:
        tabs = _tab_lines(text)
        if line is not None and all(n != line for n, _ in tabs):
            tabs = sorted(tabs + [(line, col or 1)])
        return [Problem(filename, n, c, "", t("yaml.tab"), t("yaml.tab.hint")) for n, c in tabs or [(line, col)]]
    return [Problem(filename, line, col, "", t("yaml.syntax", problem=problem), t("yaml.syntax.hint"))]


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
    """The alias-expansion problem, at the top-level key where the count passes the limit."""
    hint = t("yaml.alias_expansion.fix")
    message = t("yaml.alias_expansion", limit=MAX_VALUES)
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
        doc.value = _Walker(doc).walk(node, ())
    except _TooBig as too_big:
        doc.problems = [doc.problem(too_big.args[0], t("yaml.alias_expansion", limit=MAX_VALUES),
                                    t("yaml.alias_expansion.hint"))]
        doc.value = None
    return doc


def read_text(path: str, display: str | None = None) -> tuple[str | None, list[Problem]]:
    """The UTF-8 text of ``path``, or problems (unreadable, too large, not UTF-8)."""
    name = display or str(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        return None, [Problem(name, None, None, "", t("file.unreadable", reason=err.strerror or str(err)))]
    if len(data) > MAX_FILE_BYTES:
        return None, [Problem(name, None, None, "", t("file.too_large", size=f"over {MAX_FILE_BYTES}", limit=MAX_FILE_BYTES))]
    try:
        return data.decode("utf-8-sig"), []
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        return None, [Problem(name, line, None, "", t("file.not_utf8", offset=err.start))]

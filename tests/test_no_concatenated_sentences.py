"""No sentence is built by gluing translated pieces together in code (issue 22, item 4).

A sentence glued in code (``"✓ " + t("x")``, ``t("a") + " " + t("b")``,
``f"{t('label')}: {value}"``, ``"; ".join(t(...) for ...)``) fixes English
word order and punctuation: Chinese puts the parts in another order and uses
full-width ``：；，（）``.  Every sentence is one template of the catalogue,
with ``{fields}`` (``"check.verdict.ok.marked": "✓ correct: …"``); a list is
joined by a separator key (``t("list.sep")``, ``join_and``,
``join_sentences``).  Whitespace around a translated line (an indent, the
space after a prompt, a newline between lines) is layout, not wording, and
is allowed.

The test reads the source with ``ast`` (nothing is imported) and flags, in
every module of ``tutor/``:

- a chain of ``+`` holding a call of ``t``/``plural``/``join_and``/``join_sentences``
  (or ``tx(t(...))``, ``x if c else t(...)``) and a string literal with
  anything but whitespace, or that call and other text (another translation,
  a value) with no newline between them;
- an f-string that formats such a call and has literal text around it, or
  another value beside it on the line;
- ``"<text>".join(...)`` over such calls, for a separator with text;
- ``x += t(...)`` (a translated piece appended to text); ``+=`` of a list of lines, or of ``"\\n\\n" + t(...)``
  (a paragraph after another), is not gluing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .conftest import REPO

PACKAGE = REPO / "tutor"
TRANSLATING = {"t", "plural", "join_and", "join_sentences"}

#: The places that may still glue a literal to a translated text, each with the reason, by
#: ``(module path, literal)``.  Markdown markup is syntax, not wording: a heading's ``## ``, the
#: ``**`` of bold, a list item's ``- ``, a quote's ``> `` keep their place in every language.
ALLOWED: dict[tuple[str, str], str] = {
    ("tutor/render/markdown.py", "**"): "Markdown bold around a label: markup, the same in every language",
    ("tutor/render/markdown.py", "*"): "Markdown emphasis around a sentence: markup",
    ("tutor/render/markdown.py", "## "): "a Markdown heading's marker: markup",
    ("tutor/render/markdown.py", "### "): "a Markdown sub-heading's marker (the production view's masks): markup",
    ("tutor/render/markdown.py", "- "): "a Markdown list item's marker: markup",
    ("tutor/render/markdown.py", "> "): "a Markdown quote's marker: markup",
}


def _is_translation(node: ast.AST) -> bool:
    """A call of one of :data:`TRANSLATING` (``t(...)``, ``messages.t(...)``)."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (isinstance(f, ast.Name) and f.id in TRANSLATING) or (isinstance(f, ast.Attribute) and f.attr in TRANSLATING)


def _holds_translation(node: ast.AST) -> bool:
    """``node`` is a translation, or an expression whose value is one: ``self.tx(t(...))``, ``x if c else t(...)``,
    an f-string formatting one."""
    if _is_translation(node):
        return True
    if isinstance(node, ast.Call) and node.args and not node.keywords and len(node.args) == 1:  # tx(t(...)), str(t(...))
        return _holds_translation(node.args[0])
    if isinstance(node, ast.IfExp):
        return _holds_translation(node.body) or _holds_translation(node.orelse)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _holds_translation(node.left) or _holds_translation(node.right)
    return False


def _text(literal: str) -> bool:
    """True when ``literal`` holds anything but whitespace: a letter, a digit, punctuation, a symbol (✓)."""
    return bool(re.search(r"\S", literal))


def _literals(node: ast.AST) -> list[str]:
    """The literal text of a string constant or of an f-string's constant parts; ``[]`` for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return []


def _chain(node: ast.AST) -> list[ast.AST]:
    """The operands of a chain of ``+`` (``a + b + c``), in order."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _chain(node.left) + _chain(node.right)
    return [node]


def _glued_chain(operands: list[ast.AST]) -> list[str]:
    """What is glued in one chain of ``+``: a literal with text beside a translation, or a translation next to
    other text (another translation, a value) with no newline between them (same line, same sentence)."""
    kinds = []
    for op in operands:
        literals = _literals(op) if isinstance(op, (ast.Constant, ast.JoinedStr)) and not _holds_translation(op) \
            else []
        if _holds_translation(op):
            kinds.append(("T", ""))
        elif isinstance(op, ast.Constant) and isinstance(op.value, str):
            text = op.value
            kinds.append(("L" if _text(text) else "N" if "\n" in text else "W", text))
        elif literals and any("\n" in x for x in literals):
            kinds.append(("N", "".join(literals)))
        else:
            kinds.append(("O", ""))
    if not any(k == "T" for k, _ in kinds):
        return []
    found = [text for k, text in kinds if k == "L"]
    pieces = [k for k, _ in kinds if k != "W"]  # whitespace alone keeps two pieces on one line
    if any(a in "TO" and b in "TO" and "T" in (a, b) for a, b in zip(pieces, pieces[1:])):
        found.append(" ")
    return found


def glued(tree: ast.AST) -> list[tuple[int, str, str]]:
    """``(line, what, literal)`` for every place in ``tree`` that glues literal text to a translation."""
    found: list[tuple[int, str, str]] = []
    inner = {id(n.left) for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add)} | {
        id(n.right) for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add)}
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and id(node) not in inner:
            found += [(node.lineno, "+", s) for s in _glued_chain(_chain(node))]
        elif isinstance(node, ast.JoinedStr):
            values = [v for v in node.values if isinstance(v, ast.FormattedValue)]
            if any(_holds_translation(v.value) for v in values):
                texts = [s for s in _literals(node) if _text(s)]
                found += [(node.lineno, "f-string", s) for s in texts]
                if not texts and len(values) > 1 and not any("\n" in s for s in _literals(node)):
                    found.append((node.lineno, "f-string", " "))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join":
            sep = node.func.value
            if isinstance(sep, ast.Constant) and isinstance(sep.value, str) and _text(sep.value) \
                    and any(_holds_translation(n) for arg in node.args for n in ast.walk(arg)):
                found.append((node.lineno, "join", sep.value))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and (
                _is_translation(node.value) or isinstance(node.value, ast.IfExp) and _holds_translation(node.value)):
            found.append((node.lineno, "+=", ""))  # a translated piece appended to text (a list's += is not flagged)
    return sorted(found)


def _module(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_no_sentence_is_glued_from_translated_pieces():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module(path)
        for line, what, literal in glued(ast.parse(path.read_text(encoding="utf-8"))):
            if (module, literal) not in ALLOWED:
                bad.append(f"{module}:{line}: {what} {literal!r}")
    assert bad == [], "a sentence glued in code; make it one template of the catalogue:\n" + "\n".join(bad)


def test_every_allowed_place_is_still_there():
    """An allowance the code no longer needs is dropped (the list says what is glued, and only that)."""
    used = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        used |= {(_module(path), literal) for _, _, literal in glued(ast.parse(path.read_text(encoding="utf-8")))}
    assert set(ALLOWED) <= used


def test_the_patterns_are_found():
    """The test sees each way of gluing (so that a pass means something)."""
    source = '''
def f(x, ok):
    a = "✓ " + t("check.correct")
    b = t("a") + " " + t("b")
    c = f"{t('label')}: {x}"
    d = "; ".join(t("k", n=n) for n in x)
    e = self.tx(t("k")) + ")"
    g = x + (" " + plural("k", 2) if ok else "")
    text = t("k")
    text += t("more")
    fine = t("k") + "\\n"
    fine2 = "  " + t("k")
    fine3 = "\\n".join(t(k) for k in x)
    fine4 = t("list.sep").join(x)
    out += [t("k"), "x"]
'''
    found = glued(ast.parse(source))
    assert [(line - 2, what) for line, what, _ in found] == [
        (1, "+"), (2, "+"), (3, "f-string"), (4, "join"), (5, "+"), (6, "+"), (8, "+=")]

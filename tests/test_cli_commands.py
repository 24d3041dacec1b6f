"""Meta-tests of the command line (sqlite-utils' ``test_docs.py`` idea): every command is registered on the app,
listed by ``--help`` in order with its help, documented in the README; and no import in ``tutor/`` runs in a
circle (``tutor.cli`` and its command modules once imported each other, and a command was lost that way)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import typer

from tutor.cli import COMMANDS, app
from tutor.messages import t

from .conftest import REPO

NAMES = [name for name, _, _ in COMMANDS]


def test_every_command_is_registered_in_the_order_of_help():
    assert [(c.name, c.callback) for c in app.registered_commands] == [(n, f) for n, f, _ in COMMANDS]
    assert list(typer.main.get_command(app).commands) == NAMES  # type: ignore[attr-defined]
    assert len(set(NAMES)) == len(NAMES) == 8


def _flat(text: str) -> str:
    """Help text without rich's box characters and line breaks."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_help_lists_every_command_with_its_help_in_order(cli):
    result = cli("--help")
    assert result.code == 0, result.err
    listed = re.findall(r"^│ ([a-z]+) {2,}", result.out, re.M)
    assert listed == NAMES
    flat = _flat(result.out)
    for name, _, help_key in COMMANDS:
        assert f"{name} {t(help_key)}" in flat


@pytest.mark.parametrize(("name", "help_key"), [(n, k) for n, _, k in COMMANDS])
def test_every_command_has_its_own_help(cli, name, help_key):
    result = cli(name, "--help")
    assert result.code == 0, result.err
    assert result.out.lstrip().startswith("Usage: attn-tutor " + name)
    assert t(help_key) in _flat(result.out)


def test_every_command_is_documented_in_the_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    documented = {m for block in blocks for m in re.findall(r"^attn-tutor ([a-z]+)", block, re.M)}
    assert documented == set(NAMES)  # a command in the README but not registered, or registered but undocumented


# --- no import cycle ---------------------------------------------------------------------------------


def _module(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Which module of the package at ``root`` imports which, at import time or inside a function.

    Imports under ``if TYPE_CHECKING:`` run only for the type checker and are
    left out; importing a submodule is an edge to it, not to its package.
    """
    modules = {_module(p, root): p for p in root.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        typing_only = {id(n) for node in ast.walk(tree)
                       if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                       for sub in node.body for n in ast.walk(sub)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    edges[name] |= {sub} if sub in modules else {target} if target in modules else set()
            elif isinstance(node, ast.Import):
                edges[name] |= {a.name for a in node.names if a.name in modules}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(component) > 1 or v in edges[v]:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_graph_finds_a_cycle(tmp_path):
    """The checker itself: the old layout (commands importing ``app`` back from the package) is a cycle."""
    cli = tmp_path / "pkg" / "cli"
    cli.mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (cli / "__init__.py").write_text("app = object()\nfrom . import explain\n")
    (cli / "explain.py").write_text("from . import app\nfrom .common import x\n")
    (cli / "common.py").write_text("x = 1\nif TYPE_CHECKING:\n    from . import explain\n")
    assert cycles(import_graph(tmp_path / "pkg")) == [["pkg.cli", "pkg.cli.explain"]]


def test_no_import_cycle_in_the_package():
    edges = import_graph(REPO / "tutor")
    assert "tutor.cli.common" in edges["tutor.cli.explain"] and "tutor.cli.explain" in edges["tutor.cli"]
    assert cycles(edges) == []


def test_command_modules_import_nothing_from_the_cli_package():
    edges = import_graph(REPO / "tutor")
    for module in ("explain", "practice", "check", "author", "common", "streams"):
        assert "tutor.cli" not in edges[f"tutor.cli.{module}"], module

"""The shape of the package (issue 9): no import cycle, engines that load no loader, one answered-step record.

The import graph is read from the source with ``ast`` (nothing is imported
to build it): an edge for every import a module runs when it is imported --
at its top level, in a top-level ``try``/``if`` -- and none for an import
inside a function (run later, on use) or under ``if TYPE_CHECKING:`` (never
run).  Importing ``a.b.c`` runs the packages ``a.b`` and ``a`` first, so it
is an edge to them as well, except to the packages the importer is itself
inside (they are already being imported when it runs).
"""

from __future__ import annotations

import ast
import doctest
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from .conftest import REPO

PACKAGE = REPO / "tutor"


def _name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_at_import(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """The import statements of ``body`` that run when the module is imported."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                found += _run_at_import(node.body)
            found += _run_at_import(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                found += _run_at_import(block)
    return found


def _ancestors(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _targets(name: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules of the package one import statement of module ``name`` names (a submodule when a
    ``from`` import names one, else the module it imports from)."""
    if isinstance(node, ast.Import):
        named = [a.name for a in node.names]
    else:
        base = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
        for _ in range(max(node.level - 1, 0)):
            base = base.rpartition(".")[0]
        module = (base + ("." + node.module if node.module else "")) if node.level else (node.module or "")
        named = [f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES else module for a in node.names]
    out = []
    for target in named:
        while target and target not in MODULES:  # tutor.x.Name -> tutor.x; numpy -> ""
            target = target.rpartition(".")[0]
        if target and target != name:
            out.append(target)
    return out


def import_graph() -> dict[str, set[str]]:
    """``{module: the modules of the package importing it runs}``, for every module of ``tutor``."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        edges: set[str] = set()
        for node in _run_at_import(ast.parse(path.read_text(encoding="utf-8")).body):
            for target in _targets(name, node):
                edges.add(target)
                edges |= {a for a in _ancestors(target) if a not in _ancestors(name) and a != name}
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (each one holds a cycle), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm; the graph is a few dozen modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_graph_sees_the_imports_it_must():
    """The graph is built right: edges it must have, and none from imports inside functions or for type checking."""
    graph = import_graph()
    assert "tutor.exercise.record" in graph["tutor.steps.records"]  # from ..exercise.record import Exercise
    assert {"tutor.exercise", "tutor.exercise.record"} <= graph["tutor.exact.engine"]  # the package runs first
    assert "tutor.answers.values" in graph["tutor.answers.grammar"]  # from . import values as V
    assert "tutor.answers" not in graph["tutor.answers.grammar"]  # its own package: already being imported
    assert "tutor.mistakes.diagnose" not in graph["tutor.practice.machine"]  # imported inside _grade only
    assert "tutor.mistakes.diagnose" not in graph["tutor.practice.effects"]  # under TYPE_CHECKING only


def test_no_import_cycle_inside_the_package():
    assert cycles(import_graph()) == []


def test_a_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_record_and_the_engines_load_no_schema_nor_yaml():
    """The exercise record sits in the loader's package, but importing it (as every engine does)
    loads neither pydantic nor the YAML reader; the loader's names still import from the package."""
    code = (
        "import sys\n"
        "import tutor.exercise.record, tutor.steps, tutor.exact.engine, tutor.numeric, tutor.practice, tutor.answers\n"
        "print(sorted(m for m in ('pydantic', 'yaml', 'tutor.exercise.load', 'tutor.exercise.yamlread') if m in sys.modules))\n"
        "from tutor.exercise import LIMITS, validate_text\n"
        "print(sorted(m for m in ('pydantic', 'yaml') if m in sys.modules), LIMITS['heads'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.splitlines() == ["[]", "['pydantic', 'yaml'] 8"]


def test_an_unknown_name_of_the_exercise_package_is_an_attribute_error():
    import tutor.exercise

    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        tutor.exercise.nothing  # noqa: B018
    assert {"Exercise", "validate_file", "LIMITS"} <= set(dir(tutor.exercise))
    assert set(tutor.exercise.__all__) <= set(dir(tutor.exercise))


# --- one record of an answered step, for the drill and the store ----------------------------------------


def _imports_anywhere(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (functions included), as written (relative: with its dots)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
    return names


def test_the_drill_and_the_store_share_one_record_and_do_not_import_each_other():
    import tutor.practice
    import tutor.store
    import tutor.store.attempt

    assert tutor.store.Attempt is tutor.practice.Attempt is tutor.store.attempt.Attempt
    assert _imports_anywhere(PACKAGE / "store" / "attempt.py") <= {"__future__", "dataclasses", "typing"}
    for path in (PACKAGE / "store").glob("*.py"):
        assert not {n for n in _imports_anywhere(path) if "practice" in n}, path
    for name in ("machine", "effects", "events", "grading"):
        path = PACKAGE / "practice" / f"{name}.py"
        assert not {n for n in _imports_anywhere(path) if "store" in n and "store.attempt" not in n}, path


def test_an_answer_is_the_record_the_store_keeps(tmp_path):
    """The drill's Attempt effect is written and read back by the store unchanged (stamped with its time)."""
    from tutor.exercise.catalog import resolve
    from tutor.practice import Answer, Command, handle, start
    from tutor.steps import solve
    from tutor.store import Recorder, Store
    from tutor.store.attempt import Attempt

    state, _ = start(solve(resolve("single-head-3x4")), steps=["q", "k"])
    state, first = handle(state, Answer("1 1; 2 2; 2 3"))  # q, one entry wrong
    state, second = handle(state, Command("skip"))
    attempts = [e for e in first + second if isinstance(e, Attempt)]
    assert [(a.exercise, a.step, a.head, a.outcome, a.attempt, a.answer) for a in attempts] == [
        ("single-head-3x4", "q", 0, "wrong", 1, "1 1; 2 2; 2 3"), ("single-head-3x4", "q", 0, "skipped", 2, None)]
    with Store.open(tmp_path / "p.sqlite3") as store:
        recorder = Recorder(store, store.begin_session("single-head-3x4", mode="matrix", tolerance=None))
        for a in attempts:
            assert recorder.add(a)
        back = store.attempts()
    assert all(b.at for b in back)
    assert [replace(b, at=None) for b in back] == attempts


# --- the message catalogue's own examples -----------------------------------------------------------------


def test_message_catalogue_doctests():
    import tutor.base.messages

    result = doctest.testmod(tutor.base.messages)
    assert result.failed == 0 and result.attempted >= 2


def test_no_message_key_is_given_twice():
    """A key written twice in tutor/base/messages.py (in one dict or across ``EN.update`` blocks) silently keeps
    the last sentence: two sentences meant for different places, one of them shown in the wrong one."""
    tree = ast.parse((REPO / "tutor" / "base" / "messages.py").read_text(encoding="utf-8"))
    first: dict[str, int] = {}
    twice = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    if key.value in first:
                        twice.append((key.value, first[key.value], key.lineno))
                    first.setdefault(key.value, key.lineno)
    assert twice == []

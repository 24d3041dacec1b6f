"""The shape of the package (issue 19): the layers, no import cycle, engines that load no loader, one answered-step record.

The import graph is read from the source with ``ast`` (nothing is imported
to build it): an edge for every import statement anywhere in a module -- at
its top level, inside a function (run later, on use) and under ``if
TYPE_CHECKING:`` (never run, but a dependency all the same).  Importing
``a.b.c`` names the packages ``a.b`` and ``a`` too, which are edges as well,
except to the packages the importer is itself inside.

The layer table is read from ``docs/architecture.md`` (its "The layers"
table), so the description and the code cannot drift: a package may import
its own modules and packages of a lower layer, never one of its own layer or
above; and every package's docstring opens with its paragraph there.
"""

from __future__ import annotations

import ast
import doctest
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from .conftest import REPO

PACKAGE = REPO / "tutor"
ARCHITECTURE = REPO / "docs" / "architecture.md"


def _name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


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
    """``{module: every module of the package it imports}``, anywhere in it (functions, TYPE_CHECKING)."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
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


def layers() -> list[set[str]]:
    """The layer table of docs/architecture.md, lowest first: each layer the set of its packages."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    table = text[text.index("## The layers"):].split("\n\n", 2)[1]
    rows = [line for line in table.splitlines() if line.startswith("|") and not set(line) <= set("|-: ")][1:]
    found = []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        found.append(set(re.findall(r"`tutor/(\w+)/`", cells[1])))
    return found[::-1]  # the table reads top-down, from the command line to the base


def _package(module: str) -> str:
    """``tutor.steps.kind`` -> ``steps``; ``""`` for the package's face and entry point (``tutor``, ``tutor.__main__``)."""
    return module.split(".")[1] if module.count(".") and (PACKAGE / module.split(".")[1]).is_dir() else ""


def test_the_graph_sees_the_imports_it_must():
    """The graph is built right: edges it must have, including imports inside functions and for type checking."""
    graph = import_graph()
    assert "tutor.exercise.record" in graph["tutor.steps.records"]  # from ..exercise.record import Exercise
    assert {"tutor.exercise", "tutor.exercise.record"} <= graph["tutor.exact.engine"]  # the package runs first
    assert "tutor.answers.values" in graph["tutor.answers.grammar"]  # from . import values as V
    assert "tutor.answers" not in graph["tutor.answers.grammar"]  # its own package: already being imported
    assert "tutor.mistakes.diagnose" in graph["tutor.practice.machine"]  # imported inside _grade
    assert "tutor.mistakes.diagnose" in graph["tutor.practice.effects"]  # under TYPE_CHECKING


def test_no_import_cycle_inside_the_package():
    assert cycles(import_graph()) == []


def test_a_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_top_holds_packages_only():
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert loose == []
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert packages == set().union(*layers()), "every package is in the layer table, and only they"


def test_every_import_goes_down_the_layers():
    """A package imports its own modules and packages of lower layers: never one of its own layer, never up."""
    rank = {pkg: n for n, layer in enumerate(layers()) for pkg in layer}
    wrong = []
    for module, targets in import_graph().items():
        src = _package(module)
        if not src:  # tutor/__init__.py, tutor/__main__.py: the version, the entry point
            continue
        for target in targets:
            dst = _package(target)
            if dst and dst != src and rank[dst] >= rank[src]:
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_a_layer_violation_is_found():
    rank = {"base": 0, "steps": 1, "cli": 2}
    assert [(a, b) for a, b in (("steps", "base"), ("base", "steps"), ("cli", "cli")) if rank[b] > rank[a]] == [
        ("base", "steps")]


def _plain(text: str) -> str:
    """Markdown or reST, as words: roles and code marks dropped, white space folded."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text)
    text = text.replace("``", "`").replace("`", "").replace("**", "")
    return " ".join(text.split())


@pytest.mark.parametrize("package", sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py")))
def test_every_package_opens_with_its_paragraph_of_the_architecture(package):
    """``docs/architecture.md`` has a section ``### tutor/<package>/`` whose first paragraph is the
    first paragraph of the package's docstring (word for word, markup aside)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    heading = f"### `tutor/{package}/`"
    assert heading in text, heading
    paragraph = text.split(heading, 1)[1].strip().split("\n\n", 1)[0]
    doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text(encoding="utf-8"))) or ""
    first = doc.split("\n\n", 1)[0]
    assert _plain(first) == _plain(paragraph)


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


def test_the_class_workflows_doctests():
    """The spreadsheet cell rule (written and read back) and the order a folder's submissions are graded in."""
    import tutor.audit.batch
    import tutor.base.textsafe

    for module, examples in ((tutor.base.textsafe, 5), (tutor.audit.batch, 1)):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted >= examples, module.__name__


@pytest.mark.parametrize("catalog", ["en", "zh"])
def test_no_message_key_is_given_twice(catalog):
    """A key written twice in a catalogue module (in one dict or across ``EN.update`` blocks) silently keeps
    the last sentence: two sentences meant for different places, one of them shown in the wrong one."""
    tree = ast.parse((REPO / "tutor" / "base" / "catalogs" / f"{catalog}.py").read_text(encoding="utf-8"))
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


# --- the docs name what exists -------------------------------------------------------------------------


def _resolves(name: str) -> bool:
    """Whether ``tutor.a.b.c`` names a module, or an attribute (a class's field included) of one."""
    import dataclasses
    import importlib

    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except ImportError:
            continue
        for attr in parts[n:]:
            fields = {f.name for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else set()
            if attr in fields:
                return True
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_dotted_name_the_docs_and_docstrings_give_exists():
    """A module, class or function named ``tutor.…`` in the package's docstrings and comments, the docs or
    the README exists: the layout moved, and so may a name; the description follows it."""
    files = [*PACKAGE.rglob("*.py"), *(REPO / "docs").glob("*.md"), REPO / "README.md", REPO / "benchmarks" / "README.md"]
    dangling = sorted({(f.name, m.group(0).rstrip(".")) for f in files
                       for m in re.finditer(r"\btutor(?:\.[A-Za-z_]\w*)+", f.read_text(encoding="utf-8"))
                       if "__main__" not in m.group(0) and not m.group(0).startswith("tutor.schema")
                       and not _resolves(m.group(0).rstrip("."))})
    assert dangling == []

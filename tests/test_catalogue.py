"""The step catalogue holds for every kind, and nothing outside it re-derives a step.

* every kind has its functions for every engine (side by side in its
  family's module), its messages, and a place in the graph;
* the walks agree: ``solve`` gives the steps of ``keys(ex)`` in order, the
  float walk reproduces the exact values, ``verify`` reads every step back;
* outside ``tutor/steps/`` at most five comparisons of a step id remain,
  each with a comment; one ``softmax`` definition in the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from tutor.base.messages import EN
from tutor.exercise.catalog import resolve
from tutor.steps import CATALOGUE, KINDS, STEP_IDS, downstream, exists, inputs, keys, solve, upstream
from tutor.steps import replay as walk

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "tutor"

BUNDLED = sorted(p.stem for p in (REPO / "exercises").glob("*.yaml"))


@pytest.mark.parametrize("kind", CATALOGUE, ids=lambda k: k.id)
def test_every_kind_has_its_functions_and_messages(kind):
    engines = (kind.build, kind.floats, kind.slack, kind.production, kind.rounding)
    assert all(callable(f) for f in engines), kind.id
    # the exact walk follows the forward pass of format v1 (a cache's and a bias's kinds, the gradients: the floats decide)
    assert (kind.exact_walk is None) == (kind.backward or kind.id in ("k_new", "v_new", "biased")), kind.id
    assert {f.__module__ for f in (*engines, *([kind.exact_walk] if kind.exact_walk else []))} <= {
        kind.build.__module__, "tutor.steps.grad"}, kind.id  # side by side in the kind's own module
    for key in (f"step.{kind.id}.title", f"step.{kind.id}.why", f"practice.hint.{kind.id}"):
        assert key in EN, key
    assert kind.scope in ("head", "layer")
    assert set(kind.checks) <= {"row_sums", "weights_range", "masked_zero", "column_range"}


def test_steps_an_exercise_may_lack_say_why_in_a_solution_file():
    for kind in CATALOGUE:
        lacking = [ex for ex in BUNDLED if not kind.exists(resolve(ex))]
        if lacking:
            assert f"solution.no_step.{kind.id}" in EN, kind.id


def test_the_order_is_the_contract_order():
    forward = ("q", "k_new", "v_new", "k", "v", "scores", "scaled", "biased", "masked", "weights", "head_output",
               "concat", "output")  # k_new, v_new, biased: format v2
    backward = ("d_output", "d_concat", "d_w_o", "d_b_o", "d_head_output", "d_weights", "d_scaled", "d_v", "d_q", "d_k",
                "d_w_q", "d_w_k", "d_w_v", "d_b_q", "d_b_k", "d_b_v", "d_x", "d_x_kv")  # the contract's v2 section
    assert STEP_IDS == forward + backward


@pytest.mark.parametrize("name", BUNDLED)
def test_solve_gives_the_steps_of_keys_in_order_and_the_graph_is_closed(name):
    ex = resolve(name)
    sol = solve(ex)
    assert [s.key for s in sol.steps] == keys(ex)
    seen: set = set()
    for key in keys(ex):
        assert exists(ex, key)
        assert set(inputs(ex, key)) <= seen, key  # every input comes earlier
        seen.add(key)
    last = keys(ex)[-1]
    assert upstream(ex, last) == set(keys(ex)) - {last}  # the final step depends on every other
    assert downstream(ex, [keys(ex)[0]])[0] == keys(ex)[0]


@pytest.mark.parametrize("name", BUNDLED)
def test_with_the_backward_pass_the_graph_is_closed_and_the_walks_agree(name):
    ex = resolve(name)
    sol = solve(ex, backward=True)
    assert [s.key for s in sol.steps] == keys(ex, backward=True)
    assert keys(ex, backward=True)[:len(keys(ex))] == keys(ex)  # the forward pass first, unchanged
    seen: set = set()
    for key in keys(ex, backward=True):
        assert exists(ex, key)
        assert set(inputs(ex, key)) <= seen, key
        seen.add(key)
    values = walk(ex, backward=True).values
    assert set(values) == {s.key for s in sol.steps}
    for s in sol.steps:
        np.testing.assert_allclose(values[s.key], np.array(s.value), rtol=1e-12, atol=1e-12, err_msg=str(s.key))


@pytest.mark.parametrize("name", BUNDLED)
def test_the_float_walk_reproduces_the_exact_engine(name):
    sol = solve(resolve(name))
    values = walk(sol.exercise).values
    assert set(values) == {s.key for s in sol.steps}
    for s in sol.steps:
        np.testing.assert_allclose(values[s.key], np.array(s.value), rtol=1e-12, atol=1e-12, err_msg=str(s.key))


def test_exists_refuses_keys_the_exercise_has_not():
    ex = resolve("single-head-3x4")  # one head, no mask, no W_O
    assert exists(ex, ("q", 0)) and not exists(ex, ("q", 1)) and not exists(ex, ("q", None))
    assert not exists(ex, ("masked", 0)) and not exists(ex, ("concat", None)) and not exists(ex, ("output", None))
    assert not exists(ex, ("nonsense", 0))


# --- nothing outside the catalogue re-derives a step -------------------------------------------------


def _names_an_id(node: ast.expr) -> bool:
    """``step.id``, ``g.id``, ``id``, ``step_id``, ``sid``, ``key[0]``: an expression that holds a step id."""
    if isinstance(node, ast.Attribute):
        return node.attr == "id"
    if isinstance(node, ast.Name):
        return node.id in ("id", "step_id", "sid")
    if isinstance(node, ast.Subscript):  # key[0], src[0]
        return isinstance(node.slice, ast.Constant) and node.slice.value == 0
    return False


def _step_id_comparisons() -> list[tuple[Path, int, str]]:
    """Comparisons (``==``, ``!=``, ``in``, ``not in``) of a step id with a step-id string literal,
    outside tutor/steps/ (``step.id == "weights"``, ``id in ("q", "k")``)."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        if "steps" in path.relative_to(PACKAGE).parts:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            literals = [o.value for o in operands if isinstance(o, ast.Constant) and isinstance(o.value, str)]
            literals += [e.value for o in operands if isinstance(o, (ast.Tuple, ast.List, ast.Set))
                         for e in o.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if any(v in STEP_IDS for v in literals) and any(_names_an_id(o) for o in operands):
                found.append((path, node.lineno, lines[node.lineno - 1]))
    return found


def test_at_most_five_step_id_comparisons_outside_the_catalogue_each_with_a_comment():
    found = _step_id_comparisons()
    assert len(found) <= 5, found
    for path, line, text in found:
        assert "#" in text, f"{path}:{line}: say why this step is special here"


def test_one_softmax_in_the_package():
    defs = [(p, n.name) for p in PACKAGE.rglob("*.py") for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(n, ast.FunctionDef) and n.name == "softmax"]
    assert len(defs) == 1, defs


def test_every_kind_is_reachable_by_its_id():
    assert all(KINDS[k.id] is k for k in CATALOGUE)
    assert len(KINDS) == len(CATALOGUE)

"""The ``backward`` kata: its reference against torch.autograd, its hand cases against the exact engine, every
mistake seen by its cases, its solutions and the held-back buggy files run through the harness.

torch.autograd through the same forward pass (float64; a query with no key to attend to gets a row of
zero weights, so zero gradients) is the oracle of every case; the hand cases' values come from the exact
engine's backward pass (:func:`tutor.steps.solve` with ``backward=True``).  Every file is run once by the module's
``runs`` fixture: the solutions and the NumPy files through the harness in child processes, concurrently;
the held-back PyTorch files in this process, through the harness's own functions (importing torch again
in a child takes seconds).
"""

from __future__ import annotations

import ast
import math
from concurrent.futures import ThreadPoolExecutor
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
import torch

from tutor.katas import backward
from tutor.katas.kata import Case
from tutor.katas.run import Run, run

from .kata_proofs import decoded, run_here, same

KATA = backward.KATA
CASES = KATA.cases()
SOLUTIONS = Path(backward.__file__).with_name("files") / "backward"
BUGGY = Path(__file__).with_name("kata_files") / "backward"
BUGGY_FILES = sorted(p.stem for p in BUGGY.glob("*.py"))


@pytest.fixture(scope="module")
def runs() -> dict[str, Run]:
    files = {f"solution:{name}": SOLUTIONS / f"{name}_solution.py" for name in ("numpy", "torch")}
    files |= {stem: BUGGY / f"{stem}.py" for stem in BUGGY_FILES if not stem.endswith("_torch")}
    files["start:numpy"] = SOLUTIONS / "numpy_start.py"
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(run, path.resolve(), KATA.request(), [c.request() for c in CASES])
                   for name, path in files.items()}
        here = {stem: run_here(KATA, BUGGY / f"{stem}.py", CASES) for stem in BUGGY_FILES if stem.endswith("_torch")}
        return {name: f.result() for name, f in futures.items()} | here


# --- (a) the reference is torch.autograd's; (b) the hand cases are the exact engine's ---------------------


def autograd(case: Case) -> tuple[np.ndarray, ...]:
    """``(d_q, d_k, d_v, d_scores)`` from torch.autograd through the forward pass, in float64."""
    q, k, v = (torch.tensor(case.inputs[n], requires_grad=True) for n in ("q", "k", "v"))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores.retain_grad()
    if case.inputs["mask"] is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        allowed = torch.from_numpy(np.broadcast_to(case.inputs["mask"], scores.shape).copy())
        empty = ~allowed.any(dim=-1, keepdim=True)  # a query with no key: its row of weights is zeros
        masked = scores.masked_fill(~allowed, float("-inf")).masked_fill(empty, 0.0)
        weights = torch.softmax(masked, dim=-1).masked_fill(empty, 0.0)
    (weights @ v).backward(torch.from_numpy(case.inputs["d_out"]))
    return tuple(t.grad.numpy() for t in (q, k, v, scores))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_reference_is_autograd(case: Case) -> None:
    want = autograd(case)
    assert same(backward.reference(case.inputs, frozenset()), want, "float64")
    assert same(case.expected, want, "float64")


@pytest.mark.parametrize("case", [c for c in CASES if c.hand], ids=lambda c: c.id)
def test_hand_case_is_the_exact_backward(case: Case) -> None:
    got = backward.reference(case.inputs, frozenset())
    assert got is not None and all(np.allclose(g, e, rtol=1e-12, atol=1e-12) for g, e in zip(got, case.expected))


def test_masked_entries_have_no_gradient() -> None:
    for case in CASES:
        if case.inputs["mask"] is not None:
            d_scores = case.expected[3]
            assert (d_scores[~np.broadcast_to(case.inputs["mask"], d_scores.shape)] == 0).all(), case.id


def test_the_cases_have_what_the_issue_asks() -> None:
    sizes = [c.sizes for c in CASES]
    assert any(s["L_q"] != s["L_k"] for s in sizes)
    assert any(s["d"] != s["d_v"] for s in sizes)
    assert any(s["B"] > 1 and s["H"] >= 2 and s["d"] >= 2 for s in sizes)
    assert {c.dtype for c in CASES} == {"float32", "float64"}
    assert sum(c.hand for c in CASES) >= 2
    masks = [c.inputs["mask"] for c in CASES if c.inputs["mask"] is not None]
    assert any(m.shape[-2:] == (4, 4) and (m == np.tril(np.ones((4, 4), dtype=bool))).all() for m in masks)  # causal
    assert any(m.shape[-2] == 1 and not m.all() for m in masks)  # key padding
    assert any((~m.any(axis=-1)).any() for m in masks)  # a fully masked row
    for case in CASES:
        if case.hand:
            continue
        weights = backward.attend(case.inputs["q"], case.inputs["k"], case.inputs["v"], case.inputs["mask"])[1]
        several = (weights > 0).sum(axis=-1) >= 2  # the rows with a choice (a causal mask's first row has none)
        assert weights.max(axis=-1)[several].max() < 0.9, case.id  # far from one-hot
        assert not np.allclose(case.inputs["d_out"], 1.0)


# --- (c) every mistake is seen, and told from the others -------------------------------------------------


def _slipped(case: Case, slips: frozenset[str]) -> tuple[np.ndarray, ...] | None:
    """The reference under ``slips``; ``None`` where the learner's code would raise (shapes that do not chain)."""
    return backward.reference(case.inputs, slips)


def differ(a: tuple[np.ndarray, ...] | None, b: tuple[np.ndarray, ...] | None, dtype: str) -> bool:
    """Two results a learner could tell apart: outputs that differ, or one raising where the other does not."""
    return (a is None) != (b is None) or (a is not None and b is not None and not same(a, b, dtype))


@pytest.mark.parametrize("mistake", KATA.mistakes, ids=lambda m: "+".join(sorted(m.slips)))
def test_every_mistake_is_seen(mistake) -> None:
    assert any(differ(_slipped(c, mistake.slips), c.expected, c.dtype) for c in CASES)
    assert any(_slipped(c, mistake.slips) is not None and differ(_slipped(c, mistake.slips), c.expected, c.dtype)
               for c in CASES)  # and seen by its values, not only by raising


def test_the_mistakes_are_told_apart() -> None:
    for a, b in combinations(KATA.mistakes, 2):
        assert any(differ(_slipped(c, a.slips), _slipped(c, b.slips), c.dtype) for c in CASES), (a.slips, b.slips)


# --- (d) the reference solutions, (e) the held-back buggy files ------------------------------------------


@pytest.mark.parametrize("flavour", ["numpy", "torch"])
def test_solutions_pass(runs: dict[str, Run], flavour: str) -> None:
    result = runs[f"solution:{flavour}"]
    assert result.status == "ran" and result.flavour == flavour, (result.status, result.detail, result.stderr)
    assert [r.id for r in result.cases] == [c.id for c in CASES]
    for case, got in zip(CASES, result.cases):
        assert got.outputs is not None, got.traceback
        assert [o["dtype"] for o in got.outputs] == [case.dtype] * 4
        assert same(decoded(got.outputs), case.expected, case.dtype), case.id


def test_every_buggy_file_is_a_catalogued_mistake() -> None:
    keys = {m.key for m in KATA.mistakes}
    assert {stem.removesuffix("_torch") for stem in BUGGY_FILES} == keys
    assert sum(stem.endswith("_torch") for stem in BUGGY_FILES) >= 2


@pytest.mark.parametrize("stem", BUGGY_FILES)
def test_buggy_file_gives_its_mistakes_outputs(runs: dict[str, Run], stem: str) -> None:
    """On every case the file gets wrong (or raises on), some mistake of its key gives what it gave (or raises)."""
    result = runs[stem]
    assert result.status == "ran" and result.flavour == ("torch" if stem.endswith("_torch") else "numpy"), result
    key = stem.removesuffix("_torch")
    failing = []
    for case, got in zip(CASES, result.cases):
        outputs = None if got.outputs is None else decoded(got.outputs)
        if outputs is None or not same(outputs, case.expected, case.dtype):
            failing.append((case, outputs))
    assert any(outputs is not None for _, outputs in failing), f"{stem} passes every case it runs"
    assert any(all(not differ(outputs, _slipped(case, m.slips), case.dtype) for case, outputs in failing)
               for m in KATA.mistakes if m.key == key), [(c.id, o is None) for c, o in failing]


# --- the skeletons ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", ["numpy", "torch"])
def test_skeleton_names_the_kata_and_raises(flavour: str) -> None:
    """``KATA = "backward"``, the pinned signature, numbered TODOs, a body that raises NotImplementedError;
    the PyTorch skeleton imports torch at its top level (how the harness tells the flavour), the NumPy one not."""
    text = (SOLUTIONS / f"{flavour}_start.py").read_text()
    tree = ast.parse(text)
    assert any(isinstance(n, ast.Assign) and ast.unparse(n) == "KATA = 'backward'" for n in tree.body)
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert "Check it with:  attn-tutor code check THIS_FILE --watch" in (ast.get_docstring(tree) or "")
    assert fn.name == KATA.numpy_name and ", ".join(a.arg for a in fn.args.args) == "q, k, v, d_out, mask"
    assert ast.unparse(fn.body[-1]) == "raise NotImplementedError"
    assert "# TODO 1: " in text and "# TODO 2: " in text
    imported = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    assert ("torch" in imported) == (flavour == "torch")
    assert imported <= {"math", "numpy", "torch"}


def test_numpy_skeleton_runs_and_raises(runs: dict[str, Run]) -> None:
    result = runs["start:numpy"]
    assert result.status == "ran" and result.flavour == "numpy", result
    assert result.cases and all(c.exception == "NotImplementedError" for c in result.cases)

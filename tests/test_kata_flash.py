"""The ``flash`` kata: its reference against PyTorch, its hand cases against the exact engine, every mistake
seen by its cases, its solutions and the held-back buggy files run through the harness.

torch is the oracle of the generated cases (``scaled_dot_product_attention`` for ``out``,
``logsumexp`` of the scaled scores for ``lse``); the hand cases' values come from the exact
online softmax (:func:`tutor.flash.walk.tiled`).  Every file is run once by the module's
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
import torch.nn.functional as F

from tutor.katas import flash
from tutor.katas.kata import Case
from tutor.katas.run import Run, run

from .kata_proofs import decoded, run_here, same

KATA = flash.KATA
CASES = KATA.cases()
SOLUTIONS = Path(flash.__file__).with_name("files") / "flash"
BUGGY = Path(__file__).with_name("kata_files") / "flash"
BUGGY_FILES = sorted(p.stem for p in BUGGY.glob("*.py") if p.stem != "memory")
#: Right numbers, but the [L_q, L_k] scores formed: what the traced case's memory bound is for (the judge
#: names it ``memory``, as test_code_cli checks; it is no catalogued mistake of the numbers).
FULL_SCORES = Path(__file__).with_name("kata_files") / "flash" / "memory.py"
SMALL = [c for c in CASES if not c.trace_memory]  # what the buggy files run on (the traced case takes a second)


@pytest.fixture(scope="module")
def runs() -> dict[str, Run]:
    files = {f"solution:{name}": (SOLUTIONS / f"{name}_solution.py", CASES) for name in ("numpy", "torch")}
    files["full_scores"] = (FULL_SCORES, [c for c in CASES if c.trace_memory])
    files["start:numpy"] = (SOLUTIONS / "numpy_start.py", SMALL)
    files |= {stem: (BUGGY / f"{stem}.py", SMALL) for stem in BUGGY_FILES if not stem.endswith("_torch")}
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(run, path.resolve(), KATA.request(), [c.request() for c in cases])
                   for name, (path, cases) in files.items()}
        here = {stem: run_here(KATA, BUGGY / f"{stem}.py", SMALL) for stem in BUGGY_FILES if stem.endswith("_torch")}
        return {name: f.result() for name, f in futures.items()} | here


# --- (a) the reference is PyTorch's attention; (b) the hand cases are the exact engine's -----------------


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_reference_is_torch(case: Case) -> None:
    q, k, v = (torch.from_numpy(case.inputs[n]) for n in ("q", "k", "v"))
    out = F.scaled_dot_product_attention(q, k, v).numpy()
    lse = torch.logsumexp(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1).numpy()
    assert same(flash.reference(case.inputs, frozenset()), (out, lse), "float64")
    assert same(case.expected, (out, lse), "float64")


@pytest.mark.parametrize("case", [c for c in CASES if c.hand], ids=lambda c: c.id)
def test_hand_case_is_the_exact_walk(case: Case) -> None:
    got = flash.reference(case.inputs, frozenset())
    assert all(np.allclose(g, e, rtol=1e-12, atol=1e-12) for g, e in zip(got, case.expected))


def _blocks(case: Case) -> list[np.ndarray]:
    """Each block's max of each query row's scores: ``[n_blocks, B, H, L_q]``."""
    q, k, n = case.inputs["q"], case.inputs["k"], case.inputs["block_size"]
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    return [s[..., j:j + n].max(axis=-1) for j in range(0, k.shape[-2], n)]


def test_the_cases_have_what_the_issue_asks() -> None:
    sizes = [c.sizes for c in CASES]
    assert any(s["L_k"] % s["block_size"] for s in sizes)
    assert any(s["L_q"] != s["L_k"] for s in sizes)
    assert any(s["block_size"] == 1 for s in sizes) and any(s["block_size"] >= s["L_k"] for s in sizes)
    assert {c.dtype for c in CASES} == {"float32", "float64"}
    assert any(s["B"] > 1 and s["H"] >= 2 and s["d"] >= 2 for s in sizes)
    assert any(c.hand for c in CASES)

    def rises(case: Case) -> bool:  # a block's max above the running max: the rescale matters
        maxes = _blocks(case)
        return any(bool((b > np.maximum.reduce(maxes[:i])).any()) for i, b in enumerate(maxes) if i)

    def falls(case: Case) -> bool:  # a block's max below the running max
        maxes = _blocks(case)
        return any(bool((b < np.maximum.reduce(maxes[:i])).any()) for i, b in enumerate(maxes) if i)

    assert all(rises(c) for c in CASES if c.id in ("hand-blocks-of-1", "rising-max-float32"))
    assert all(falls(c) for c in CASES if c.id in ("hand-blocks-of-1", "falling-max"))
    rising = next(c for c in CASES if c.id == "rising-max-float32")
    maxes = _blocks(rising)
    assert all((b > np.maximum.reduce(maxes[:i])).all() for i, b in enumerate(maxes) if i)  # every block rescales


def test_the_traced_case_would_hold_a_full_matrix_many_times_over() -> None:
    (traced,) = [c for c in CASES if c.trace_memory]
    s = traced.sizes
    full = s["L_q"] * s["L_k"] * 8
    assert traced.memory_limit == full // 4
    assert s["L_q"] * s["block_size"] * 8 * 8 <= traced.memory_limit  # eight [L_q, block] temporaries fit


# --- (c) every mistake is seen, and told from the others -------------------------------------------------


def _slipped(case: Case, slips: frozenset[str]) -> tuple[np.ndarray, ...]:
    return flash.reference(case.inputs, slips)


@pytest.mark.parametrize("mistake", KATA.mistakes, ids=lambda m: "+".join(sorted(m.slips)))
def test_every_mistake_is_seen(mistake) -> None:
    assert any(not same(_slipped(c, mistake.slips), c.expected, c.dtype) for c in CASES)


def test_the_mistakes_are_told_apart() -> None:
    for a, b in combinations(KATA.mistakes, 2):
        assert any(not same(_slipped(c, a.slips), _slipped(c, b.slips), c.dtype) for c in CASES), (a.slips, b.slips)


# --- (d) the reference solutions, (e) the held-back buggy files ------------------------------------------


@pytest.mark.parametrize("flavour", ["numpy", "torch"])
def test_solutions_pass(runs: dict[str, Run], flavour: str) -> None:
    result = runs[f"solution:{flavour}"]
    assert result.status == "ran" and result.flavour == flavour, (result.status, result.detail, result.stderr)
    assert [r.id for r in result.cases] == [c.id for c in CASES]
    for case, got in zip(CASES, result.cases):
        assert got.outputs is not None, got.traceback
        assert [o["dtype"] for o in got.outputs] == [case.dtype] * 2
        assert same(decoded(got.outputs), case.expected, case.dtype), case.id
        if case.trace_memory and flavour == "numpy":
            assert got.peak is not None and case.memory_limit is not None and got.peak <= case.memory_limit


def test_forming_the_full_scores_is_measured(runs: dict[str, Run]) -> None:
    result = runs["full_scores"]
    (case,), (got,) = [c for c in CASES if c.trace_memory], result.cases
    assert got.outputs is not None and same(decoded(got.outputs), case.expected, case.dtype)
    assert got.peak is not None and case.memory_limit is not None
    assert got.peak >= case.sizes["L_q"] * case.sizes["L_k"] * 8 > case.memory_limit  # the scores, at least


def test_every_buggy_file_is_a_catalogued_mistake() -> None:
    keys = {m.key for m in KATA.mistakes}
    assert {stem.removesuffix("_torch") for stem in BUGGY_FILES} == keys
    assert sum(stem.endswith("_torch") for stem in BUGGY_FILES) >= 2


@pytest.mark.parametrize("stem", BUGGY_FILES)
def test_buggy_file_gives_its_mistakes_outputs(runs: dict[str, Run], stem: str) -> None:
    result = runs[stem]
    assert result.status == "ran" and result.flavour == ("torch" if stem.endswith("_torch") else "numpy"), result
    key = stem.removesuffix("_torch")
    failing = []
    for case, got in zip(SMALL, result.cases):
        assert got.outputs is not None, got.traceback
        outputs = decoded(got.outputs)
        if not same(outputs, case.expected, case.dtype):
            failing.append((case, outputs))
    assert failing, f"{stem} passes every case"
    assert any(all(same(outputs, _slipped(case, m.slips), case.dtype) for case, outputs in failing)
               for m in KATA.mistakes if m.key == key), [c.id for c, _ in failing]


# --- the skeletons ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", ["numpy", "torch"])
def test_skeleton_names_the_kata_and_raises(flavour: str) -> None:
    """``KATA = "flash"``, the pinned signature, numbered TODOs, a body that raises NotImplementedError;
    the PyTorch skeleton imports torch at its top level (how the harness tells the flavour), the NumPy one not."""
    text = (SOLUTIONS / f"{flavour}_start.py").read_text()
    tree = ast.parse(text)
    assert any(isinstance(n, ast.Assign) and ast.unparse(n) == "KATA = 'flash'" for n in tree.body)
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert "Check it with:  attn-tutor code check THIS_FILE --watch" in (ast.get_docstring(tree) or "")
    assert fn.name == KATA.numpy_name and ", ".join(a.arg for a in fn.args.args) == "q, k, v, block_size"
    assert ast.unparse(fn.body[-1]) == "raise NotImplementedError"
    assert "# TODO 1: " in text and "# TODO 2: " in text
    imported = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    assert ("torch" in imported) == (flavour == "torch")
    assert imported <= {"math", "numpy", "torch"}


def test_numpy_skeleton_runs_and_raises(runs: dict[str, Run]) -> None:
    result = runs["start:numpy"]
    assert result.status == "ran" and result.flavour == "numpy", result
    assert result.cases and all(c.exception == "NotImplementedError" for c in result.cases)

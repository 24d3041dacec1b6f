"""The `gqa` and `kv-cache` katas' files through the child-process runner: the reference solutions (NumPy and
PyTorch) pass every case, the start files load and raise NotImplementedError, and each held-back buggy file (the
reference solution with one realistic bug) fails some case with exactly the outputs its catalogued mistake gives
there, so that the judge can name it.
"""

from __future__ import annotations

import ast
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from tutor.katas import catalog
from tutor.katas.judge import judge
from tutor.katas.kata import Case, Kata
from tutor.katas.run import Run, run

KATA_IDS = ("gqa", "kv-cache")
F32 = {"rtol": 1e-4, "atol": 1e-5}
#: Each held-back buggy file and the mistake the judge must be able to name for it, by kata.
BUGS = {
    "gqa": {
        "kv_tile_order": "kv_tile_order",  # K/V head h % G for query head h: the numbers of np.tile
        "kv_tile_order_torch": "kv_tile_order",  # k.repeat(1, H // G, 1, 1): torch's repeat tiles
        "weights_per_kv_head": "weights_per_kv_head",
        "weights_per_kv_head_torch": "weights_per_kv_head",
        "no_scaling": "no_scaling",
        "kq_transposed": "kq_transposed",
        "softmax_columns": "softmax_columns",
        "times_k": "times_k",
        "no_mask": "no_mask",
        "mask_upper": "mask_upper",
        "mask_diagonal": "mask_diagonal",  # a -inf fill: NaN where no key is left
        "mask_inverted": "mask_inverted",  # a -1e9 fill: uniform weights where no key is left
    },
    "kv-cache": {
        "decode_top_left": "decode_top_left",
        "decode_top_left_torch": "decode_top_left",  # F.scaled_dot_product_attention(..., is_causal=True)
        "no_mask": "no_mask",
        "cache_not_appended": "cache_not_appended",
        "cache_reprojected": "cache_reprojected",
        "cache_prepended": "cache_prepended",
        "cache_kv_swapped": "cache_kv_swapped",
        "cache_returned_swapped_torch": "cache_returned_swapped",
        "no_scaling": "no_scaling",
        "heads_split_reshape": "heads_split_reshape",
        "heads_merge_reshape": "heads_merge_reshape",
        "no_out_proj": "no_out_proj",
    },
}


def _files(kata: Kata) -> Path:
    return Path(__file__).resolve().parent.parent / "tutor" / "katas" / "files" / kata.id


def _buggy(kata: Kata) -> Path:
    return Path(__file__).parent / "kata_files" / kata.id


def tolerance(case: Case) -> dict[str, float]:
    return F32 if case.dtype == "float32" else {"rtol": 1e-9, "atol": 1e-9}


def same(a: tuple[np.ndarray, ...] | None, b: tuple[np.ndarray, ...] | None, **tol: float) -> bool:
    if a is None or b is None:
        return a is b
    return len(a) == len(b) and all(
        x.shape == y.shape and np.allclose(x, y, equal_nan=True, **tol) for x, y in zip(a, b, strict=True))


def decoded(outputs: tuple[dict, ...]) -> tuple[np.ndarray, ...]:
    """The outputs as float64 arrays (a value that is no array: a NaN scalar, which matches nothing)."""
    return tuple(np.array(o["data"], dtype=np.float64).reshape(o["shape"]) if "data" in o else np.array(np.nan)
                 for o in outputs)


@cache
def _runs(kata_id: str) -> dict[str, Run]:
    """Every solution, start and buggy file of a kata, run once on every case (side by side: each its own process)."""
    kata = catalog.get(kata_id)
    paths = ({f"files/{p.stem}": p for p in _files(kata).glob("*.py") if p.stem != "torch_start"}
             | {p.stem: p for p in _buggy(kata).glob("*.py")})
    request, cases = kata.request(), [c.request() for c in kata.cases()]
    with ThreadPoolExecutor(max_workers=8) as pool:
        done = {name: pool.submit(run, path.resolve(), request, cases) for name, path in paths.items()}
        return {name: f.result() for name, f in done.items()}


# --- (d) the reference solutions run and pass; the start files run and raise ----------------------------


@pytest.mark.parametrize("kata_id", KATA_IDS)
@pytest.mark.parametrize("name,flavour", [("files/numpy_solution", "numpy"), ("files/torch_solution", "torch")])
def test_reference_solutions_pass(kata_id, name, flavour):
    kata, r = catalog.get(kata_id), _runs(kata_id)[name]
    cases = kata.cases()
    assert (r.status, r.flavour) == ("ran", flavour), (r.status, r.detail, r.stderr)
    assert [cr.id for cr in r.cases] == [c.id for c in cases]
    for case, cr in zip(cases, r.cases, strict=True):
        assert cr.outputs is not None, cr.exception
        assert [o["dtype"] for o in cr.outputs] == [case.dtype] * len(kata.outputs)
        assert same(decoded(cr.outputs), case.expected, **tolerance(case)), case.id


@pytest.mark.parametrize("kata_id", KATA_IDS)
def test_numpy_start_file_loads_and_raises_not_implemented(kata_id):
    r = _runs(kata_id)["files/numpy_start"]
    assert (r.status, r.flavour) == ("ran", "numpy")
    assert [cr.exception for cr in r.cases] == ["NotImplementedError"] * len(catalog.get(kata_id).cases())


@pytest.mark.parametrize("kata_id", KATA_IDS)
def test_torch_start_file_is_the_numpy_ones_in_torch(kata_id):
    """Read, not run (a PyTorch child spends seconds importing torch): it imports torch at its top level (what
    makes it the PyTorch flavour), and defines the function with the solutions' signature, raising
    NotImplementedError."""
    kata = catalog.get(kata_id)

    def parsed(name: str) -> ast.Module:
        return ast.parse((_files(kata) / f"{name}.py").read_text(encoding="utf-8"))

    def signature(tree: ast.Module) -> str:
        fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kata.torch_name)
        return ast.unparse(fn.args)

    start = parsed("torch_start")
    assert any(isinstance(n, ast.Import) and any(a.name == "torch" for a in n.names) for n in start.body)
    assert signature(start) == signature(parsed("torch_solution")) == signature(parsed("numpy_start"))
    fn = next(n for n in start.body if isinstance(n, ast.FunctionDef))
    assert ast.unparse(fn.body[-1]) == "raise NotImplementedError"


# --- (e) each buggy file gives what its mistake gives, where it fails -------------------------------------


@pytest.mark.parametrize("kata_id", KATA_IDS)
def test_every_mistake_has_a_buggy_file(kata_id):
    """One or two per mistake, named by it (``<key>.py``, ``<key>_torch.py``), as test_code_cli reads them."""
    kata, bugs = catalog.get(kata_id), BUGS[kata_id]
    assert {m.key for m in kata.mistakes} == set(bugs.values())
    assert {p.stem for p in _buggy(kata).glob("*.py")} == set(bugs)
    assert all(name.removesuffix("_torch") == key for name, key in bugs.items())
    assert sum(name.endswith("_torch") for name in bugs) >= 2


@pytest.mark.parametrize("kata_id,name", [(k, n) for k in KATA_IDS for n in sorted(BUGS[k])])
def test_buggy_file_is_named_by_its_mistake(kata_id, name):
    """On every case it fails, the file's outputs are its mistake's (and no other mistake's); it raises only
    where its mistake cannot run."""
    kata, r = catalog.get(kata_id), _runs(kata_id)[name]
    cases = kata.cases()
    assert (r.status, r.flavour) == ("ran", "torch" if name.endswith("_torch") else "numpy"), (r.status, r.detail)
    key = BUGS[kata_id][name]
    failed = 0
    for case, cr in zip(cases, r.cases, strict=True):
        if cr.outputs is None:  # it raised: where its mistake cannot run (no cache to attend to)
            assert any(kata.reference(case.inputs, m.slips) is None for m in kata.mistakes if m.key == key), case.id
            continue
        theirs = decoded(cr.outputs)
        if same(theirs, case.expected, **tolerance(case)):
            continue
        failed += 1
        named = {m.key for m in kata.mistakes if (m.judge(case, theirs, {}) if m.judge
                                                  else same(theirs, kata.reference(case.inputs, m.slips), **F32))}
        assert named == {key}, (case.id, named)
    assert failed, f"{name} passes every case"
    report = judge(kata, cases, r)  # and the judge names it, alone, on every case it fails (and does not raise on)
    for v in report.cases:
        if not v.passed and v.problem != "exception":
            assert {d.key for d in v.diagnoses} - {"shape"} == {key}, (v.case.id, v.diagnoses)

"""What the tests of the sdpa, masks and cross katas prove of a kata's cases, as functions.

Every catalogued mistake of a kata must change at least one case's outputs (beyond float32's
tolerance, rtol 1e-4, atol 1e-5), and two different mistakes must part on at least one case: a case
where the first changes the outputs and the second gives other outputs (or cannot run there), so that
the judge, which names every mistake whose outputs match the learner's, names the first without the
second there.  :func:`differ` is the comparison both use: a shape, a NaN or an entry apart.

And the files: :func:`solution_problems` runs a kata's reference solution in a child process (as
``attn-tutor code check`` does) and compares it with every case; :func:`held_back_problems` runs a
buggy file of ``tests/kata_files/<kata>/`` (in this process, with the harness's functions) and checks that its outputs, where they are wrong, are what
its mistake's slips give (so that the judge names it).
"""

from __future__ import annotations

import importlib.util
import json
import warnings
from collections.abc import Sequence
from itertools import permutations
from pathlib import Path
from typing import Any

import numpy as np

from tutor.katas import harness
from tutor.katas.kata import Array, Case, Kata, Mistake
from tutor.katas.run import CaseRun, Run, run

RTOL, ATOL = 1e-4, 1e-5


def differ(a: Sequence[Array] | None, b: Sequence[Array] | None) -> bool:
    """Whether two tuples of outputs differ: one missing (the code raised), a shape, a NaN, or an entry."""
    if a is None or b is None:
        return (a is None) != (b is None)
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape:
            return True
        if x.dtype == bool or y.dtype == bool:
            if not np.array_equal(x, y):
                return True
        elif not np.allclose(x, y, rtol=RTOL, atol=ATOL, equal_nan=True):
            return True
    return False


def slipped(kata: Kata, case: Case, m: Mistake) -> tuple[Array, ...] | None:
    return kata.reference(case.inputs, m.slips)


def invisible(kata: Kata) -> list[str]:
    """The mistakes (with their slips) no case shows: their outputs equal the expected ones on every case."""
    cases = kata.cases()
    return [f"{m.key} {sorted(m.slips)}" for m in kata.mistakes if m.judge is None
            and not any((out := slipped(kata, c, m)) is not None and differ(out, c.expected) for c in cases)]


def confused(kata: Kata) -> list[tuple[str, str]]:
    """The ordered pairs (a, b) of different mistakes such that on every case where a shows, b gives a's
    outputs: the judge could never name a without b."""
    cases = kata.cases()
    ms = [m for m in kata.mistakes if m.judge is None]
    outs = {(m.key, m.slips, c.id): slipped(kata, c, m) for m in ms for c in cases}
    found = []
    for a, b in permutations(ms, 2):
        if a.key == b.key:
            continue
        parts = any(
            (oa := outs[a.key, a.slips, c.id]) is not None and differ(oa, c.expected)
            and differ(oa, outs[b.key, b.slips, c.id]) for c in cases)
        if not parts:
            found.append((f"{a.key} {sorted(a.slips)}", f"{b.key} {sorted(b.slips)}"))
    return found


# --- running a kata's files ---------------------------------------------------------------------------------

FILES = Path(__file__).resolve().parent.parent / "tutor" / "katas" / "files"
HELD_BACK = Path(__file__).resolve().parent / "kata_files"


def arrays(outputs: Sequence[dict[str, Any]]) -> tuple[Array, ...]:
    """The outputs as the harness sent them, as arrays (a bool array stays bool)."""
    return tuple(np.array(o["data"], dtype=bool if o["dtype"] == "bool" else np.float64).reshape(o["shape"])
                 for o in outputs)


def run_file(kata: Kata, path: Path) -> tuple[Run, dict[str, tuple[Array, ...] | None]]:
    """Run ``path`` on every case of ``kata`` in a child process: the run, and each case's outputs (None: raised)."""
    cases = kata.cases()
    result = run(path, kata.request(), [c.request() for c in cases])
    got = {r.id: None if r.outputs is None else arrays(r.outputs) for r in result.cases}
    return result, got


def solution_problems(kata: Kata, flavour: str) -> list[str]:
    """What is wrong with the reference solution of ``flavour`` run on every case: not run, the wrong
    flavour, a case raised, an output's dtype or shape or entries off (float32's tolerance for a float32
    case, 1e-9 for a float64 one)."""
    result, got = run_file(kata, FILES / kata.id / f"{flavour}_solution.py")
    if result.status != "ran" or result.flavour != flavour:
        return [f"{result.status} {result.flavour} {result.stderr[-500:]}"]
    problems = []
    for c in kata.cases():
        outs = got.get(c.id)
        sent = next(r for r in result.cases if r.id == c.id).outputs
        if outs is None or sent is None:
            problems.append(f"{c.id}: raised")
            continue
        rtol, atol = (RTOL, ATOL) if c.dtype == "float32" else (1e-9, 1e-9)
        # float arrays in: float arrays of their dtype out; none in (masks): any float dtype
        floats_in = any(isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in (*c.args, *c.kwargs.values()))
        for spec, o, want, s in zip(kata.outputs, outs, c.expected, sent, strict=True):
            dtype = "bool" if want.dtype == bool else c.dtype if floats_in else s["dtype"]
            if s["dtype"] != dtype or not dtype.startswith(("bool", "float")):
                problems.append(f"{c.id}: {spec.name} dtype {s['dtype']}, not {dtype}")
            if o.shape != want.shape or (o.dtype == bool and not np.array_equal(o, want)) or (
                    o.dtype != bool and not np.allclose(o, want, rtol=rtol, atol=atol, equal_nan=True)):
                problems.append(f"{c.id}: {spec.name} off")
    return problems


def in_process(kata: Kata, path: Path) -> tuple[str | None, dict[str, tuple[Array, ...] | None]]:
    """``path`` called on every case as the harness calls it (its flavour by the harness's rule, its arguments
    converted and its outputs sent back by the harness's own functions), in this process: the flavour and each
    case's outputs (None: it raised).  For the held-back files, whose one difference from a solution that
    :func:`solution_problems` runs in a child process is a line of arithmetic; a child apiece would cost a
    PyTorch import each."""
    spec = importlib.util.spec_from_file_location(f"held_back_{kata.id}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    request = kata.request()
    flavour = (harness._flavour(module, request) or ("numpy", ""))[0]
    got: dict[str, tuple[Array, ...] | None] = {}
    for c in kata.cases():
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")  # 0/0 in a buggy softmax: the NaN is the point
                value = harness._call(module, flavour or "numpy", request, json.loads(json.dumps(c.request())))
        except Exception:  # noqa: BLE001 -- the buggy code raised, as the learner's would
            got[c.id] = None
            continue
        got[c.id] = arrays(json.loads(json.dumps(harness._outputs(value))))
    return flavour, got


def held_back(kata: Kata) -> list[Path]:
    return sorted((HELD_BACK / kata.id).glob("*.py"))


def held_back_problems(kata: Kata, path: Path) -> list[str]:
    """What keeps the judge from naming a held-back buggy file's mistake: the file ran in the wrong flavour,
    passed every case, or gave on a failing case outputs no entry of its mistake (the file's name, less
    ``_torch``) gives."""
    key = path.stem.removesuffix("_torch")
    entries = [m for m in kata.mistakes if m.key == key]
    if not entries:
        return [f"no mistake {key}"]
    flavour = "torch" if path.stem.endswith("_torch") else "numpy"
    found, got = in_process(kata, path)
    if found != flavour:
        return [f"read as {found}"]
    failing = 0
    problems = []
    for c in kata.cases():
        outs = got.get(c.id)
        if outs is None:  # the learner's code raised: the judge shows the exception, it names nothing
            failing += 1
            continue
        if not differ(outs, c.expected):
            continue
        failing += 1
        if all(differ(outs, kata.reference(c.inputs, m.slips)) for m in entries):
            problems.append(f"{c.id}: not what {key} gives")
    return problems + ([] if failing else ["passed every case"])


# --- shared by the flash and backward katas' tests ---------------------------------------------------------


def close(got: np.ndarray, want: np.ndarray, dtype: str) -> bool:
    """Equal within the case's tolerance (float32: rtol 1e-4, atol 1e-5; float64: 1e-9), NaN equal to NaN."""
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-9, "atol": 1e-9}
    return got.shape == want.shape and bool(np.allclose(got, want, equal_nan=True, **tol))


def same(got: tuple[np.ndarray, ...] | None, want: tuple[np.ndarray, ...], dtype: str) -> bool:
    return got is not None and len(got) == len(want) and all(close(g, w, dtype) for g, w in zip(got, want))


def decoded(outputs) -> tuple[np.ndarray, ...]:
    return tuple(np.array(o["data"], dtype=np.float64).reshape(o["shape"]) for o in outputs)


def run_here(kata: Kata, path: Path, cases: list[Case]) -> Run:
    """A PyTorch file run in this process, through the harness's own loading, calling and encoding (this
    process has imported torch already: a child would spend seconds importing it again)."""
    spec = importlib.util.spec_from_file_location(f"kata_file_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = harness._flavour(module, kata.request())
    assert found is not None
    flavour = found[0]
    done = []
    for case in cases:
        try:
            value = harness._call(module, flavour, kata.request(), case.request())
            done.append(CaseRun(case.id, tuple(harness._outputs(value))))
        except Exception as exc:  # noqa: BLE001 -- a buggy file may raise, as the learner's would
            done.append(CaseRun(case.id, exception=type(exc).__name__))
    return Run("ran", flavour, tuple(done))

"""The float and exact walks under every misconception, kept: issue 19 moves them, never changes them.

For every bundled exercise and every misconception of the catalogue, each
step's value as the mistake computes it (the float walk, forward and
backward) is kept as a digest of its entries rounded to 10 significant
digits (round-off of an exact 0 kept as 0: :data:`NOISE`); so are what ``invisible`` decides exactly (the exact walk), the
slack ``check`` carries, and each step as ``verify`` reads it off the
batched layer with its rounding bound.  The digests were written before the
step functions moved beside their kinds (``ATTN_TUTOR_WRITE_SNAPSHOTS=1``
writes them again, for a meant change).
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest

from .conftest import EXERCISES

HERE = EXERCISES.parent / "tests" / "golden" / "walks"
BUNDLED = sorted(p.stem for p in EXERCISES.glob("*.yaml"))


#: Entries this small beside the largest one (or beside 1) are round-off of a value that is exactly 0: their
#: digits are what numpy's summation order and the CPU's vector instructions left (``1.96e-16`` on one machine,
#: ``5.9e-17`` on another), so they are kept as 0.  No bundled exercise has a true value this small.
NOISE = 1e-12


def _digest(value) -> str:
    a = np.asarray(value, dtype=np.float64)
    finite = np.abs(a[np.isfinite(a)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    with np.errstate(invalid="ignore"):
        a = np.where(np.abs(a) <= NOISE * scale, 0.0, a)
    text = ";".join(",".join("nan" if np.isnan(x) else f"{x:.10g}" for x in row) for row in np.atleast_2d(a))
    return f"{a.shape}:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def _walks(exercise_id: str) -> dict[str, object]:
    from tutor.exercise.catalog import resolve
    from tutor.mistakes.diagnose import MISCONCEPTIONS
    from tutor.mistakes.invisible import invisible
    from tutor.production import run_exercise
    from tutor.steps import KINDS, Replay, keys, replay, solve

    ex = resolve(exercise_id)
    backward = ex.mla is None and not (ex.has_norm or ex.residual)  # refused: MLA's, the block's
    sol = solve(ex, backward=backward)
    out: dict[str, object] = {}
    for m in MISCONCEPTIONS:
        seen: dict[str, str] = {}
        for key in keys(ex, backward=backward):
            if not m.applies(ex, key):
                continue
            with np.errstate(all="ignore"):
                for n, (fields, value) in enumerate(m.candidates(sol, key[0], key[1])):
                    seen[f"{key[0]}/{key[1]}/{n}"] = _digest(value) + ("" if not fields else f" {sorted(fields.items())}")
        out[m.key] = seen
    out["invisible"] = sorted(f"{i.key}@{i.step[0]}/{i.step[1]}" for i in invisible(sol))
    carried = replay(ex, given=lambda key: None, backward=backward)  # check's walk: each step's slack
    out["slack"] = {f"{k}/{h}": _digest(slack) for (k, h), (_, slack) in carried.computed.items()}
    run = run_exercise(ex, backward=backward)  # verify's walk: each step read off the batched layer, and its rounding bound
    bounds = Replay(ex, slack={})
    production: dict[str, str] = {}
    for step in sol.steps:
        kind = KINDS[step.id]
        bounds.values[step.key] = np.array(step.value, dtype=np.float64)
        bounds.slack[step.key] = bound = kind.rounding(bounds, step.head)
        production[f"{step.id}/{step.head}"] = _digest(kind.production(run, ex, step.head)) + " " + _digest(bound)
    out["production"] = production
    return out


@pytest.mark.parametrize("exercise_id", BUNDLED)
def test_every_mistake_walks_as_before(exercise_id):
    got = json.loads(json.dumps(_walks(exercise_id)))
    path = HERE / f"{exercise_id}.json"
    if os.environ.get("ATTN_TUTOR_WRITE_SNAPSHOTS"):
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    kept = json.loads(path.read_text(encoding="utf-8"))
    for name in sorted(set(kept) | set(got)):
        assert got.get(name) == kept.get(name), f"{exercise_id}: {name} walks differently"


def test_the_digest_keeps_values_and_drops_the_round_off_of_an_exact_zero():
    """What machines disagree on (a zero's sign, 1e-16 left by cancellation) does not move a digest; a change
    in the 9th significant digit of a value, or of a small true value beside 1, does."""
    zero = _digest([[0.0, 0.175180683, 1.0]])
    assert _digest([[-0.0, 0.175180683, 1.0]]) == zero
    assert _digest([[1.96261557e-16, 0.175180683, 1.0]]) == _digest([[5.88784672e-17, 0.175180683, 1.0]]) == zero
    assert _digest([[0.0, 0.175180684, 1.0]]) != zero
    assert _digest([[1e-9, 0.175180683, 1.0]]) != zero
    assert _digest([[-np.inf, np.nan, 1.0]]) != _digest([[0.0, np.nan, 1.0]])

"""The shared format-v3 vectors (tests/data/v3-cases.json, copied from ../shared/vectors/): tiny cases from
public reports, computed with torch 2.13 in float64 (RoPE written out in torch in both pairings,
``torch.nn.RMSNorm``/``LayerNorm``, ``scaled_dot_product_attention`` with a sliding window's boolean mask).

Each case is read as an exercise file by the one loader and worked out by the exact engine; every matrix
the case gives is compared with the step of the same name (1e-12).  The same file on the shared machine
is checked to be this copy, so the copy cannot drift from its source unnoticed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from tutor.exercise.load import parse_exercise
from tutor.steps import solve

DATA = Path(__file__).parent / "data" / "v3-cases.json"
CASES = json.loads(DATA.read_text(encoding="utf-8"))["cases"]
SHARED = Path("/work/shared/vectors/v3-cases.json")


def _final(sol):
    """The layer's output before any residual: ``output``, else ``concat``, else head 0's output."""
    for key in (("output", None), ("concat", None)):
        if sol.get(key) is not None:
            return sol.step(*key)
    return sol.step("head_output", 0)


@pytest.mark.parametrize("case", CASES, ids=[c["exercise"]["id"] for c in CASES])
def test_the_engine_gives_what_torch_gave(case):
    ex = parse_exercise(yaml.safe_dump(case["exercise"]), case["exercise"]["id"] + ".yaml")
    sol = solve(ex)
    expected = case["expected"]
    compared = 0
    for h, head in enumerate(expected["heads"]):
        for name, matrix in head.items():
            got = np.array(sol.step(name, h).value)
            assert np.allclose(got, np.array(matrix), rtol=1e-12, atol=1e-12), (name, h)
            compared += 1
    assert np.allclose(np.array(_final(sol).value), np.array(expected["output"]), rtol=1e-12, atol=1e-12)
    for name in ("x_norm", "residual"):
        if name in expected:
            assert np.allclose(np.array(sol.step(name).value), np.array(expected[name]), rtol=1e-12, atol=1e-12)
            compared += 1
    assert compared >= 5


def test_every_shared_case_is_here():
    ids = {c["exercise"]["id"] for c in CASES}
    assert ids == {"v3-rope-interleaved", "v3-rope-half", "v3-rmsnorm-block", "v3-layernorm-window"}
    if SHARED.exists():  # on the machine that holds the shared material: the copy is the source
        assert json.loads(SHARED.read_text(encoding="utf-8")) == json.loads(DATA.read_text(encoding="utf-8"))

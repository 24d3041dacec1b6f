"""What ``attn-tutor new`` writes, kept: a spread of seeds and options, format v1 and v2, and ``--like``.

Written with the generator as it was before v1 and v2 shared one core (issue
19, item 5); every case must still give the same file, byte for byte.  A
change that is meant rewrites them: ``ATTN_TUTOR_WRITE_SNAPSHOTS=1 pytest
tests/test_generate_snapshot.py``, then the diff is read and committed.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from tutor.authoring.generate import Spec, generate, like
from tutor.exercise import parse_exercise
from tutor.exercise.catalog import resolve

HERE = Path(__file__).parent / "golden" / "generate"

#: ``new`` from options: format v1 (sizes, masks, cross-attention, difficulty, dull, id and title) and v2
SPECS: dict[str, Spec] = {
    **{f"v1-default-s{s}": Spec(seed=s) for s in range(6)},
    "v1-2x3-h1-dk3-s4": Spec(tokens=2, d_model=3, d_k=3, seed=4),
    "v1-4x4-h2-dk2-s5": Spec(tokens=4, d_model=4, heads=2, d_k=2, seed=5),
    "v1-3x4-h2-dk1-s6": Spec(heads=2, d_k=1, seed=6),
    "v1-1x2-h1-dk1-s7": Spec(tokens=1, d_model=2, d_k=1, seed=7),
    "v1-4x2-h1-dk4-s8": Spec(tokens=4, d_model=2, d_k=4, seed=8),
    "v1-3x6-h1-dk9-s9": Spec(d_model=6, d_k=9, seed=9),
    "v1-2x4-h1-dk16-s10": Spec(tokens=2, d_k=16, seed=10),
    "v1-8x8-h4-dk2-s11": Spec(tokens=8, d_model=8, heads=4, d_k=2, seed=11),
    "v1-causal-s1": Spec(mask="causal", seed=1),
    "v1-causal-h2-s2": Spec(mask="causal", heads=2, seed=2),
    "v1-padding-s1": Spec(mask="padding", seed=1),
    "v1-padding-4x4-s2": Spec(tokens=4, mask="padding", seed=2),
    "v1-cross3-s3": Spec(cross=3, seed=3),
    "v1-cross3-padding-s4": Spec(cross=3, mask="padding", seed=4),
    "v1-cross2-causal-h2-s5": Spec(tokens=2, cross=2, mask="causal", heads=2, seed=5),
    **{f"v1-difficulty{d}-s7": Spec(difficulty=d, seed=7) for d in range(1, 6)},
    "v1-difficulty5-h2-causal-s8": Spec(difficulty=5, heads=2, mask="causal", seed=8),
    "v1-dull-s0": Spec(allow_dull=True, seed=0),
    "v1-dull-h2-s1": Spec(allow_dull=True, heads=2, seed=1),
    "v1-id-title-s12": Spec(id="my-own", title='A "quoted" title \\ with a backslash', seed=12),
    "v2-kv1-h2-s1": Spec(heads=2, kv_heads=1, seed=1),
    "v2-kv2-h4-dk1-s2": Spec(heads=4, kv_heads=2, d_k=1, seed=2),
    "v2-kv1-h4-s3": Spec(heads=4, kv_heads=1, seed=3),
    "v2-kv2-h2-s4": Spec(heads=2, kv_heads=2, seed=4),
    "v2-kv1-h2-s31": Spec(heads=2, kv_heads=1, seed=31),  # the first draw has two heads alike
    "v2-cache3-lower-right-s3": Spec(tokens=1, cache=3, mask="causal_lower_right", seed=3),
    "v2-cache2-kv1-h2-lower-right-s4": Spec(tokens=2, cache=2, heads=2, kv_heads=1, mask="causal_lower_right", seed=4),
    "v2-cache1-none-s5": Spec(tokens=2, cache=1, seed=5),
    "v2-cache2-causal-s6": Spec(tokens=2, cache=2, mask="causal", seed=6),
    "v2-cache2-padding-s6": Spec(tokens=2, cache=2, mask="padding", seed=6),
    "v2-cache3-kv2-h4-padding-s7": Spec(tokens=2, cache=3, heads=4, kv_heads=2, mask="padding", seed=7),
    "v2-cross3-lower-right-s7": Spec(tokens=2, cross=3, mask="causal_lower_right", seed=7),
    "v2-cross3-kv1-h2-padding-s8": Spec(cross=3, heads=2, kv_heads=1, mask="padding", seed=8),
    "v2-alibi-h2-causal-s5": Spec(heads=2, alibi=True, mask="causal", seed=5),
    "v2-alibi-h1-s6": Spec(alibi=True, seed=6),
    "v2-alibi-h4-kv2-padding-s7": Spec(heads=4, kv_heads=2, alibi=True, mask="padding", d_k=1, seed=7),
    "v2-alibi-cache2-h2-s8": Spec(tokens=2, cache=2, heads=2, alibi=True, mask="causal_lower_right", seed=8),
    "v2-dull-kv1-h2-s9": Spec(heads=2, kv_heads=1, allow_dull=True, seed=9),
    "v2-difficulty4-cache2-s10": Spec(tokens=2, cache=2, difficulty=4, mask="causal_lower_right", seed=10),
    "v2-id-title-kv1-s11": Spec(heads=2, kv_heads=1, id="my-gqa", title="Mine", seed=11),
    # the pre-norm block (issue 23)
    "v3-rmsnorm-residual-s1": Spec(norm="rmsnorm", residual=True, seed=1),
    "v3-layernorm-3x3-h2-causal-s2": Spec(d_model=3, heads=2, mask="causal", norm="layernorm", seed=2),
}

#: an exercise with everything ``--like`` keeps: per-head sizes, biases, W_O and b_O, cross-attention,
#: a mask matrix, key padding, labels YAML would misread unquoted
EVERYTHING = """\
id: everything-2x3
title: "Everything the shape keeps"
tokens: ["yes", I]
kv_tokens: [a, "no", c]
x: [[1, 0, 1], [0, 1, 1]]
x_kv: [[1, 0], [0, 1], [1, 1]]
heads:
  - w_q: [[1, 0], [0, 1], [1, 1]]
    w_k: [[1, 0], [0, 1]]
    w_v: [[1, 0, 1], [0, 1, 0]]
    b_q: [1, 0]
    b_v: [0, 1, 0]
  - w_q: [[1, 0], [0, 1], [1, 0]]
    w_k: [[0, 1], [1, 0]]
    w_v: [[1, 0, 0], [0, 1, 1]]
    b_k: [0, 1]
w_o: [[1, 0], [0, 1], [1, 0], [0, 1], [1, 1], [0, 0]]
b_o: [1, 0]
mask: [[true, false, true], [true, true, false]]
key_padding_mask: [false, false, true]
difficulty: 4
"""


def _likes() -> dict[str, tuple[str, int, dict]]:
    """``--like``: (exercise, seed, options) for every bundled v1 exercise and the one above."""
    bundled = sorted(p.stem for p in (Path(__file__).parents[1] / "exercises").glob("*.yaml"))
    out: dict[str, tuple[str, int, dict]] = {}
    for name in bundled:
        if not resolve(name).is_v2 and resolve(name).mla is None:  # no fresh numbers for v2's and MLA's
            for seed in (1, 2):
                out[f"like-{name}-s{seed}"] = (name, seed, {})
    out["like-single-head-3x4-dull-s3"] = ("single-head-3x4", 3, {"allow_dull": True})
    out["like-two-head-fused-3x4-named-s4"] = ("two-head-fused-3x4", 4, {"id": "mine", "title": "Mine",
                                                                          "source": "x.yaml --exercises=dir"})
    out["like-two-head-causal-3x4-fresh-s5"] = ("two-head-causal-3x4", 5, {"id": "two-head-causal-3x4"})
    for seed in (1, 2, 3):
        out[f"like-everything-s{seed}"] = ("<everything>", seed, {})
    return out


LIKES = _likes()


def _text(case: str) -> str:
    if case in SPECS:
        return generate(SPECS[case])
    name, seed, options = LIKES[case]
    ex = parse_exercise(EVERYTHING, "everything.yaml") if name == "<everything>" else resolve(name)
    return like(ex, seed, **options)


@pytest.mark.parametrize("case", [*SPECS, *LIKES])
def test_new_writes_the_same_file(case):
    out = _text(case)
    path = HERE / f"{case}.yaml"
    if os.environ.get("ATTN_TUTOR_WRITE_SNAPSHOTS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(out, encoding="utf-8")
    kept = path.read_text(encoding="utf-8")
    if out != kept:
        diff = "".join(difflib.unified_diff(kept.splitlines(True), out.splitlines(True), str(path), "now", n=2))
        pytest.fail(f"new {case} changed:\n{diff[:6000]}")

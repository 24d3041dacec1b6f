"""The behaviour of every bundled exercise, kept: issue 19 changes the structure, never what a learner reads.

For every bundled exercise, ``explain`` in JSON and as terminal text (the
forward pass, ``--backward`` and ``--tiled``) and the Markdown handout are
compared with the files of ``tests/golden/behaviour/``, written before the
package was restructured.  A change of behaviour that is meant (a fixed
sentence) rewrites them: ``ATTN_TUTOR_WRITE_SNAPSHOTS=1 pytest
tests/test_behaviour_snapshot.py``, then the diff is read and committed.
"""

from __future__ import annotations

import difflib
import os

import pytest

from .conftest import BLOCK_BUNDLED, EXERCISES

HERE = EXERCISES.parent / "tests" / "golden" / "behaviour"
BUNDLED = sorted(p.stem for p in EXERCISES.glob("*.yaml"))
#: (file suffix, explain's options): JSON is the contract, text what a terminal shows at 100 columns
VIEWS = {
    "forward.json": ("--format", "json"),
    "backward.json": ("--backward", "--format", "json"),
    "tiled.json": ("--tiled", "--format", "json"),
    "forward.txt": (),
    "backward.txt": ("--backward",),
    "tiled.txt": ("--tiled",),
    "md": ("--format", "markdown"),
}


#: every bundled exercise in every view, but the views refused for the pre-norm block (tests/test_prenorm_block.py)
#: and MLA's backward pass (refused, tests/test_mla.py)
CASES = [(e, v) for e in BUNDLED for v in sorted(VIEWS)
         if not (e in BLOCK_BUNDLED and v.split(".")[0] in ("backward", "tiled"))
         and not (e.startswith("mla-") and v.startswith("backward"))]


@pytest.mark.parametrize(("exercise_id", "view"), CASES, ids=[f"{e}-{v}" for e, v in CASES])
def test_explain_is_unchanged(cli, exercise_id, view):
    code, out, err = cli("explain", exercise_id, *VIEWS[view])
    assert code == 0, err
    path = HERE / f"{exercise_id}.{view}"
    if os.environ.get("ATTN_TUTOR_WRITE_SNAPSHOTS"):
        path.write_text(out, encoding="utf-8")
    kept = path.read_text(encoding="utf-8")
    if out != kept:
        diff = "".join(difflib.unified_diff(kept.splitlines(True), out.splitlines(True), str(path), "now", n=2))
        pytest.fail(f"explain {exercise_id} {' '.join(VIEWS[view])} changed:\n{diff[:6000]}")

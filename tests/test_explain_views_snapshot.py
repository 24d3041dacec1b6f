"""The views of ``explain`` that tests/test_behaviour_snapshot.py does not keep: worksheets, the brief
view, one head, the HTML page, a narrow ASCII terminal.

Written before the renderers shared one outline (issue 19, item 5); every
view must stay the same, byte for byte.  A change that is meant rewrites
them: ``ATTN_TUTOR_WRITE_SNAPSHOTS=1 pytest tests/test_explain_views_snapshot.py``,
then the diff is read and committed.
"""

from __future__ import annotations

import difflib
import os

import pytest

from .conftest import EXERCISES

HERE = EXERCISES.parent / "tests" / "golden" / "views"
MULTI_HEAD = ["gqa-four-heads-2x4", "mqa-two-heads-3x4", "two-head-causal-3x4", "two-head-fused-3x4"]
#: every feature once: one head, grouped K/V heads, a cache, cross-attention, a mask matrix, fused weights and W_O
SMALL = ["single-head-3x4", "mqa-two-heads-3x4", "decode-one-token-cache-3", "cross-attention-2x3",
         "fully-masked-row-3x3", "two-head-fused-3x4"]

#: (name, explain's options, environment, exercises)
VIEWS: list[tuple[str, tuple[str, ...], dict[str, str], list[str]]] = [
    ("blank.txt", ("--blank",), {}, SMALL),
    ("blank.md", ("--blank", "--format", "markdown"), {}, SMALL),
    ("brief.txt", ("--brief",), {}, SMALL),
    ("brief.md", ("--brief", "--format", "markdown"), {}, SMALL),
    ("head2.txt", ("--head", "2"), {}, MULTI_HEAD),
    ("head2.md", ("--head", "2", "--format", "markdown"), {}, MULTI_HEAD),
    ("head2.json", ("--head", "2", "--format", "json"), {}, MULTI_HEAD),
    ("head2-backward.txt", ("--head", "2", "--backward"), {}, MULTI_HEAD),
    ("head2-backward.md", ("--head", "2", "--backward", "--format", "markdown"), {}, MULTI_HEAD),
    ("backward-brief.md", ("--backward", "--brief", "--format", "markdown"), {}, SMALL),
    ("blank-backward.txt", ("--blank", "--backward"), {}, SMALL),
    ("html", ("--format", "html"), {}, SMALL),
    ("narrow-ascii.txt", (), {"COLUMNS": "40"}, SMALL),  # on a stream that takes ASCII only
]
CASES = [(name, ex) for name, _, _, exercises in VIEWS for ex in exercises]


@pytest.mark.parametrize("view, exercise_id", CASES, ids=[f"{ex}.{name}" for name, ex in CASES])
def test_explain_view_is_unchanged(cli, cli_encoded, view, exercise_id):
    _, options, env, _ = next(v for v in VIEWS if v[0] == view)
    if view == "narrow-ascii.txt":  # onto a stdout that encodes ASCII only (strictly: a character beyond it fails the run)
        r = cli_encoded("explain", exercise_id, *options, encoding="ascii", env=env)
        code, out, err = r.code, r.stdout.decode("ascii"), r.err
    else:
        code, out, err = cli("explain", exercise_id, *options, env=env)
    assert code == 0, err
    path = HERE / f"{exercise_id}.{view}"
    if os.environ.get("ATTN_TUTOR_WRITE_SNAPSHOTS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(out, encoding="utf-8")
    kept = path.read_text(encoding="utf-8")
    if out != kept:
        diff = "".join(difflib.unified_diff(kept.splitlines(True), out.splitlines(True), str(path), "now", n=2))
        pytest.fail(f"explain {exercise_id} {' '.join(options)} changed:\n{diff[:6000]}")


"""What a learner reads of issue 11's items 2, 3 and 5, to the character (goldens).

Narrow (40 columns) and on an ASCII-only stream (``PYTHONIOENCODING=ascii``,
no colour), as a user in a small terminal without UTF-8 sees it: the worked
arithmetic of the classic-sized exercise that catches every classic mistake,
practice's note where the exercise cannot catch one, validate's notes for an
instructor, and the file ``new --like`` writes.  Regenerate by hand with
``ATTN_TUTOR_UPDATE_GOLDEN=1`` after checking the difference line by line.
"""

from __future__ import annotations

import os

import pytest

from .conftest import REPO

GOLDEN = REPO / "tests" / "golden"
NARROW = {"COLUMNS": "40", "NO_COLOR": "1"}  # on an ASCII stream (cli_encoded)


def _same_as_golden(name: str, out: str) -> None:
    golden = GOLDEN / name
    if os.environ.get("ATTN_TUTOR_UPDATE_GOLDEN") == "1":  # pragma: no cover - regenerating by hand
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8")


def test_explain_asym_narrow_ascii(cli_encoded):
    """The classic size with W_Q ≠ W_K: every dot product, each softmax row's exp values, sum and
    e_j / sum, every weighted sum, wrapped at 40 columns between parts, in ASCII."""
    r = cli_encoded("explain", "single-head-asym-3x4", encoding="ascii", env=NARROW)
    assert (r.code, r.err) == (0, "")
    out = r.stdout.decode("ascii")  # nothing outside ASCII reached the stream
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 40
    _same_as_golden("explain-single-head-asym-3x4.narrow-ascii.txt", out)


def test_practice_says_what_the_classic_cannot_catch_narrow_ascii(cli_encoded):
    r = cli_encoded("practice", "single-head-3x4", "--steps", "scores", input="2 4 4; 4 8 8; 4 8 8\n",
                    encoding="ascii", env=NARROW)
    assert (r.code, r.err) == (0, "")
    out = r.stdout.decode("ascii")
    words = " ".join(out.split())
    assert "K*Q^T = Q*K^T because Q = K" in words and "Try `single-head-asym-3x4` to be tested on it." in words
    _same_as_golden("practice-single-head-3x4-scores.narrow-ascii.txt", out)


def test_validate_tells_an_instructor_what_each_bundled_exercise_cannot_catch(cli_encoded):
    r = cli_encoded("validate", "exercises", encoding="ascii", env={"COLUMNS": "100"}, cwd=REPO)
    assert r.code == 0
    out = r.stdout.decode("ascii") + r.stderr.decode("ascii")
    assert "single-head-asym-3x4" not in out  # it catches every classic mistake
    _same_as_golden("validate-bundled-notes.ascii.txt", out)


@pytest.mark.parametrize("like", ["two-head-causal-3x4", "two-head-fused-3x4"])
def test_new_like_writes_the_commented_file(cli, like):
    code, out, err = cli("new", "--like", like, "--seed", "3")
    assert (code, err) == (0, "")
    _same_as_golden(f"new-like-{like}-s3.yaml", out)


def test_a_stream_without_utf8_writes_a_root_of_a_name_with_its_parentheses():
    """validate's notes go to a plain stream: "√d_model" must not come out as "sqrtd_model"."""
    import tutor.cli.streams  # noqa: F401 - registers the codec error handler

    text = "dividing by √d_model instead of √d_k; 2√2; √(3)"
    assert text.encode("ascii", "attn-tutor-ascii") == b"dividing by sqrt(d_model) instead of sqrt(d_k); 2*sqrt(2); sqrt(3)"

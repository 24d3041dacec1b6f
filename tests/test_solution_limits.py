"""A solution file's matrices are bounded by the exercise format's limits (issue 8, second round, item a).

The bound is the longest side a step can have within ``tutor.exercise.LIMITS``: the concatenated heads,
``num_heads·d_v`` = 8 × 32 = 256 wide.  A matrix past it (or with more entries than the largest step,
[16 × 256]) is refused with one line naming it, before any of its entries is read; a correct matrix of the
largest step is read and checked.  The old bound (64 columns) refused a correct ``concat`` of an 8-head
exercise with d_v = 32 as "no step of an exercise is that large", once per row.
"""

from __future__ import annotations

import numpy as np
import pytest

from tutor.audit.solution import MAX_ENTRIES, MAX_SIDE
from tutor.exercise import LIMITS

L, D_MODEL, H, D_K, D_V, D_OUT = 16, 8, 8, 1, 32, 4


def flow(m) -> str:
    return "[" + ", ".join("[" + ", ".join(str(v) for v in row) + "]" for row in m) + "]"


@pytest.fixture
def wide(tmp_path):
    """A valid exercise whose concat is as wide as the format allows: [16 × 8·32], and its right concat."""
    rng = np.random.default_rng(8)
    x = rng.integers(0, 2, (L, D_MODEL))
    w_q, w_k, w_v = (rng.integers(0, 2, (D_MODEL, H * d)) for d in (D_K, D_K, D_V))
    w_o = rng.integers(0, 2, (H * D_V, D_OUT))
    (tmp_path / "wide.yaml").write_text(
        f"id: wide-concat\ntitle: the widest concat\nx: {flow(x)}\nnum_heads: {H}\n"
        f"w_q: {flow(w_q)}\nw_k: {flow(w_k)}\nw_v: {flow(w_v)}\nw_o: {flow(w_o)}\n")
    heads = []  # by hand, in float64: softmax(Q_h K_h^T / sqrt(d_k)) V_h for each head, side by side
    for h in range(H):
        q = x @ w_q[:, h * D_K:(h + 1) * D_K]
        k = x @ w_k[:, h * D_K:(h + 1) * D_K]
        v = x @ w_v[:, h * D_V:(h + 1) * D_V]
        s = q @ k.T / np.sqrt(D_K)
        e = np.exp(s - s.max(axis=1, keepdims=True))
        heads.append(e / e.sum(axis=1, keepdims=True) @ v)
    return tmp_path, np.concatenate(heads, axis=1)


def test_the_bound_is_the_format_s_widest_step():
    assert MAX_SIDE == LIMITS["heads"] * LIMITS["d_v"] == 256
    assert MAX_ENTRIES == LIMITS["L"] * 256


def test_a_right_concat_of_the_widest_step_is_read_and_right(cli, wide):
    folder, concat = wide
    assert concat.shape == (L, MAX_SIDE)
    (folder / "sol.yaml").write_text("exercise: wide.yaml\nconcat: " + flow([[f"{v:.6f}" for v in row] for row in concat]) + "\n")
    code, out, err = cli("check", folder / "sol.yaml")
    assert (code, err) == (0, ""), err
    assert "concat" in out and "too large" not in out


def test_a_wrong_concat_of_the_widest_step_is_reported_wrong_not_refused(cli, wide):
    folder, concat = wide
    (folder / "sol.yaml").write_text("exercise: wide.yaml\nconcat: " + flow(np.zeros_like(concat, dtype=int)) + "\n")
    code, out, err = cli("check", folder / "sol.yaml")
    assert (code, err) == (1, "")  # wrong, with a report; and no RuntimeWarning of a misconception's overflow
    assert "4096 of 4096 entries off" in out


def big(rows: int, cols: int, entry: str = "1") -> str:
    return "[" + ", ".join("[" + ", ".join([entry] * cols) + "]" for _ in range(rows)) + "]"


@pytest.mark.parametrize("matrix, where, message", [
    (big(3, MAX_SIDE + 1), "scores[0]", "3 rows, up to 257 columns: more than 256 rows or columns"),
    (big(MAX_SIDE + 1, 3), "scores", "257 rows, up to 3 columns: more than 256 rows or columns"),
    ("[[1, 2, 3], " + big(1, 5000)[1:], "scores[1]", "2 rows, up to 5000 columns"),
    (big(64, 64 * 4, "yes"), "scores", "16384 entries: no step of an exercise within the format's limits has more than 4096"),
    (big(MAX_SIDE, 17), "scores", "4352 entries"),
], ids=["257 columns", "257 rows", "one long row", "256x64 of non-numbers", "256x17"])
def test_a_matrix_larger_than_any_step_is_refused_in_one_line_unread(cli, tmp_path, matrix, where, message):
    (tmp_path / "sol.yaml").write_text(f"exercise: single-head-3x4\nscores: {matrix}\n")
    code, out, err = cli("check", tmp_path / "sol.yaml")
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1, err  # one line for the matrix: not one per row, nor one per entry
    assert "sol.yaml:2:" in err and f": {where}: " in err and message in err


def test_every_row_too_long_is_still_one_line(cli, tmp_path):
    (tmp_path / "sol.yaml").write_text(f"exercise: single-head-3x4\nq: {big(16, 300, 'no')}\nk: {big(3, 2)}\n")
    code, out, err = cli("check", tmp_path / "sol.yaml")
    assert code == 2 and err.count("error:") == 1 and ": q[0]: 16 rows, up to 300 columns" in err


@pytest.mark.parametrize("rows, cols", [(64, 5000), (100_001, 1)])
def test_a_file_with_more_values_than_any_file_needs_is_not_blamed_on_aliases(cli, tmp_path, rows, cols):
    (tmp_path / "sol.yaml").write_text(f"exercise: single-head-3x4\nscores: {big(rows, cols)}\n")
    code, out, err = cli("check", tmp_path / "sol.yaml")
    assert code == 2 and len(err.splitlines()) == 1
    assert "the file holds more than 100000 values" in err and "alias" not in err

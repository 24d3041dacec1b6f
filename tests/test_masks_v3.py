"""Issue 23, masks: ALiBi's slopes for every head count, sliding windows, attention sinks.

ALiBi's slopes are checked against the paper's reference code written out
here (Press et al. 2022, ofirpress/attention_with_linear_biases, ``get_slopes``),
not against attn-tutor's function; exercises are run end to end and their
numbers compared with PyTorch 2.13 (``F.scaled_dot_product_attention`` with
the same mask or float ``attn_mask``).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from tutor.exercise.record import alibi_exponents, alibi_slope

from .test_torch_parity import require_torch

torch = require_torch()
import torch.nn.functional as F  # noqa: E402


def get_slopes(n: int) -> list[float]:
    """The reference code of Press et al. 2022 (``get_slopes``), as published."""
    def get_slopes_power_of_2(n: int) -> list[float]:
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest_power_of_2) + get_slopes(2 * closest_power_of_2)[0::2][:n - closest_power_of_2]


# --- ALiBi for every head count ---------------------------------------------------------------------


@pytest.mark.parametrize("n", range(1, 17))
def test_alibi_slopes_are_the_reference_codes(n):
    ours = [2.0 ** -float(e) for e in alibi_exponents(n)]
    assert ours == pytest.approx(get_slopes(n), rel=1e-12, abs=0)  # the reference multiplies floats: 2^-8 comes out 1 ulp off


@pytest.mark.parametrize("n", range(1, 9))
def test_alibi_slopes_are_rational_up_to_the_head_limit(n):
    for h, ref in enumerate(get_slopes(n)):
        assert alibi_slope(h, n) == Fraction(ref)  # every reference slope is a power of two, exact in a float


def test_three_heads_are_a_sixteenth_a_256th_and_a_quarter():
    assert [alibi_slope(h, 3) for h in range(3)] == [Fraction(1, 16), Fraction(1, 256), Fraction(1, 4)]


def test_a_slope_that_is_not_rational_is_refused_not_rounded():
    with pytest.raises(ValueError, match="not rational"):
        alibi_slope(8, 9)  # head 9 of 9: 2^(-1/2), the first slope of 16 heads


def _sdpa(q, k, v, mask):
    """SDPA in float64 for one head: ``q [L, d]``, ``k [L_k, d]``, ``v [L_k, d_v]``, ``mask`` bool or float ``[L, L_k]``."""
    t = [torch.tensor(np.asarray(a, dtype=np.float64))[None, None] for a in (q, k, v)]
    m = torch.tensor(np.asarray(mask))[None, None]
    return F.scaled_dot_product_attention(*t, attn_mask=m)[0, 0].numpy()


def _json(cli, *argv):
    r = cli("explain", *argv, "--format", "json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def _values(doc, step, head):
    (s,) = [s for s in doc["steps"] if s["id"] == step and s["head"] == head]
    return np.array([[np.nan if v is None else v for v in row] for row in s["value"]], dtype=np.float64)


def test_three_heads_of_alibi_end_to_end_against_torch(cli):
    doc = _json(cli, "alibi-three-heads-3x2")
    x = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float64)
    w_q = np.array([[1, 0, 1], [0, 1, 1]])
    w_k = np.array([[0, 1, 1], [1, 1, 0]])
    w_v = np.array([[1, 0, 1], [0, 1, 1]])
    slopes = get_slopes(3)
    i, j = np.arange(3)[:, None], np.arange(3)[None, :]
    for h in range(3):
        bias = np.where(j <= i, slopes[h] * (j - i), -np.inf)  # [L, L_k]: ALiBi's bias, -inf above the diagonal
        want = _sdpa(x @ w_q[:, h:h + 1], x @ w_k[:, h:h + 1], x @ w_v[:, h:h + 1], bias)
        assert np.allclose(_values(doc, "head_output", h), want, atol=1e-12)
    assert "slopes 1/16, 1/256, 1/4" in cli("explain", "alibi-three-heads-3x2").out


def test_the_power_of_two_formula_on_three_heads_is_named(cli, tmp_path):
    # head 3 of 3: the paper's slope 1/4; the geometric formula 2^(-8·3/3) gives 1/256
    q = np.array([[1, 1, 2]]).T  # [L, 1]: x·W_Q[:, 2]
    k = np.array([[1, 0, 1]]).T  # [L, 1]: x·W_K[:, 2]
    i, j = np.arange(3)[:, None], np.arange(3)[None, :]
    biased = q @ k.T + 2.0 ** -8 * (j - i)
    (tmp_path / "sol.yaml").write_text(
        "exercise: alibi-three-heads-3x2\nheads:\n  - {}\n  - {}\n  - biased: "
        + json.dumps(biased.tolist()) + "\n")
    doc = json.loads(cli("check", str(tmp_path / "sol.yaml"), "--format", "json").out)
    keys = [d["key"] for s in doc["steps"] for d in s["diagnoses"]]
    assert doc["exit_code"] == 1 and "alibi_geometric" in keys


def test_new_writes_alibi_for_three_heads(cli, tmp_path):
    out = tmp_path / "a.yaml"
    r = cli("new", "--alibi", "--heads", "3", "--seed", "1", "-o", str(out))
    assert r.code == 0, r.err
    assert "1/16, 1/256, 1/4" in out.read_text()
    assert cli("validate", str(out)).code == 0

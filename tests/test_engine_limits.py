"""A file that `validate` accepts explains, practises and checks (issue 8, B.4).

Two halves of one rule:

* the exact engine's float paths never convert a huge integer to a float
  (``SoftmaxRow.shifted``, ``Mix.value``): what the math allows, they compute;
* the schema refuses, at the entry's line:col and naming the limit, what the
  engine is not built for: a denominator beyond 10^24, for one entry or for
  the entries of one matrix or vector together (the engine puts a matrix over
  one common denominator).

And the property that joins them, by hypothesis: files generated *at* the
documented limits (magnitude 10^6, 40 characters, exponents ±20,
denominators up to 10^24) always validate and explain -- the exact engine,
the check against the NumPy core (within what float64 can compute for that
exercise), and every renderer -- without an error.  ``ATTN_TUTOR_FUZZ_EXAMPLES``
sets the number of examples (small in ``make test``; e.g. 2000 on demand).
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from tutor.base.errors import EngineMismatchError
from tutor.exact.numbers import SoftmaxRow, mix
from tutor.exercise import MAX_DENOMINATOR, MAX_ENTRY_CHARS, MAX_EXPONENT, MAX_MAGNITUDE, validate_text
from tutor.production.verify import verify
from tutor.render.json import dumps
from tutor.render.markdown import render_markdown
from tutor.render.rich import render
from tutor.steps import Solution, solve

EXAMPLES = int(os.environ.get("ATTN_TUTOR_FUZZ_EXAMPLES", "25"))

ONE_HEAD = """id: t
title: t
x: {x}
heads:
  - w_q: [[1, 0], [0, 1]]
    w_k: [[1, 0], [0, 1]]
    w_v: {w_v}
"""


def exercise(x: str = "[[1, 0], [0, 1]]", w_v: str = "[[1, 0], [0, 1]]") -> str:
    return ONE_HEAD.format(x=x, w_v=w_v)


# --- the schema: the limit each entry or matrix breaks, at its place ------------------------------


def test_the_issue_entry_is_refused_with_the_limit():
    v = validate_text(exercise(w_v="[[1, 0], [0, '1/10000000000000000000000000000000018529']]"), "f.yaml")
    (p,) = v.problems
    assert (p.line, p.column, p.field) == (7, 23, "heads[0].w_v[1][1]")
    assert p.hint == "denominators are limited to 10^24; this one has 38 digits"


@pytest.mark.parametrize(("entry", "ok"), [
    ("'1/1000000000000000000000000'", True),  # 10^24 exactly
    ("'1/1000000000000000000000001'", False),  # 10^24 + 1
    ("0.000000000000000000000001", True),  # 10^-24
    ("0.0000000000000000000000001", False),  # 10^-25
    ("1.2345e-20", True),  # 12345 / 10^24
    ("1.23457e-20", False),  # 123457 / 10^25
    ("'-999999999999/1000000000000000000000000'", True),
    ("'3/6000000000000000000000000'", False),  # 1/(2·10^24) in lowest terms: over
    ("'5/5000000000000000000000000'", True),  # 1/10^24 in lowest terms
])
def test_one_entry_at_the_denominator_limit(entry, ok):
    v = validate_text(exercise(w_v=f"[[1, 0], [0, {entry}]]"), "f.yaml")
    assert v.ok is ok, v.problems


def test_a_matrix_whose_entries_need_too_large_a_common_denominator():
    x = "[['1/1000000007', '1/1000000009'], ['1/1000000021', 1]]"  # each fine; together 28 digits
    v = validate_text(exercise(x=x), "f.yaml")
    (p,) = v.problems
    assert (p.line, p.column, p.field) == (3, 40, "x[1][0]")
    assert p.message == "with this entry, x needs a common denominator of 28 digits; the limit is 10^24"
    assert "use fewer different denominators" in p.hint


P1, P2 = "'1/1000000000039'", "'1/1000000000061'"  # primes just above 10^12: both in one matrix pass 10^24


def test_the_common_denominator_is_per_matrix_and_per_vector():
    ok = exercise(x=f"[[{P1}, 1], [1, 0]]", w_v=f"[[{P2}, 0], [0, 1]]")
    assert validate_text(ok, "f.yaml").ok  # one per matrix: fine
    biased = ok.replace("    w_v:", f"    b_q: [{P1}, {P2}]\n    w_v:")
    (p,) = validate_text(biased, "f.yaml").problems
    assert (p.field, p.line) == ("heads[0].b_q[1]", 7)


def test_the_fused_form_and_w_o_are_bounded_too():
    big, other = P1, P2
    text = f"""id: t
title: t
num_heads: 1
x: [[1, 0], [0, 1]]
w_q: [[1, 0], [0, 1]]
w_k: [[1, 0], [0, 1]]
w_v: [[{big}, 0], [0, {other}]]
w_o: [[1, {big}], [{other}, 1]]
"""
    found = [(p.field, p.line) for p in validate_text(text, "f.yaml").problems]
    assert found == [("w_v[1][1]", 7), ("w_o[1][0]", 8)]


# --- the engine: float paths that never overflow ---------------------------------------------------


def test_softmax_row_with_integers_beyond_float_range():
    den = 10**400
    row = SoftmaxRow((3 * den, 2 * den, None, 3 * den - 1), den, 2)  # exponents 3√2, 2√2, masked, (3 - 10^-400)√2
    z = 2 + math.exp(-math.sqrt(2))
    assert row.shifted == pytest.approx((1.0, math.exp(-math.sqrt(2)), 0.0, 1.0), rel=1e-15)
    weight = mix(row, (0, 1, 0, 0))
    assert weight.value() == pytest.approx(math.exp(-math.sqrt(2)) / z, rel=1e-15)
    big = mix(row, (10**500, -(10**500), 7 * 10**500, 10**500), 10**500)  # coefficients 1, -1, (masked), 1
    assert big.value() == pytest.approx((2 - math.exp(-math.sqrt(2))) / z, rel=1e-14)


def test_a_cancelling_mix_with_huge_integers_is_computed_precisely():
    den = 10**330
    row = SoftmaxRow((0, 1), den, 1)  # exponents 0 and 10^-330: the weights differ in the 330th digit
    diff = mix(row, (10**320, -(10**320)), 10**320)  # w0 - w1 = tanh(-10^-330 / 2) ~ -5e-331
    assert diff.value() == pytest.approx(-5e-331, rel=1e-9)


def test_an_exercise_at_the_denominator_limit_explains(cli, tmp_path):
    """Every matrix over its own 24-digit denominator: the engine's integers reach ~10^150."""
    dens = [10**24 - 1, 10**24 - 3, 999999999999999999999989, 10**24 - 11, 10**24 - 17]
    m = [f"[['12345678901234/{d}', 1000000], [-1000000, '-98765432109876/{d}']]" for d in dens]  # 39 characters
    text = f"""id: limits
title: t
x: {m[0]}
heads:
  - w_q: {m[1]}
    w_k: {m[2]}
    w_v: {m[3]}
w_o: {m[4]}
"""
    path = tmp_path / "limits.yaml"
    path.write_text(text)
    for argv in (["validate", str(path)], ["explain", str(path)], ["explain", str(path), "--format", "json"]):
        code, out, err = cli(*argv)
        assert code == 0, err


# --- the check against the NumPy core: as strict as float64 allows -------------------------------


def test_scores_beyond_float64_precision_explain(cli, tmp_path):
    """Scores 10^24 apart by 10^6: float64 sees them equal (weights 0.5/0.5), the exact weights are 1 and 0.

    Before, `explain` refused the file as an engine bug; the check now allows
    what float64 cannot resolve here, and the exact solution is printed.
    """
    text = """id: cancel
title: t
x: [[1000000, 0], [999999.999999999999, 0], [0, 1]]
heads:
  - w_q: [[1000000], [0]]
    w_k: [[1000000], [0]]
    w_v: [[1], [2]]
"""
    path = tmp_path / "cancel.yaml"
    path.write_text(text)
    code, out, err = cli("explain", path, "--format", "json")
    assert code == 0, err
    weights = next(s for s in json.loads(out)["steps"] if s["id"] == "weights")
    assert weights["value"][0][:2] == [1.0, 0.0]  # exp(-10^6) is 0 in float64, but exactly it is not 0
    # scores 10^24, 10^24 - 10^6 and 0: weight (0, 1) over exp(s_01) is 1/(1 + exp(s_02 - s_01) + exp(s_00 - s_01))
    assert weights["exact"][0][1] == "1/(1 + exp(-999999999999999999000000) + exp(1000000))"


def _tampered(sol: Solution, step_id: str, delta: float) -> Solution:
    """``sol`` with entry (0, 0) of its first ``step_id`` step moved by ``delta`` (as a float)."""
    from tutor.exact.numbers import Rat

    steps = []
    done = False
    for s in sol.steps:
        if s.id == step_id and not done:
            done = True
            first = Rat(Fraction(float(s.exact[0][0]) + delta))
            s = dataclasses.replace(s, exact=((first, *s.exact[0][1:]), *s.exact[1:]))
        steps.append(s)
    return Solution(sol.exercise, tuple(steps))


@pytest.mark.parametrize("step_id", ["q", "scores", "scaled", "weights", "head_output", "output"])
def test_verify_still_catches_a_disagreement_of_one_millionth(step_id):
    from tutor.exercise.catalog import resolve

    sol = solve(resolve("two-head-fused-3x4"))
    verify(sol)
    with pytest.raises(EngineMismatchError, match=f"step {step_id} "):
        verify(_tampered(sol, step_id, 1e-6))


def test_verify_is_not_loosened_for_large_well_conditioned_numbers():
    """Entries of 10^6 give V entries of 10^12, exact in float64: the allowance stays at 1e-9 relative."""
    text = exercise(x="[[1000000, 3], [-1000000, 999999]]", w_v="[[1000000, 1], [7, -1000000]]")
    sol = solve(validate_text(text).exercise)
    verify(sol)
    assert float(sol.step("v", 0).exact[0][0]) == 1000000000021
    with pytest.raises(EngineMismatchError, match="step v "):
        verify(_tampered(sol, "v", 2e-9 * 1000000000021))


# --- the property: files at the documented limits always explain ----------------------------------

BIG_DENOMINATORS = [MAX_DENOMINATOR, MAX_DENOMINATOR - 1, 999999999999999999999989, 2**79, 3**50, 7 * 11 * 13 * 10**20,
                    999999999989 * 999999999959]


@st.composite
def matrices(draw: st.DrawFn, rows: int, cols: int) -> str:
    """A matrix as YAML flow text, every entry within the limits; one style per matrix so that the
    common denominator stays within 10^24 too."""
    style = draw(st.sampled_from(["int", "fraction", "decimal", "exponent", "small"]))
    if style == "fraction":
        den = draw(st.sampled_from(BIG_DENOMINATORS) | st.integers(2, MAX_DENOMINATOR))
        digits = MAX_ENTRY_CHARS - 2 - len(str(den))  # sign and slash
        top = min(10**digits - 1, MAX_MAGNITUDE * den)

        def entry() -> str:
            return f"'{draw(st.integers(-top, top))}/{den}'"
    elif style == "decimal":
        places = draw(st.integers(1, 24))

        def entry() -> str:
            whole = draw(st.sampled_from([0, 1, 999999, 123456]) | st.integers(0, MAX_MAGNITUDE - 1))
            room = min(places, MAX_ENTRY_CHARS - 2 - len(str(whole)))
            frac = draw(st.integers(0, 10**room - 1))
            return f"{draw(st.sampled_from(['', '-']))}{whole}.{frac:0{room}d}"
    elif style == "exponent":

        def entry() -> str:
            exp = draw(st.integers(-MAX_EXPONENT, 5))
            places = draw(st.integers(0, min(6, 24 + exp)))  # the denominator 10^(places - exp) stays <= 10^24
            mantissa = Decimal(draw(st.integers(-(10**places) * 9, 10**places * 9))).scaleb(-places)
            text = f"{mantissa}e{exp}"
            return text if abs(Fraction(text)) <= MAX_MAGNITUDE else "1e6"
    elif style == "int":

        def entry() -> str:
            return str(draw(st.sampled_from([MAX_MAGNITUDE, -MAX_MAGNITUDE, 0, 1, -1]) | st.integers(-MAX_MAGNITUDE, MAX_MAGNITUDE)))
    else:

        def entry() -> str:
            return str(draw(st.integers(-3, 3)))

    return "[" + ", ".join("[" + ", ".join(entry() for _ in range(cols)) + "]" for _ in range(rows)) + "]"


@st.composite
def exercises_at_the_limits(draw: st.DrawFn) -> str:
    L = draw(st.integers(1, 3))
    cross = draw(st.booleans())
    L_k = draw(st.integers(1, 3)) if cross else L
    d_model = draw(st.integers(1, 3))
    d_kv = draw(st.integers(1, 3)) if cross else d_model
    H = draw(st.integers(1, 2))
    d_k, d_v = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    fused = draw(st.booleans())
    lines = ["id: limits", "title: t", f"x: {draw(matrices(L, d_model))}"]
    if cross:
        lines.append(f"x_kv: {draw(matrices(L_k, d_kv))}")

    def bias(n: int) -> str:
        return draw(matrices(1, n))[1:-1]

    if fused:
        lines += [f"num_heads: {H}", f"w_q: {draw(matrices(d_model, H * d_k))}", f"w_k: {draw(matrices(d_kv, H * d_k))}",
                  f"w_v: {draw(matrices(d_kv, H * d_v))}"]
        for name, n in (("b_q", H * d_k), ("b_k", H * d_k), ("b_v", H * d_v)):
            if draw(st.booleans()):
                lines.append(f"{name}: {bias(n)}")
    else:
        lines.append("heads:")
        for _ in range(H):
            lines += [f"  - w_q: {draw(matrices(d_model, d_k))}", f"    w_k: {draw(matrices(d_kv, d_k))}",
                      f"    w_v: {draw(matrices(d_kv, d_v))}"]
            for name, n in (("b_q", d_k), ("b_k", d_k), ("b_v", d_v)):
                if draw(st.booleans()):
                    lines.append(f"    {name}: {bias(n)}")
    if draw(st.booleans()):
        d_out = draw(st.integers(1, 3))
        lines.append(f"w_o: {draw(matrices(H * d_v, d_out))}")
        if draw(st.booleans()):
            lines.append(f"b_o: {bias(d_out)}")
    mask = draw(st.sampled_from(["none", "causal", "matrix"]))
    if mask == "matrix":
        rows = [[draw(st.booleans()) for _ in range(L_k)] for _ in range(L)]
        lines.append("mask: " + json.dumps(rows))
    elif mask == "causal":
        lines.append("mask: causal")
    if draw(st.booleans()):
        lines.append("key_padding: " + json.dumps([draw(st.booleans()) for _ in range(L_k)]))
    return "\n".join(lines) + "\n"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(exercises_at_the_limits())
def test_files_at_the_limits_validate_and_explain(text):
    v = validate_text(text, "limits.yaml")
    assert v.ok, [str(p) for p in v.problems]
    sol = solve(v.exercise)
    verify(sol)  # the exact engine and the NumPy core agree (within what float64 can compute here)
    json.loads(dumps(sol))
    render_markdown(sol)
    console = Console(file=io.StringIO(), width=100, color_system=None)
    render(sol, console)
    for step in sol.steps:
        for row in step.value:
            for entry in row:
                assert math.isnan(float(entry)) is False
                str(entry)

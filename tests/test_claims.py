"""Every generic sentence holds for the exercise it is printed on (issue 10, section 1; torch-free).

A sentence is checked by asserting its claim on the numbers of the
exercise: the rows it says sum to 1 do, the row it names as the exception
sums to 0, the variance it states is the variance under the assumptions it
states (worked out exactly here, by enumeration), the citation names the
paper whose algorithm the code runs.  The PyTorch sentences are checked
against torch in tests/test_torch_claims.py.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import replace
from fractions import Fraction

import pytest
import yaml

from tutor.base.messages import EN, plural, t
from tutor.exercise.catalog import resolve
from tutor.exercise.record import causal
from tutor.steps import KINDS, solve, worked_entry

from .conftest import EXERCISES, REPO

BUNDLED = sorted(p.stem for p in EXERCISES.glob("*.yaml"))


def _why(ex, step_id, head=0):
    sol = solve(ex)
    step = sol.step(step_id, head)
    return [str(w) for w in KINDS[step_id].why(step, ex)]


# --- a row that may attend to no key ------------------------------------------------------------


@pytest.mark.parametrize("name", BUNDLED)
def test_the_weights_sentence_names_exactly_the_rows_that_do_not_sum_to_one(name):
    ex = resolve(name)
    sol = solve(ex)
    for h in range(ex.num_heads):
        step = sol.step("weights", h)
        sums = [sum(row) for row in step.value]
        zero = [step.row_labels[i] for i, s in enumerate(sums) if abs(s) < 1e-12]
        assert all(abs(s - 1) < 1e-12 for i, s in enumerate(sums) if step.row_labels[i] not in zero)
        text = " ".join(map(str, KINDS["weights"].why(step, ex)))
        if zero:
            assert plural("step.weights.why.empty", len(zero), rows=" and ".join(zero)) in text
            assert "sum to 0, not 1" in text
        else:
            assert "sum to 0" not in text
        # "positive" only where no weight is exactly 0
        assert ("positive" in text) == all(v > 0 for row in step.value for v in row)


@pytest.mark.parametrize("name", BUNDLED)
def test_the_head_output_bound_is_said_only_of_rows_it_holds_for(name):
    ex = resolve(name)
    sol = solve(ex)
    for h in range(ex.num_heads):
        out, v = sol.step("head_output", h), sol.step("v", h)
        weights = sol.step("weights", h)
        zero = [out.row_labels[i] for i, row in enumerate(weights.value) if not any(row)]
        for i, row in enumerate(out.value):
            if out.row_labels[i] in zero:
                assert all(x == 0 for x in row)
                continue
            for j, x in enumerate(row):
                col = [r[j] for r in v.value]
                assert min(col) - 1e-12 <= x <= max(col) + 1e-12
        text = " ".join(map(str, KINDS["head_output"].why(out, ex)))
        assert ("Except row" in text) == bool(zero)
        for label in zero:
            assert label in text


def test_a_zero_row_outside_the_range_of_v_is_named_as_the_exception():
    """A row of V all positive: the zero output row lies outside every column's range, and the
    sentence says the bound does not hold for it."""
    ex = resolve("fully-masked-row-3x3")
    ex = replace(ex, x=tuple(tuple(v + 1 for v in row) for row in ex.x))  # V > 0 everywhere
    sol = solve(ex)
    v = sol.step("v", 0).value
    assert all(x > 0 for row in v for x in row)
    text = " ".join(_why(ex, "head_output"))
    assert plural("step.head_output.why.empty", 1, rows="t3") in text


def test_the_worked_entry_of_a_row_with_no_key_says_zero_by_convention():
    sol = solve(resolve("fully-masked-row-3x3"))
    step = sol.step("weights", 0)
    text = worked_entry(sol, step, 2, 0)
    assert text.endswith(t("practice.work.empty.line", work="", row="t3"))  # "… = 0/0 (query t3 …) = 0"
    blocked = worked_entry(sol, step, 0, 2)  # t1 may not attend t3, but may attend others: a plain 0
    assert "convention" not in blocked and blocked.endswith(")")


def test_the_practice_hint_says_which_rows_do_not_sum_to_one(cli):
    _, out, _ = cli("practice", "fully-masked-row-3x3", "--steps", "weights", input="hint\nquit\n")
    flat = " ".join(out.split())
    assert "every row sums to 1, except row t3" in flat and "0/0 is set to 0 by convention" in flat
    _, out, _ = cli("practice", "single-head-3x4", "--steps", "weights", input="hint\nquit\n")
    flat = " ".join(out.split())
    assert "every row sums to 1." in flat and "except" not in flat


def test_check_says_the_column_bound_skips_the_zero_row(cli, tmp_path):
    sol = solve(resolve("fully-masked-row-3x3"))
    rows = [[f"{x:.4f}" for x in row] for row in sol.step("head_output", 0).value]
    path = tmp_path / "s.yaml"
    path.write_text("exercise: fully-masked-row-3x3\nhead_output: " + json.dumps(rows).replace('"', "") + "\n")
    code, out, _ = cli("check", path)
    assert code == 0
    assert plural("check.column.ok_empty", 1, step="head_output", whose="V", rows="t3") in " ".join(out.split())


# --- the variance argument for 1/√d_k ------------------------------------------------------------


def _variance_of_dot(values: tuple[Fraction, ...], d_k: int, shared: bool = False) -> Fraction:
    """Var(q·k) exactly: q and k with d_k entries each drawn uniformly from ``values``, independently
    (or ``shared``: k = q)."""
    outcomes = []
    for q in itertools.product(values, repeat=d_k):
        ks = [q] if shared else itertools.product(values, repeat=d_k)
        outcomes += [sum(a * b for a, b in zip(q, k)) for k in ks]
    n = len(outcomes)
    mean = sum(outcomes, Fraction(0)) / n
    return sum((o - mean) ** 2 for o in outcomes) / n


@pytest.mark.parametrize("d_k", [1, 2, 3, 4])
def test_the_variance_is_d_k_under_the_stated_assumptions_and_only_then(d_k):
    plus_minus = (Fraction(-1), Fraction(1))  # mean 0, variance 1
    assert _variance_of_dot(plus_minus, d_k) == d_k
    shifted = (Fraction(0), Fraction(2))  # variance 1 but mean 1: the variance is 3·d_k
    assert _variance_of_dot(shifted, d_k) == 3 * d_k
    assert _variance_of_dot(plus_minus, d_k, shared=True) == 0  # not independent (k = q): not d_k
    sentence = EN["step.scaled.why"]
    for assumption in ("independent", "mean 0", "variance 1"):
        assert assumption in sentence
    assert "variance d_k" in sentence


# --- citations and names --------------------------------------------------------------------------


def test_the_blocked_path_cites_flashattention_2_everywhere():
    """Queries in the outer loop and one division at the end are FlashAttention-2's Algorithm 1."""
    for path in (REPO / "tutor").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "Dao et al. 2022" not in text, path
        assert not re.search(r"FlashAttention(?!-2)[, ]+Algorithm", text), path
    assert "FlashAttention-2" in (REPO / "tutor" / "numeric" / "blocked.py").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", BUNDLED)
def test_the_per_head_width_is_d_k_and_d_v_never_d_h(cli, name):
    # d_h as a word: the backward pass's d_head (the gradient of a head's output, issue 13) is no width
    d_h = re.compile(r"\bd_h\b")
    backward = () if name.startswith("mla-") else (("--backward",),)  # MLA's backward pass is refused
    for args in (("--format", "rich"), ("--format", "json"), ("--format", "markdown"), *backward):
        _, out, _ = cli("explain", name, *args)
        assert not d_h.search(out), (name, args)
    assert not [k for k, v in EN.items() if d_h.search(v)]


def test_the_classic_description_gives_integer_inputs_as_the_reason_for_integer_scores():
    ex = resolve("single-head-3x4")
    ints = [v for m in (ex.x, ex.heads[0].w_q, ex.heads[0].w_k, ex.heads[0].w_v) for row in m for v in row]
    assert all(v.denominator == 1 for v in ints)
    scores = solve(ex).step("scores", 0)
    assert all(float(v).is_integer() for row in scores.value for v in row)
    assert "X and the weights are integers, so Q, K, V and every score are integers" in " ".join(ex.description.split())


# --- token numbering (fix-page, F14) -----------------------------------------------------------------


_ZERO_BASED_RANGE = re.compile(r"\b0\s*\.\.\s*[a-z]\b|\b(?:tokens?|queries|query|keys?|词元|查询|键)\s*0\b")


@pytest.mark.parametrize("name", BUNDLED)
def test_a_description_counts_tokens_as_the_tables_label_them(name):
    """Tables label tokens from 1 (t1, the first token): a description that numbers tokens from 0
    ("tokens 0..i", "词元 0..i") makes a learner read "t1 sees t0..t1".  Positions (RoPE, a cache's
    slots) may count from 0: the description says "position" / "位置" there."""
    doc = yaml.safe_load((EXERCISES / f"{name}.yaml").read_text(encoding="utf-8"))
    texts = [doc.get("description") or ""] + [
        (tr or {}).get("description") or "" for tr in (doc.get("translations") or {}).values()
    ]
    for text in texts:
        assert not _ZERO_BASED_RANGE.search(text), (name, _ZERO_BASED_RANGE.search(text))


# --- causal alignment --------------------------------------------------------------------------------


def test_new_warns_that_causal_cross_attention_is_not_real(cli, tmp_path):
    code, out, err = cli("new", "--cross", "4", "--mask", "causal", "--seed", "1")
    assert code == 0 and out
    assert t("mask.causal_cross") in err
    path = tmp_path / "cc.yaml"
    path.write_text(out)
    code, shown, err = cli("validate", path)
    assert code == 0 and t("mask.causal_cross") in shown + err  # valid, with a warning
    code, _, err = cli("new", "--cross", "4", "--seed", "1")
    assert t("mask.causal_cross") not in err


def test_explain_says_top_left_where_causal_meets_l_q_not_l_k(cli, tmp_path):
    _, out, _ = cli("new", "--cross", "5", "--mask", "causal", "--tokens", "3", "--seed", "2")
    path = tmp_path / "c.yaml"
    path.write_text(out)
    _, shown, _ = cli("explain", path)
    flat = " ".join(shown.split())
    assert t("explain.causal.cross") in flat
    assert t("explain.causal.offset", L=3, L_k=5, shift=2) in flat
    # the mask it explains is the top-left one it names: query i sees keys j <= i
    masked = json.loads(cli("explain", path, "--format", "json")[1])["steps"]
    allowed = [[v is not None for v in row] for row in next(s for s in masked if s["id"] == "masked")["value"]]
    assert tuple(map(tuple, allowed)) == causal(3, 5)
    _, shown, _ = cli("explain", "two-head-causal-3x4")
    assert "causal_lower_right" not in shown  # L_q = L_k: top-left and bottom-right agree


# --- explain --format json carries every sentence a reader gets ---------------------------------


@pytest.mark.parametrize("name", BUNDLED)
def test_json_has_every_why_sentence_and_the_production_view(cli, name):
    _, out, _ = cli("explain", name, "--format", "json")
    doc = json.loads(out)
    ex = resolve(name)
    sol = solve(ex)
    _, text, _ = cli("explain", name)
    flat = " ".join(text.split())
    for s in doc["steps"]:
        step = sol.step(s["id"], s["shared_by"][0] if "kv_head" in s else s["head"])  # a shared K/V step: its first head
        assert s["why"] == KINDS[s["id"]].why(step, ex)
        for sentence in s["why"]:
            assert " ".join(sentence.split()) in flat  # the reader gets the same sentences
    for p in doc["production"]:
        assert p["key"] in EN and " ".join(p["note"].split()) in flat
    for note in doc["notes"]:
        assert " ".join(note.split()) in flat


def test_the_format_document_describes_the_json_additions():
    doc = (REPO / "docs" / "exercise-format.md").read_text(encoding="utf-8")
    for field in ('"why"', '"production"', '"notes"'):
        assert field in doc


"""The worked arithmetic adds up at the places it shows (F8 of the class trial; torch-free).

``head_1[t2, d1] = 0.0287·1 + 0.4856·2 + 0.4856·2 ≈ 1.9713`` was printed by
every renderer: the terms as printed give 1.9711, and a learner who follows
the handout writes 1.9711, which ``check`` marks wrong.  Here every line of
every step's arithmetic (the one renderers print: terminal, Markdown, HTML,
PDF) is read back as text and its decimals computed with fractions, by a
small evaluator of this file's own: a chain ``terms ≈ r`` must give ``r``
when rounded at ``r``'s places, ``terms = r`` must give ``r`` exactly.
"""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

from tutor.base.messages import Msg
from tutor.exercise.catalog import resolve
from tutor.steps import KINDS, solve, worked_entry

from .conftest import EXERCISES

BUNDLED = sorted(p.stem for p in EXERCISES.glob("*.yaml"))

_NUMBER = re.compile(r"−?\d+(?:\.\d+)?(?:e[−-]?\d+)?")
_TOKEN = re.compile(r"\d+(?:\.\d+)?(?:e-?\d+)?|[-+*/()]")


def _value(expr: str) -> Fraction | None:
    """``0.0287·1 + (−1/2)·2`` computed exactly; ``None`` when it is not plain arithmetic (``exp(√2)``)."""
    text = expr.strip().replace("−", "-").replace("·", "*")
    if not text or re.fullmatch(r"[-+*/()\d.\se]+", text) is None or re.search(r"e(?!-?\d)", text):
        return None
    tokens = _TOKEN.findall(text)
    if "".join(tokens) != text.replace(" ", ""):
        return None
    pos = 0

    def peek() -> str:
        return tokens[pos] if pos < len(tokens) else ""

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def atom() -> Fraction:
        tok = take()
        if tok == "(":
            v = sum_()
            assert take() == ")"
            return v
        if tok == "-":
            return -atom()
        return Fraction(tok)

    def product() -> Fraction:
        v = atom()
        while peek() in ("*", "/"):
            v = v * atom() if take() == "*" else v / atom()
        return v

    def sum_() -> Fraction:
        v = product()
        while peek() in ("+", "-"):
            v = v + product() if take() == "+" else v - product()
        return v

    try:
        v = sum_()
    except (AssertionError, ZeroDivisionError, ValueError, IndexError):
        return None
    return v if pos == len(tokens) else None


def wrong_clauses(line: str, computed: list[str] | None = None) -> list[str]:
    """The clauses of a worked line whose decimals, computed, do not give the result they show
    (every clause computed is appended to ``computed``)."""
    bad = []
    for segment in line.split(",  "):
        parts = re.split(r" (=|≈) ", segment.split(": ")[-1])
        for k in range(0, len(parts) - 2, 2):
            lhs, sign, rhs = parts[k], parts[k + 1], parts[k + 2].strip()
            if "." not in lhs or _NUMBER.fullmatch(rhs) is None:
                continue  # only arithmetic with decimals in it can fail to add up
            v = _value(lhs)
            if v is None:
                continue
            if computed is not None:
                computed.append(segment)
            shown = Fraction(rhs.replace("−", "-"))
            places = len(rhs.split(".")[1]) if "." in rhs and "e" not in rhs else None
            if sign == "=":
                ok = v == shown
            elif places is None:
                ok = abs(v - shown) <= abs(shown) / 10  # 1.2e−5: two significant digits
            else:
                ok = abs(v - shown) < Fraction(1, 2 * 10**places)  # a tie rounds either way
            if not ok:
                bad.append(f"{segment}  (the terms give {float(v)!r})")
    return bad


def _checked_lines(ex, places: int = 4) -> tuple[list[str], int]:
    """Every wrong clause of every step's arithmetic of ``ex`` (forward, and backward where it has one),
    and how many clauses with decimals were computed."""
    sols = [solve(ex)]
    try:
        sols.append(solve(ex, backward=True))
    except Exception:  # an exercise without a backward pass (blocked path, sizes)
        pass
    forward, bad, computed = sols[0], [], []
    for sol in sols:
        for step in sol.steps:
            kind = KINDS[step.id]
            if sol is not forward and not kind.backward:
                continue
            for worked in kind.arithmetic(sol if kind.backward else forward, step, places):
                for line in worked.lines:
                    if isinstance(line, Msg):
                        continue
                    bad += [f"{ex.id} {step.id} {worked.label}: {b}" for b in wrong_clauses(str(line), computed)]
    return bad, len(computed)


def test_the_evaluator_sees_the_handout_line_of_the_finding_as_wrong():
    assert wrong_clauses("0.0287·1 + 0.4856·2 + 0.4856·2 ≈ 1.9713")
    assert wrong_clauses("Σ ≈ 2.0123 + 4.0972 + 8.3421 ≈ 14.4517")
    assert not wrong_clauses("0.028705·1 + 0.485648·2 + 0.485648·2 ≈ 1.9713")
    assert not wrong_clauses("Σ ≈ 2.0123 + 4.0972 + 8.3421 = 14.4516")
    assert wrong_clauses("weights: 1.0000 / 3 = 0.3333")
    assert wrong_clauses("1.108383·0 + 2.674850·1 ≈ 2.6748")  # a tie: 2.6748 or 2.6749, as the learner rounds


@pytest.mark.parametrize("name", BUNDLED)
def test_every_worked_line_of_a_bundled_exercise_adds_up(name):
    bad, count = _checked_lines(resolve(name))
    assert not bad, "\n".join(bad)
    assert count > 0  # the exercise's lines were read: the weights at least are decimals


@pytest.mark.parametrize("places", [2, 3, 6])
def test_the_lines_add_up_at_other_precisions(places):
    for name in ("single-head-3x4", "alibi-causal-3x2", "gqa-four-heads-2x4", "padding-4x2"):
        bad, _ = _checked_lines(resolve(name), places)
        assert not bad, "\n".join(bad)


@pytest.mark.parametrize("seed", range(6))
def test_the_lines_of_new_exercises_add_up(cli, tmp_path, seed):
    path = tmp_path / "new.yaml"
    mask = ("none", "causal", "padding")[seed % 3]
    code, _, err = cli("new", "--tokens", "4", "--d-model", "4", "--heads", "2", "--d-k", "2", "--mask", mask,
                       "--seed", str(seed), "--difficulty", str(1 + seed % 5), "-o", path)
    assert code == 0, err
    bad, count = _checked_lines(resolve(str(path)))
    assert not bad, "\n".join(bad)
    assert count > 0


def test_the_handout_line_of_the_finding_now_adds_up_in_every_renderer(cli):
    line = "0.028705·1 + 0.485648·2 + 0.485648·2 ≈ 1.9713"
    _, text, _ = cli("explain", "single-head-3x4")
    assert line in text
    _, md, _ = cli("explain", "single-head-3x4", "--format", "markdown")
    assert line in md
    assert "0.0287·1 + 0.4856·2" not in text + md


@pytest.mark.parametrize("name", BUNDLED)
def test_every_worked_entry_of_a_bundled_exercise_adds_up(name):
    """The one-entry lines ``check``'s comments and ``practice``'s hints print (``worked_entry``): the same
    rule, and ``=`` only where the terms as written give the result (not ``0.707107·0.707107 + … = 1``)."""
    ex = resolve(name)
    sols = [solve(ex)]
    try:
        sols.append(solve(ex, backward=True))
    except Exception:  # an exercise without a backward pass
        pass
    bad, computed = [], []
    for sol in sols:
        for step in sol.steps:
            for i in range(step.shape[0]):
                for j in range(step.shape[1]):
                    line = str(worked_entry(sol, step, i, j))
                    bad += [f"{step.id}: {b}" for b in wrong_clauses(line, computed)]
    assert not bad, "\n".join(bad)
    assert computed

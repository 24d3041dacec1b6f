"""Issue 20, E: what a new user and a hostile trial found, each input and its siblings as a test.

Each test computes what it expects by hand (or independently of the code under test) and can fail."""

from __future__ import annotations

import random

import pytest

from tutor.drills import interview, masks
from tutor.drills.record import grade

T, F = True, False


# --- positions are counted from 1 wherever a learner reads them ----------------------------------------


def test_drill_masks_counts_sequences_queries_and_keys_from_1():
    # B = 2, lengths 4 and 2 padded at the start, causal: the asked sequence is the second one (index 1)
    s = masks.Scenario("left_padding", 2, 4, 4, "top_left", (4, 2), True, 1)
    qs = masks.scenario_questions(s, random.Random(0), "m")
    first = qs[0]
    assert "for sequence 2:" in first.prompt and "sequence 1" not in first.prompt
    # the second sequence's mask is right; the first sequence's (no padding: the causal mask alone) is not
    second_rows = "0 0 0 0; 0 0 0 0; 0 0 1 0; 0 0 1 1"
    first_rows = "1 0 0 0; 1 1 0 0; 1 1 1 0; 1 1 1 1"
    conv = first.json["convention"]
    def typed(rows: str) -> str:
        m = [[int(v) for v in r.split()] for r in rows.split(";")]
        cell = {"sdpa_bool": lambda a: str(a), "mha_bool": lambda a: str(1 - a),
                "additive": lambda a: "0" if a else "-inf"}[str(conv)]
        return "; ".join(" ".join(cell(a) for a in r) for r in m)
    assert grade(first, typed(second_rows)).outcome == "correct"
    assert grade(first, typed(first_rows)).outcome != "correct"
    every = masks.every_convention(s)
    assert every[0].startswith("The mask of sequence 2 ")
    assert every[2].split() == ["k1", "k2", "k3", "k4"]
    assert [line.split()[0] for line in every[3:7]] == ["q1", "q2", "q3", "q4"]
    kpm = every[every.index(next(x for x in every if "key_padding_mask" in x)) + 1:][:3]
    assert [line.split()[0] for line in kpm[1:]] == ["b1", "b2"]
    assert every[-1] == "Rows that may attend to no key: q1, q2."
    fully = next(q for q in qs if q.topic == "fully_masked")
    assert "In sequence 2, queries q1, q2 may attend to no key." in fully.prompt


def test_no_text_a_learner_reads_counts_positions_from_0():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    decode = (root / "exercises" / "decode-one-token-cache-3.yaml").read_text(encoding="utf-8")
    assert "(i = 0)" not in decode and "keys 0 to" not in decode
    assert "the new token (i = 1) sees keys 1 to 4" in decode
    bank = "".join(p.read_text(encoding="utf-8") for p in (root / "tutor" / "drills" / "concepts").glob("*.yaml"))
    assert "keys 0 to" not in bank and "key 0" not in bank
    for seed in range(30):  # every scenario of 30 drills: no label q0, k0, b0, no "sequence 0"
        for q in masks.questions(seed, 9):
            text = "\n".join([q.prompt, *q.explain, *q.after])
            assert not any(w in text.split() for w in ("q0", "k0", "b0", "q0,")), text
            assert "sequence 0" not in text


# --- the mock interview's hand step is a real calculation -------------------------------------------


def _oracle(kind: str, given: dict[str, list[list[float]]]) -> list[list[float]]:
    import math

    if kind == "scores":
        Q, K = given["Q"], given["K"]
        return [[sum(a * b for a, b in zip(q, k, strict=True)) for k in K] for q in Q]
    if kind == "weights":
        (S,) = given.values()
        out = []
        for row in S:
            e = [math.exp(v) for v in row]
            out.append([v / sum(e) for v in e])
        return out
    raise AssertionError(f"{kind} is not a calculation the test knows")


@pytest.mark.parametrize(("exercise", "step"), interview.CALCULATIONS)
def test_every_hand_calculation_of_the_interview_combines_several_numbers_per_entry(exercise, step):
    from tutor.exercise.catalog import resolve
    from tutor.steps import solve
    from tutor.steps.catalogue import CATALOGUE

    sol = solve(resolve(exercise))
    kind = next(k for k in CATALOGUE if k.id == step)
    st = sol.step(step, 0)
    given = {g.name: [list(r) for r in g.value] for g in kind.given(sol, st)}
    want = _oracle(step, given)
    assert [[round(v, 9) for v in r] for r in st.value] == [[round(v, 9) for v in r] for r in want]
    # every entry moves when one of at least two numbers it is computed from moves (a halving moves with one)
    for i, row in enumerate(want):
        for j, _ in enumerate(row):
            moved = 0
            for name, m in given.items():
                for a, r in enumerate(m):
                    for b, _ in enumerate(r):
                        bumped = {n: [list(x) for x in g] for n, g in given.items()}
                        bumped[name][a][b] += 0.5
                        moved += abs(_oracle(step, bumped)[i][j] - want[i][j]) > 1e-12
            assert moved >= 2, (exercise, step, i, j)
    # and no answer is a given matrix times a constant (the 2×2 halving of scores into scaled)
    for m in given.values():
        if (len(m), len(m[0])) == (len(want), len(want[0])) and any(v for r in m for v in r):
            ratios = {round(w / v, 9) for r, wr in zip(m, want, strict=True) for v, w in zip(r, wr, strict=True) if v}
            assert len(ratios) > 1 or any(w and not v for r, wr in zip(m, want, strict=True)
                                          for v, w in zip(r, wr, strict=True))


# --- a character the stream cannot decode ------------------------------------------------------------


def test_drills_name_a_character_the_stream_could_not_decode(cli_process):
    done = cli_process("drill", "shapes", "--seed", "1", "--count", "1", input="2\u00d74\u00d78\nquit\n",
                       env={"PYTHONIOENCODING": "ascii"})
    assert done.code == 0, done.err
    assert "a character the input stream could not decode at column 2" in done.out
    assert "cannot read" not in done.out
    q = masks.questions(3, 1)[0]
    verdict = grade(q, "1 \ufffd\ufffd 0")
    assert verdict.outcome == "invalid" and "at column 3" in verdict.message

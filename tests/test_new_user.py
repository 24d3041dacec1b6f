"""Issue 20, E: what a new user and a hostile trial found, each input and its siblings as a test.

Each test computes what it expects by hand (or independently of the code under test) and can fail."""

from __future__ import annotations

import json
import random

import pytest

from tutor.drills import interview, masks
from tutor.drills.record import grade

from .conftest import REPO

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


# --- stats: counted in SQL, every mistake named, the cut said ----------------------------------------


def _stored_mistake_keys() -> set[str]:
    """Every key a session can write to the ``mistakes`` table: the misconceptions, the single slip,
    the online softmax's mistakes and the grading note."""
    from tutor.answers.grading import TRUNCATED
    from tutor.flash.check import MISTAKES as TILED
    from tutor.mistakes.diagnose import MISCONCEPTIONS

    return {m.key for m in MISCONCEPTIONS} | {"single_entry", TRUNCATED} | {k for k, _ in TILED}


def test_every_mistake_a_session_can_store_has_a_name_in_stats():
    from tutor.base.messages import EN
    from tutor.practice.stats import mistake_name

    keys = _stored_mistake_keys()
    assert {"grad_no_scale", "tiled_no_rescale_acc", "dropout_on", "truncated_decimal"} <= keys
    unnamed = sorted(k for k in keys if f"mistake.{k}" not in EN)
    assert unnamed == []
    for key in keys:
        name = mistake_name(key)
        assert name != key and "does not name" not in name, (key, name)  # a phrase, not the key
    # a key only another version wrote: said to be unnamed, the key given to look it up
    assert mistake_name("from_the_future") == "a mistake this version does not name (from_the_future)"


def _record_many(store, answers):
    from tutor.store import Attempt

    s = store.begin_session("single-head-3x4", mode="matrix", tolerance=None)
    for exercise, step, head, outcome, attempt, keys in answers:
        store.record(s, Attempt(exercise, step, head, outcome, attempt, 0, keys))


def test_stats_counts_what_a_hand_count_of_the_answers_gives(tmp_path):
    from collections import Counter

    from tutor.drills.results import counted, topic_stats
    from tutor.store import Store

    rng = random.Random(20)
    answers = []
    for _ in range(300):
        if rng.random() < 0.3:
            step = rng.choice(["drill:shapes:scores", "drill:masks:sdpa_bool", "drill:counts:kv_cache"])
            answers.append(("drill:" + step.split(":")[1], step, None, rng.choice(["correct", "wrong", "skipped"]),
                            1, ()))
        else:
            outcome = rng.choice(["correct", "wrong", "shown", "skipped"])
            keys = (rng.choice(["no_scaling", "transposed", "mask_zero"]),) if outcome == "wrong" else ()
            answers.append((rng.choice(["single-head-3x4", "two-head-causal-3x4"]), rng.choice(["q", "scores", "scaled"]),
                            0, outcome, rng.choice([1, 2]), keys))
    with Store.open(tmp_path / "p.sqlite3") as store:
        _record_many(store, answers)
        # a row another program wrote (a BLOB for the step): left out of every count, and counted as left out
        store.conn.execute("INSERT INTO answers (session, at, exercise, step, head, outcome, attempt)"
                           " VALUES (1, 'x', 'single-head-3x4', X'00', 0, 'correct', 1)")
        store.conn.commit()
        data = store.stats()
    practice = [a for a in answers if not a[1].startswith("drill:")]
    by = Counter((step, outcome) for _, step, _, outcome, _, _ in practice)
    for step in ("q", "scores", "scaled"):
        s = data.step(step)
        assert (s.correct, s.wrong, s.shown, s.skipped) == tuple(by[(step, o)] for o in
                                                                 ("correct", "wrong", "shown", "skipped"))
        assert s.first_try == sum(1 for a in practice if a[1] == step and a[3] == "correct" and a[4] == 1)
    assert data.answers == len(practice)
    assert data.left_out == 1
    assert data.practised == dict(Counter((a[0], a[1]) for a in practice if a[3] != "skipped"))
    keys = Counter(a[5][0] for a in practice if a[5])
    assert [(m.key, m.count) for m in data.mistakes] == sorted(keys.items(), key=lambda kv: (-kv[1], kv[0]))
    assert data.mistake_kinds == len(keys)
    # the drills' topics, from the counts in SQL, are those counted answer by answer
    from tutor.store import Attempt

    drills = [Attempt(e, st, h, o, n) for e, st, h, o, n, _ in answers if st.startswith("drill:")]
    assert counted(data.drill_outcomes) == topic_stats(drills)
    assert sum(s.correct + s.wrong + s.shown + s.skipped for s in counted(data.drill_outcomes)) == len(drills)


def test_stats_never_reads_every_answer_into_memory(cli, monkeypatch):
    from tutor.store import Store

    assert cli("practice", "single-head-3x4", "--steps", "q,scores", input="skip\nskip\n").code == 0
    assert cli("drill", "shapes", "--count", "1", "--seed", "1", input="skip\n").code == 0

    def every_answer(self):  # what took 900 MB on a store of 500,000 answers
        raise AssertionError("stats read every answer")

    monkeypatch.setattr(Store, "attempts", every_answer)
    code, out, err = cli("stats")
    assert (code, err) == (0, "")
    assert "Drills: 1 answer" in out
    code, out, err = cli("stats", "--format", "json")
    assert code == 0 and json.loads(out)["drills"]["answers"] == 1


def test_stats_says_the_mistakes_shown_are_the_most_frequent_of_more(tmp_path, cli, monkeypatch, home):
    from tutor.store import Store

    kinds = ["no_scaling", "transposed", "mask_zero", "softmax_columns", "no_softmax", "grad_no_scale", "times_k"]
    answers = [("single-head-3x4", "scaled", 0, "wrong", 1, (k,)) for i, k in enumerate(kinds) for _ in range(7 - i)]
    with Store.open(home / "progress.sqlite3") as store:
        _record_many(store, answers)
    code, out, err = cli("stats")
    assert code == 0
    assert "Mistakes, by kind: the 5 most frequent of 7" in out
    assert "grad_no_scale" not in out  # the sixth: cut, and said to be
    doc = json.loads(cli("stats", "--format", "json").out)
    assert (len(doc["mistakes"]), doc["mistake_kinds"]) == (5, 7)
    with Store.open(home / "progress.sqlite3") as store:  # five kinds or fewer: no cut to speak of
        store.conn.execute("DELETE FROM mistakes WHERE key IN ('grad_no_scale', 'times_k')")
        store.conn.commit()
    out = cli("stats").out
    assert "Mistakes, by kind\n" in out and "most frequent" not in out


def test_stats_names_a_backward_mistake_not_its_key(cli, home):
    from tutor.store import Store

    with Store.open(home / "progress.sqlite3") as store:
        _record_many(store, [("single-head-3x4", "d_q", 0, "wrong", 1, ("grad_no_scale",))])
    out = cli("stats").out
    assert "1×  forgot the 1/√d_k of d_Q and d_K" in out and "grad_no_scale" not in out


# --- practice says why a step is computed as it is, once its answer is known ---------------------------


def test_show_and_a_right_answer_give_the_steps_why(cli):
    script = "show\n2 4 4; 4 8 8; 4 8 8\n2 4 4; 4 8 8; 4 8 8\nskip\n"
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q,scores,scaled", input=script,
                         env={"COLUMNS": "200"})
    assert (code, err) == (0, "")
    lines = out.splitlines()
    q_why = "  Each token asks a question: its row of Q is what it looks for in the other tokens."
    scores_why = ("  Entry (i, j) is the dot product q_i·k_j: how well query i matches key j. Rows are queries,"
                  " columns are keys.")
    # shown: after the answer's table; right: after the verdict, before the note on what it cannot catch
    assert lines[lines.index(q_why) - 1].startswith("  ╰") and lines.count(q_why) == 1
    assert lines[lines.index(scores_why) - 1] == "✓ Right." and lines[lines.index(scores_why) + 1].startswith("  Note:")
    # a wrong answer or a skipped step is not explained: the learner is still to work it out, or chose not to
    assert "dividing by √d_k brings the variance back to 1" not in out
    assert lines.count(scores_why) == 1


def test_the_why_is_wrapped_at_words_on_a_narrow_ascii_terminal(cli):
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q", input="show\n",
                         env={"COLUMNS": "30", "PYTHONIOENCODING": "ascii"})
    assert code == 0
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  Each token asks"))
    why = []
    for line in lines[start:]:
        if not line.startswith("  ") or line.startswith("   "):
            break
        why.append(line.rstrip())
    assert all(len(line) <= 30 for line in why)
    assert " ".join(line.strip() for line in why) == ("Each token asks a question: its row of Q is what it looks for"
                                                       " in the other tokens.")


# --- stats and drill masks fit 20 columns ------------------------------------------------------------


@pytest.mark.parametrize("seed", range(1, 9))
def test_drill_masks_fits_20_columns_its_grids_split_by_columns(cli, seed):
    code, out, err = cli("drill", "masks", "--count", 4, "--seed", seed, "--show-answers", env={"COLUMNS": "20"})
    assert code == 0
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 20
    skip = "skip\n" * 4
    code, out, err = cli("drill", "masks", "--count", 4, "--seed", seed, input=skip, env={"COLUMNS": "20"})
    assert code == 0
    assert max(len(line.rstrip()) for line in out.splitlines() if "> " not in line) <= 20  # echoes are typed text


def test_a_mask_grid_too_wide_is_split_into_groups_of_columns_that_keep_every_cell(cli):
    # seed 1, question 2: sequence 2 of lengths (4, 2) padded at the start, causal; its additive mask has
    # -inf wherever the sequence's key is padding (k1, k2) or in the future, 0 at (q3, k3), (q4, k3), (q4, k4)
    wide = cli("drill", "masks", "--count", 2, "--seed", 1, "--show-answers", env={"COLUMNS": "100"}).out
    assert "    q3  -inf -inf    0 -inf" in wide.splitlines()
    narrow = cli("drill", "masks", "--count", 2, "--seed", 1, "--show-answers", env={"COLUMNS": "20"}).out.splitlines()
    at = narrow.index("  -inf removed):")
    assert [line.rstrip() for line in narrow[at + 1:at + 11]] == [
        "          k1   k2",
        "    q1  -inf -inf",
        "    q2  -inf -inf",
        "    q3  -inf -inf",
        "    q4  -inf -inf",
        "          k3   k4",
        "    q1  -inf -inf",
        "    q2  -inf -inf",
        "    q3     0 -inf",
        "    q4     0    0",
    ]


def test_stats_fits_20_columns_and_its_command_is_still_one_command_to_a_shell(cli, home):
    import subprocess

    from tutor.store import Store

    with Store.open(home / "progress.sqlite3") as store:  # practised on a long id: the next exercise is another one
        _record_many(store, [("decode-two-tokens-alignment", "q", 0, "wrong", 1, ("transposed",))])
    doc = json.loads(cli("stats", "--format", "json").out)
    command = doc["next"]["command"]
    for columns in (20, 24, 33):
        out = cli("stats", env={"COLUMNS": str(columns)}).out
        assert max(len(line.rstrip()) for line in out.splitlines()) <= columns
        lines = out.splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith("attn-tutor"))
        end = next(i for i in range(first, len(lines)) if not lines[i].endswith("\\"))
        typed = "\n".join(lines[first:end + 1])
        assert typed != command and typed.replace("\\\n", "") == command
        # what a POSIX shell reads from the lines as printed: the command's words
        words = subprocess.run(["sh", "-c", 'printf "%s|" ' + typed], capture_output=True, text=True, check=True).stdout
        assert words == "|".join(command.split()) + "|"


# --- explain: a list of places is never wrapped in the middle beside an entry ----------------------------


@pytest.mark.parametrize("columns", [60, 64, 70, 80, 90, 100])
def test_the_places_of_an_exact_entry_are_one_list_on_one_line(cli, columns):
    import re

    code, out, err = cli("explain", "single-head-3x4", "--backward", env={"COLUMNS": str(columns)})
    assert code == 0
    lines = out.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= columns
    place = r"\([a-z]+\d, [a-z]+\d\)"
    starts = [i for i, line in enumerate(lines) if re.match(r"^     \(", line)]  # a list of places starts at 5 spaces
    assert starts
    for i in starts:  # the whole list, ended by its colon, on the line it starts, an entry after it or below it
        if re.match(rf"^     {place}(?:, {place})*: ?", lines[i]):
            continue
        # wrapped only when the list alone is wider than the console: places to the end of the line, nothing else,
        # and the rest of the list on the next line
        assert re.fullmatch(rf"     {place}(?:, {place})*,", lines[i].rstrip()), lines[i]
        rest = lines[i + 1].rstrip()
        assert re.fullmatch(rf"     {place}(?:, {place})*:", rest), rest
        assert len(lines[i].rstrip()) + len(rest) - 4 > columns - 5
    # d_K (issue 20, E): its second entry's four places, one list, then that entry
    d_k = lines.index(next(line for line in lines if line.startswith("   d_K = ")))
    at = next(i for i in range(d_k, len(lines)) if lines[i].startswith("     (t2, d1), (t2, d2), (t3, d1), (t3, d2):"))
    assert "√2·exp(√2)/(1 + 2·exp(√2))^2 + 4√2·exp(2√2)/" in " ".join(line.strip() for line in lines[at:at + 4])


# --- make run (explain in a terminal) ends with the next step ------------------------------------------




def test_make_run_ends_with_the_command_that_practises_what_it_showed(cli):
    import shlex

    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    run = makefile.split("\nrun:")[1].splitlines()[1].strip()
    assert run.endswith("attn-tutor explain single-head-3x4")  # what make run does
    code, out, err = cli("explain", "single-head-3x4")
    assert (code, err) == (0, "")
    assert out.splitlines()[-2:] == ["Next: compute these steps yourself, each answer checked as you type it:",
                                     "  attn-tutor practice single-head-3x4"]
    argv = shlex.split(out.splitlines()[-1])[1:]
    code, out, err = cli(*argv, input="quit\n")  # the command does what the sentence says
    assert code == 0 and out.startswith("Practice: ") and "(single-head-3x4, steps to do: 7)" in " ".join(out.split())


@pytest.mark.parametrize(("argv", "command"), [
    (["two-head-causal-3x4", "--head", "2", "--backward"], "attn-tutor practice two-head-causal-3x4 --head 2 --backward"),
    (["single-head-3x4", "--tiled", "--block-size", "1"], "attn-tutor practice single-head-3x4 --tiled --block-size 1"),
    (["single-head-3x4", "--brief"], "attn-tutor practice single-head-3x4"),
])
def test_the_next_step_keeps_the_head_the_pass_and_the_blocks(cli, argv, command):
    import shlex

    code, out, err = cli("explain", *argv)
    assert code == 0
    assert out.splitlines()[-1] == "  " + command
    code, out, err = cli(*shlex.split(command)[1:], input="quit\n")
    assert code == 0 and "error" not in err


def test_the_next_step_quotes_a_path_and_fits_20_columns(cli, tmp_path):
    import shlex
    import subprocess

    folder = tmp_path / "my exercises"
    folder.mkdir()
    path = folder / "mine.yaml"
    path.write_text((REPO / "exercises" / "single-head-3x4.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    out = cli("explain", str(path), env={"COLUMNS": "200"}).out
    assert shlex.split(out.splitlines()[-1]) == ["attn-tutor", "practice", str(path)]
    out = cli("explain", str(path), env={"COLUMNS": "20"}).out
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 20
    lines = out.splitlines()
    first = max(i for i, line in enumerate(lines) if line.startswith("attn-tutor"))
    typed = "\n".join(lines[first:])
    words = subprocess.run(["sh", "-c", "set -- " + typed + '\nfor w in "$@"; do printf "%s|" "$w"; done'],
                           check=True, capture_output=True, text=True).stdout
    assert words == f"attn-tutor|practice|{path}|"


@pytest.mark.parametrize("fmt", ["json", "markdown"])
def test_a_document_has_no_next_step(cli, fmt):
    out = cli("explain", "single-head-3x4", "--format", fmt).out
    assert "attn-tutor practice" not in out


# --- 2e^√2: a power of e straight after a factor multiplies ----------------------------------------------


@pytest.mark.parametrize(("typed", "same_as"), [
    ("2e^√2", "2*exp(sqrt(2))"),
    ("2e^(√2)", "2*exp(sqrt(2))"),
    ("2E^2", "2*exp(2)"),
    ("2e**2", "2*exp(2)"),
    ("2e^-1", "2*exp(-1)"),
    ("(1 + 1)e^1", "2*exp(1)"),
    ("√2e^√2", "sqrt(2)*exp(sqrt(2))"),
    ("2e^√2/(1 + 2e^√2)", "2*exp(sqrt(2))/(1 + 2*exp(sqrt(2)))"),
])
def test_a_power_of_e_after_a_factor_is_a_product(typed, same_as):
    import sympy

    from tutor.answers.grammar import parse_entry

    got = parse_entry(typed)
    assert got.is_exact and sympy.simplify(got.expr - sympy.sympify(same_as)) == 0


@pytest.mark.parametrize(("typed", "value"), [("2e2", 200.0), ("2e-1^2", 0.04), ("2E+1", 20.0)])
def test_a_number_with_an_exponent_is_still_one(typed, value):
    from tutor.answers.grammar import parse_entry

    got = parse_entry(typed)
    assert not got.is_exact and got.value() == pytest.approx(value, rel=1e-15)


def test_e_alone_after_a_number_is_still_refused():
    from tutor.answers.grammar import parse_entry
    from tutor.base.errors import AnswerError

    with pytest.raises(AnswerError, match='unexpected "e" at column 2'):
        parse_entry("2e")
    with pytest.raises(AnswerError):
        parse_entry("2e√2")


def test_weights_typed_with_powers_of_e_are_right_in_practice(cli):
    row1 = "1/(1 + 2e^√2), e^√2/(1 + 2e^√2), e^√2/(1 + 2e^√2)"
    row2 = "1/(1 + 2e^(2√2)), e^(2√2)/(1 + 2e^(2√2)), e^(2√2)/(1 + 2e^(2√2))"
    code, out, err = cli("practice", "single-head-3x4", "--steps", "weights", input=f"{row1}; {row2}; {row2}\n")
    assert code == 0 and "✓ Right." in out and "Not an answer" not in out


# --- validate: did you mean, for a misspelt mask name ------------------------------------------------------


@pytest.mark.parametrize(("mask", "meant"), [
    ("casual", "causal"), ("Causal", "causal"), ("causal_lower_rigth", "causal_lower_right"),
    ("upper_left", "causal_upper_left"), ("nonee", "none"), ("banana", None),
    ("yes", None),  # YAML 1.1's boolean: its own hint, not a did-you-mean
])
def test_validate_suggests_the_mask_name_a_typo_stands_for(cli, tmp_path, mask, meant):
    text = (REPO / "exercises" / "two-head-causal-3x4.yaml").read_text(encoding="utf-8")
    assert "\nmask: causal\n" in text
    path = tmp_path / "ex.yaml"
    path.write_text(text.replace("\nmask: causal\n", f"\nmask: {mask}\n"), encoding="utf-8")
    code, out, err = cli("validate", str(path), "--format", "json")
    assert code == 2
    (problem,) = json.loads(out)["files"][0]["problems"]
    assert problem["field"] == "mask" and f"found the text '{mask}'" in problem["message"]
    if meant is None:
        assert "did you mean" not in problem["hint"]
    else:
        assert problem["hint"] == f"did you mean '{meant}'?"


# --- the resume message names the step as its prompt does ---------------------------------------------------


@pytest.mark.parametrize(("argv", "typed", "named"), [
    (["single-head-3x4"], "1 1; 2 2; 2 2\n" * 3 + "2 4 4; 4 8 8; 4 8 8\nskip\nskip\n", "step 7 of 7, head_1;"),
    (["two-head-causal-3x4", "--steps", "q"], "skip\n", "step 2 of 2, Q (head 2);"),
    (["gqa-four-heads-2x4", "--steps", "k"], "skip\n", "step 2 of 2, K (K/V head 2);"),
])
def test_the_resume_message_names_the_step_as_its_prompt_does(cli, argv, typed, named):
    code, out, err = cli("practice", *argv, input=typed + "quit\n")
    prompt = [line for line in out.splitlines() if "> quit" in line][0].split(">")[0]  # the step left at
    code, out, err = cli("practice", *argv, input="quit\n")
    said = " ".join(out.split())
    assert f"Resuming where your last session of these steps stopped: {named}" in said
    assert named.split(", ", 1)[1].rstrip(";") == prompt
    assert "head_output" not in said


# --- new: no all-zero row of V, no two equal columns of V --------------------------------------------------


@pytest.mark.parametrize("argv", [[], ["--heads", "2", "--mask", "causal"], ["--tokens", "4", "--d-model", "2"],
                                  ["--d-k", "3", "--mask", "padding"]], ids=lambda a: " ".join(a) or "default")
def test_new_draws_values_every_token_adds_to_and_columns_that_differ(cli, argv):
    import yaml

    for seed in range(12):  # the issue: 5 of 12 seeds drew an all-zero row of V, or equal columns
        code, out, err = cli("new", "--seed", seed, *argv)
        assert code == 0, err
        doc = yaml.safe_load(out)
        x = doc["x"]
        for h, head in enumerate(doc["heads"]):
            w_v, b_v = head["w_v"], head.get("b_v")
            v = [[sum(a * w_v[r][c] for r, a in enumerate(row)) + (b_v[c] if b_v else 0) for c in range(len(w_v[0]))]
                 for row in x]  # [L, d_v] = x·W_V (+ b_V), worked out here
            assert all(any(e != 0 for e in row) for row in v), (seed, h, v)
            columns = [tuple(col) for col in zip(*v)]
            assert len(set(columns)) == len(columns), (seed, h, v)


# --- a row wider than any answer could be is refused before any entry is read ----------------------------


COSTLY = "1/(1 + 2*exp(sqrt(2)))*exp(sqrt(3))/(1+exp(sqrt(5)))"  # a few ms to read, each


def _unread(monkeypatch):
    import tutor.answers.matrix as matrix

    def read(text):
        raise AssertionError(f"an entry was read: {text!r}")

    monkeypatch.setattr(matrix, "parse_entry", read)


def test_a_368_entry_line_for_a_2_column_step_is_refused_by_its_width(cli, monkeypatch):
    _unread(monkeypatch)
    line = " ".join([COSTLY] * 368)
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q", input=line + "\nquit\n")
    assert (code, err) == (0, "")
    said = " ".join(out.split())
    # Q is [3×2]; single-head-3x4's widest matrix is 4 wide (x, d_model = 4): 368 entries are no answer to it
    assert ("Not an answer: row 1 has 368 entries, more than any answer to this step could: it is [3×2], 2 per row."
            in said)


def test_a_later_row_of_another_width_is_refused_before_it_is_read(cli, monkeypatch):
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q",
                         input="1 1\n" + " ".join([COSTLY] * 3) + "\nquit\n")
    assert code == 0 and "row 2 has 3 entries, but row 1 has 2" in " ".join(out.split())


def test_answers_of_another_shape_up_to_the_widest_matrix_are_still_graded(cli):
    # Q transposed ([2×3]): graded, and the mistake named
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q", input="1 2 2; 1 2 2\nquit\n")
    assert code == 0 and "transposed" in out and "Not an answer" not in out
    # x itself ([3×4], as wide as d_model): a wrong shape, graded as one
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q", input="1 0 1 0; 0 2 0 2; 1 1 1 1\nquit\n")
    assert code == 0 and "Not an answer" not in out and "✗" in out
    # one entry wider than that: refused before it is read
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q", input="1 0 1 0 1; 0 2 0 2 1; 1 1 1 1 1\nquit\n")
    assert "row 1 has 5 entries, more than any answer to this step could: it is [3×2], 2 per row" in " ".join(out.split())


def test_the_counts_are_those_the_parser_reads():
    from tutor.answers import entry_counts, parse_matrix, parse_row

    for text in ["1 -1; 2 - 1 3", "[[1, 2], [3, 4]]", "1/(1 + 2) 3; sqrt(2) 2√2", "[1 2; 3 4]", "1, 2 + 3, 4"]:
        assert entry_counts(text) == [len(row) for row in parse_matrix(text)], text
    for text in ["[1, 1/2],", "1 -1", "exp(1) e^2 -inf"]:
        assert entry_counts(text, one_row=True) == [len(parse_row(text))], text


# --- check's messages never name the grader's absolute folder ------------------------------------------------


@pytest.mark.parametrize(("exercise", "said"), [
    ("../../elsewhere/x.yaml", "'../../elsewhere/x.yaml' is outside the folder of this file, the exercise packs"),
    ("missing.yaml", "no exercise file 'missing.yaml' (a relative path is taken from the folder of this file)"),
    ("bad.yaml", "'bad.yaml' is not a valid exercise file (3 problems) (`attn-tutor validate sub/bad.yaml` lists them)"),
])
def test_check_names_folders_only_as_the_grader_named_the_file(cli, tmp_path, monkeypatch, exercise, said):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "bad.yaml").write_text("id: broken\n", encoding="utf-8")
    (tmp_path / "sub" / "a.yaml").write_text(f"exercise: {exercise}\nq: [[1, 1], [2, 2], [2, 2]]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for fmt in ("rich", "json"):
        code, out, err = cli("check", "sub/a.yaml", "--format", fmt)
        assert code == 2
        assert str(tmp_path) not in out + err
        assert said in (err if fmt == "rich" else json.loads(out)["errors"][0]["text"])


# --- after a drill on a --bank topic, the command to review it keeps --bank ----------------------------------


def test_the_review_command_of_a_bank_topic_keeps_its_bank(cli, tmp_path):
    import shlex

    from .test_drill_bank import GOOD

    bank = tmp_path / "my bank"
    bank.mkdir()
    (bank / "mine.yaml").write_text(GOOD, encoding="utf-8")
    args = ["drill", "concepts", "--bank", bank, "--topic", "my-topic", "--count", 2, "--seed", 1, "--mode", "choice"]
    code, out, err = cli(*args, input="b\nb\n", env={"COLUMNS": "200"})
    assert code == 0, err
    review = [line.split("missed): ", 1)[1] for line in out.splitlines() if line.startswith("  • ") and "missed): " in line]
    mine = next(c for c in review if "--topic my-topic" in c)
    assert shlex.split(mine) == ["attn-tutor", "drill", "concepts", "--topic", "my-topic", "--bank", str(bank)]
    assert all("--bank" not in c for c in review if "--topic my-topic" not in c)  # a bundled topic needs none
    code, out, err = cli(*shlex.split(mine)[1:], "--count", 1, input="skip\n")  # the command runs the topic
    assert code == 0 and err == ""
    code, out, err = cli("drill", "concepts", "--topic", "my-topic")  # without the bank it does not exist
    assert code == 2 and "--topic" in err


# --- a bank file's errors speak of bank files ------------------------------------------------------------------


@pytest.mark.parametrize(("text", "said"), [
    ("", "the file is empty (a concept bank file needs a questions: list (see docs/concept-bank.md))"),
    ("topic: my-topic\n", "questions: required field is missing (a concept bank file needs questions"),
    (None, "questions[0].wrong_answers[0].why: required field is missing (every wrong answer needs why"),
    (None, "questions[0].key_points: required field is missing (every question needs key_points"),
    ("questions: []\n" + "#" * 1_000_001, "concept banks are far smaller than this; split or shorten the file"),
])
def test_a_bank_files_errors_speak_of_bank_files(cli, tmp_path, text, said):
    from .test_drill_bank import GOOD

    if text is None:
        text = (GOOD.replace("      - {answer: A wrong answer., why: Why it is wrong.}", "      - {answer: A wrong answer.}")
                if "wrong_answers" in said else GOOD.replace("    key_points: [the first point, the second point]\n", ""))
        assert text != GOOD
    (tmp_path / "mine.yaml").write_text(text, encoding="utf-8")
    code, out, err = cli("drill", "concepts", "--bank", tmp_path)
    assert code == 2 and out == ""
    assert said in err, err
    assert "an exercise" not in err and "w_q" not in err and "id: my-exercise" not in err


# --- a problem through an alias is reported where the alias is written ---------------------------------------


def test_a_duplicate_question_through_an_alias_is_reported_at_the_alias(cli, tmp_path):
    from .test_drill_bank import GOOD

    text = GOOD.replace("  - id: my-question", "  - &q\n    id: my-question") + "  - *q\n"
    lines = text.splitlines()
    alias_line = lines.index("  - *q") + 1
    id_line = lines.index("    id: my-question") + 1
    assert (id_line, alias_line) == (4, 13)
    (tmp_path / "mine.yaml").write_text(text, encoding="utf-8")
    code, out, err = cli("drill", "concepts", "--bank", tmp_path)
    assert code == 2
    assert err == (f"error: {tmp_path / 'mine.yaml'}:13:5: questions[1].id: the id my-question is already used in"
                   " this file, at line 4\n")


def test_a_bad_value_through_an_alias_is_reported_at_the_alias_too():
    from tutor.base.errors import ExerciseError
    from tutor.exercise.load import parse_exercise

    from .test_exercise import BASE

    text = BASE.replace("  - w_q: [[1, 0], [1, 0], [0, 1], [0, 1]]\n    w_k: [[1, 0], [1, 0], [0, 1], [0, 1]]\n",
                        "  - w_q: &w [[1, 0], [1, 0], [0, 1], [0, one]]\n    w_k: *w\n")
    assert "w_k: *w" in text
    with pytest.raises(ExerciseError) as info:
        parse_exercise(text, "f.yaml")
    assert [(p.line, p.column, p.field) for p in info.value.problems] == [
        (5, 42, "heads[0].w_q[3][1]"),  # where 'one' is written
        (6, 10, "heads[0].w_k[3][1]"),  # where the alias that repeats it is written, not at 'one' again
    ]


def test_an_alias_in_a_list_and_an_anchor_inside_an_alias():
    from tutor.exercise.yamlread import parse_yaml

    doc = parse_yaml("a: &x [1, &y [2, 3]]\nb: [*y, *x]\n", "f.yaml")
    assert doc.problems == []
    assert doc.where(("b", 0)) == (2, 5) and doc.where(("b", 1)) == (2, 9)
    assert doc.where(("b", 1, 1, 0)) == (2, 9)  # a part of the alias's value: at the alias
    assert doc.where(("a", 1, 0)) == (1, 15)  # the anchored value itself keeps its own places


# --- a 4,001-digit --seed is blamed on --seed -----------------------------------------------------------------


@pytest.mark.parametrize("argv", [["new"], ["new", "--like", "single-head-3x4"], ["drill", "shapes"],
                                  ["drill", "concepts"], ["drill", "interview"],
                                  ["practice", "single-head-3x4", "--fresh"]], ids=" ".join)
def test_a_seed_too_large_is_a_usage_error_of_seed(cli, argv):
    for digits in (20, 4001):
        code, out, err = cli(*argv, "--seed", "9" * digits, input="")
        assert code == 2 and out == ""
        assert err.splitlines() == ["error: invalid value for '--seed': Input should be less than or equal to"
                                    " 9223372036854775807", f"try 'attn-tutor {' '.join(argv[:2 if argv[0] == 'drill' else 1])} --help'"]


def test_the_largest_seed_writes_a_valid_exercise_whatever_its_shape(cli, tmp_path):
    import yaml

    biggest = str(2**63 - 1)
    for argv in (["--tokens", "12", "--d-model", "32", "--heads", "8", "--d-k", "4", "--mask", "causal_lower_right",
                  "--kv-heads", "8", "--cache", "4", "--alibi"], ["--like", "causal-left-padding-4x2"], []):
        code, out, err = cli("new", "--seed", biggest, *argv)
        assert code == 0, err
        exercise_id = yaml.safe_load(out)["id"]
        assert exercise_id.endswith("-s" + biggest) and len(exercise_id) <= 64
        path = tmp_path / "ex.yaml"
        path.write_text(out, encoding="utf-8")
        assert cli("validate", path).code == 0


# --- --export /dev/full, and a full disk, said in words --------------------------------------------------------


def test_export_to_a_device_names_it_and_says_what_it_is(cli):
    import os

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    for argv in (["--export", "/dev/full"], ["--export", "/dev/full", "--force"], ["--export", "/dev/full",
                                                                                   "--format", "markdown"]):
        code, out, err = cli("explain", "single-head-3x4", *argv)
        assert (code, out) == (2, "")
        assert err == ("error: /dev/full exists and is a device, not a regular file, so nothing is written to it,"
                       " even with --force; write to a file name\n")
    code, out, err = cli("explain", "single-head-3x4", "--export", "notes")  # a name without a suffix: named whole
    assert code == 2 and "cannot export to 'notes': the file name must end in one of" in err


def test_standard_output_on_dev_full_says_the_disk_is_full(cli_process):
    import os

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    for argv in (["explain", "single-head-3x4"], ["explain", "single-head-3x4", "--format", "markdown"], ["new"]):
        done = cli_process(*argv, redirect="> /dev/full")
        assert done.code == 2
        assert done.err == "error: cannot write the output: the disk is full (no space left on the device)\n"


@pytest.mark.parametrize("argv", [["new", "-o", "{dir}/ex.yaml"],
                                  ["explain", "single-head-3x4", "--export", "{dir}/h.md"]])
def test_a_file_on_a_full_disk_is_said_to_be_on_a_full_disk(cli, tmp_path, monkeypatch, argv):
    import errno
    import io
    import os

    target = argv[-1].format(dir=tmp_path)
    ours: set[int] = set()
    real_open, real_fdopen = os.open, os.fdopen

    def tracked(path, flags, mode=0o777, **kw):  # the descriptor of the file asked for
        fd = real_open(path, flags, mode, **kw)
        if str(path) == target:
            ours.add(fd)
        return fd

    class Full(io.RawIOBase):  # a disk with no space left
        def writable(self):
            return True

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "open", tracked)
    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **kw: io.BufferedWriter(Full()) if fd in ours
                        else real_fdopen(fd, *a, **kw))
    code, out, err = cli(*[a.format(dir=tmp_path) for a in argv])
    assert ours and code == 2
    assert err == f"error: cannot write {target}: the disk is full (no space left on the device)\n"

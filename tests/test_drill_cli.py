"""`attn-tutor drill …` from the command line: piped answers, the summary, the store and `stats`, seeds,
JSON for scripts, errors, Ctrl-C, narrow and ASCII terminals, and what a learner reads (golden files)."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

import pytest

from tutor.drills import inference, masks, shapes
from tutor.store import default_path

from .conftest import REPO, InterruptedInput

GOLDEN = REPO / "tests" / "golden"


def rows(home: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(default_path(home)) as conn:
        return conn.execute(sql).fetchall()


def golden(name: str, text: str) -> None:
    """Compare ``text`` with ``tests/golden/<name>`` (ATTN_TUTOR_GOLDEN=1 writes it: then read it before committing)."""
    import os

    path = GOLDEN / name
    if os.environ.get("ATTN_TUTOR_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


# --- a piped run ---------------------------------------------------------------------------------


def _shape_answers(seed: int, count: int) -> list[str]:
    """Right, then every other question wrong or shown, for a shapes run."""
    qs = shapes.questions(seed, count)
    answers = []
    for n, q in enumerate(qs):
        right = " ".join(str(v) for v in q.answer) if q.kind == "shape" else q.answer
        answers.append(right if n % 3 == 0 else "show" if n % 3 == 2 else (
            "[" + ", ".join(str(v) for v in reversed(q.answer)) + "]" if q.kind == "shape"
            else next(c.key for c in q.choices if not c.right)))
    return answers


def test_a_shapes_run_as_a_learner_reads_it(cli):
    answers = _shape_answers(11, 5)
    code, out, err = cli("drill", "shapes", "--seed", 11, "--count", 5, input="\n".join(answers) + "\n")
    assert (code, err) == (0, "")
    golden("drill-shapes-11.txt", out)
    assert "Right: 2 of 5; skipped: 0; not reached: 0." in out


def test_answers_are_saved_under_the_drill_namespace_and_practice_stats_leave_them_out(cli, home):
    qs = shapes.questions(11, 5)
    answers = _shape_answers(11, 5)
    cli("drill", "shapes", "--seed", 11, "--count", 5, input="\n".join(answers) + "\n")
    saved = rows(home, "SELECT exercise, step, head, outcome, attempt FROM answers ORDER BY id")
    assert saved == [("drill:shapes", f"drill:shapes:{q.topic}", None, outcome, 1)
                     for q, outcome in zip(qs, ["correct", "wrong", "shown", "correct", "wrong"], strict=True)]
    assert rows(home, "SELECT exercise, mode, ended IS NOT NULL FROM sessions") == [("drill:shapes", "drill", 1)]
    code, out, err = cli("stats", "--format", "json")
    doc = json.loads(out)
    assert (doc["sessions"], doc["answers"], doc["steps"], doc["mistakes"]) == (0, 0, [], [])
    assert doc["drills"]["answers"] == 5
    by_topic = {(t["drill"], t["topic"]): t for t in doc["drills"]["topics"]}
    assert sum(t["correct"] for t in by_topic.values()) == 2 and sum(t["graded"] for t in by_topic.values()) == 5
    assert all(r["command"] == "attn-tutor drill shapes" for r in doc["drills"]["review"])
    code, out, err = cli("stats")
    assert code == 0 and "Drills: 5 answers." in out and "Drill next:" in out


def test_a_practice_answer_is_still_counted_beside_drill_answers(cli):
    cli("practice", "single-head-3x4", "--steps", "q", input="1 1; 2 2; 2 2\n")
    cli("drill", "counts", "--seed", 1, "--count", 1, input="skip\n")
    doc = json.loads(cli("stats", "--format", "json").out)
    assert (doc["sessions"], doc["answers"]) == (1, 1)
    assert [s["step"] for s in doc["steps"]] == ["q"] and doc["drills"]["answers"] == 1


def test_a_wrong_answer_keeps_its_diagnosis(cli, home):
    q = inference.questions(5, 1)[0]  # what `drill counts` draws (every kind, issue 23)
    mistake = q.variants[0]
    code, out, _ = cli("drill", "counts", "--seed", 5, "--count", 1, input=f"{mistake.value}\n")
    assert code == 0 and mistake.message in " ".join(out.split())
    assert rows(home, "SELECT outcome, diagnosis, answer FROM answers") == [("wrong", mistake.key, str(mistake.value))]
    assert rows(home, "SELECT key, kind FROM mistakes") == [(mistake.key, "diagnosis")]  # the key, as practice keeps its own


def test_free_text_is_self_graded_point_by_point(cli, home):
    code, out, err = cli("drill", "concepts", "--topic", "scaling", "--seed", 1, "--count", 1,
                         input="the variance grows with d_k\ny\nmaybe\nn\ny\ny\n")
    assert (code, err) == (0, "")
    assert "Type y or n." in out and "Key points made: 3 of 4." in out and "Model answer:" in out
    assert rows(home, "SELECT step, outcome, answer FROM answers") == [
        ("drill:concepts:scaling", "wrong", "the variance grows with d_k")]  # not every key point made: a miss


@pytest.mark.parametrize(("drill", "answer"), [("masks", "1 0; 0 1"), ("counts", "12"), ("shapes", "1 2 3")])
def test_every_drill_runs_to_its_summary_on_piped_answers(cli, drill, answer):
    code, out, err = cli("drill", drill, "--seed", 3, "--count", 3, input=f"{answer}\nskip\nskip\n")
    assert (code, err) == (0, "")
    assert "Drill finished." in out and "skipped: 2" in out


# --- ways out ----------------------------------------------------------------------------------------


def test_end_of_input_ends_with_the_summary(cli):
    code, out, err = cli("drill", "masks", "--seed", 2, "--count", 4, input="")
    assert (code, err) == (0, "") and "End of input: drill ended." in out and "not reached: 4" in out


def test_quit_ends_with_the_summary(cli):
    code, out, _ = cli("drill", "shapes", "--seed", 2, "--count", 4, input="skip\nquit\n")
    assert code == 0 and "Drill ended." in out and "Right: 0 of 0; skipped: 1; not reached: 3." in out



def test_ctrl_c_ends_with_the_summary_and_keeps_the_answers(cli, home):
    code, out, err = cli("drill", "counts", "--seed", 2, "--count", 3, input=InterruptedInput("skip\n"))
    assert (code, err) == (0, "")
    assert "Interrupted: drill ended." in out and "skipped: 1; not reached: 2" in out
    assert rows(home, "SELECT outcome FROM answers") == [("skipped",)]


def test_a_run_installs_ctrl_c_and_restores_the_handler_it_found(cli):
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code, out, _ = cli("drill", "counts", "--seed", 2, "--count", 1, input=InterruptedInput(""))
        after = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 0 and "Interrupted" in out and after is signal.SIG_IGN


def test_a_closed_standard_input_is_an_error_before_anything_is_saved(cli_process, home):
    r = cli_process("drill", "shapes", "--seed", 1, redirect="<&-")
    assert r.code == 2 and "error:" in r.err and not default_path(home).exists()


@pytest.mark.parametrize("argv", [["drill", "shapes", "--count", "0"], ["drill", "counts", "--seed", "-1"],
                                  ["drill", "interview", "--minutes", "0"], ["drill", "concepts", "--mode", "essay"],
                                  ["drill", "masks", "--format", "yaml"], ["drill", "nope"]])
def test_bad_options_are_usage_errors(cli, argv):
    code, out, err = cli(*argv)
    assert code == 2 and "Traceback" not in err and err


def test_bad_options_with_format_json_print_the_error_document(cli):
    code, out, err = cli("drill", "shapes", "--count", "0", "--format", "json")
    assert code == 2 and json.loads(out)["error"] == "usage"


# --- for instructors and scripts ---------------------------------------------------------------------


@pytest.mark.parametrize("drill", ["shapes", "counts", "masks", "concepts"])
def test_the_same_seed_gives_the_same_questions(cli, drill):
    first = cli("drill", drill, "--seed", 9, "--show-answers", "--format", "json").out
    assert first == cli("drill", drill, "--seed", 9, "--show-answers", "--format", "json").out
    assert first != cli("drill", drill, "--seed", 10, "--show-answers", "--format", "json").out


@pytest.mark.parametrize("drill", ["shapes", "counts", "masks", "concepts"])
def test_json_without_show_answers_holds_no_answer(cli, home, drill):
    code, out, err = cli("drill", drill, "--seed", 4, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["answers"] is False
    for q in doc["questions"]:
        assert not {"answer", "answer_text", "explain", "key_points", "model_answer", "symbolic", "operation"} & set(q)
        assert all("right" not in c for c in q.get("choices", []))
    assert not default_path(home).exists()  # listing questions records nothing


def test_show_answers_for_people_is_a_quiz_key(cli):
    code, out, err = cli("drill", "masks", "--seed", 4, "--count", 3, "--show-answers")
    assert code == 0, err
    assert out.count("Answer:") == 3 and "seed 4" in out


def test_masks_json_carries_the_mask_in_its_convention(cli):
    doc = json.loads(cli("drill", "masks", "--seed", 6, "--count", 9, "--show-answers", "--format", "json").out)
    for q in doc["questions"]:
        if q["kind"] == "matrix" and q["convention"] == "additive":
            assert {v for row in q["answer"] for v in row} <= {0.0, "-inf"}
        elif q["kind"] == "matrix":
            assert {v for row in q["answer"] for v in row} <= {0.0, 1.0}
        assert {"B", "L_q", "L_k", "causal", "lengths"} <= set(q) or q["topic"] == "neg_1e9"


def test_interview_show_answers_json_has_every_section(cli):
    code, out, err = cli("drill", "interview", "--seed", 3, "--show-answers", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert [s["section"] for s in doc["sections"]] == ["shapes", "counts", "masks", "concepts"]
    assert doc["calculation"]["command"].startswith("attn-tutor practice ")
    assert all("answer" in q for s in doc["sections"] for q in s["questions"])


# --- terminals -----------------------------------------------------------------------------------------


def test_an_ascii_stream_gets_ascii(cli_encoded):
    answers = "\n".join(_shape_answers(11, 5)) + "\n"
    r = cli_encoded("drill", "shapes", "--seed", 11, "--count", 5, input=answers, encoding="ascii")
    assert r.code == 0, r.err
    assert r.stdout.isascii() and (b"sqrt" in r.stdout or b"[x]" in r.stdout)
    r = cli_encoded("drill", "masks", "--seed", 5, "--count", 3, input="skip\nskip\nskip\n", encoding="ascii")
    assert r.code == 0 and r.stdout.isascii()


def test_a_narrow_terminal_wraps_every_sentence(cli):
    answers = "\n".join(_shape_answers(11, 5)) + "\n"
    code, out, _ = cli("drill", "shapes", "--seed", 11, "--count", 5, input=answers, env={"COLUMNS": "30"})
    assert code == 0
    echoed = {line for line in out.splitlines() if "> " in line}  # the prompt and what was typed
    assert all(len(line) <= 30 for line in out.splitlines() if line not in echoed)
    code, out, _ = cli("drill", "counts", "--seed", 1, "--count", 2, input="skip\nskip\n", env={"COLUMNS": "20"})
    assert code == 0 and all(len(line) <= 20 for line in out.splitlines() if "> " not in line)


def test_verdicts_are_words_and_marks_not_colour(cli):
    answers = "\n".join(_shape_answers(11, 5)) + "\n"
    out = cli("drill", "shapes", "--seed", 11, "--count", 5, input=answers, env={"NO_COLOR": "1"}).out
    assert "\x1b[" not in out and "✓ Right." in out and "✗ Not quite." in out


@pytest.mark.parametrize("sub", ["shapes", "counts", "masks", "concepts", "interview"])
def test_every_drill_has_its_help(cli, sub):
    code, out, err = cli("drill", sub, "--help")
    assert code == 0 and out.lstrip().startswith(f"Usage: attn-tutor drill {sub}")
    for option in ("--seed", "--show-answers", "--format"):
        assert option in out


def test_masks_drill_asks_each_scenario_in_one_convention_and_shows_every_one(cli):
    qs = masks.questions(5, 9)
    shown = [q for q in qs if q.after]
    assert shown and all(q.kind == "matrix" for q in shown)
    assert all("F.scaled_dot_product_attention, boolean attn_mask (1 = True = may attend):" in q.after for q in shown)


def test_the_golden_files_are_in_the_repository():
    assert (GOLDEN / "drill-shapes-11.txt").is_file()
    assert Path(GOLDEN / "drill-interview-2.txt").is_file()

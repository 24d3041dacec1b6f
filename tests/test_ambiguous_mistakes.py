"""One answer, several mistakes that fit (issue 24 trial, F1, F5, F7): ONE error with several possible causes.

On single-head-3x4 (d_model = 4, one head with d_k = d_v = 2) dividing the scores by √d_model = √4, by d_k and by
d_v all give scores / 2.  practice said so; check's comment stated one cause as fact, the record and the class
view counted three mistakes, and the class view assigned single-head-asym-3x4, which ties the same way.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from tutor.base.messages import use_language
from tutor.exercise.catalog import resolve
from tutor.mistakes.diagnose import diagnose
from tutor.steps import solve

SCORES = [[2, 4, 4], [4, 8, 8], [4, 8, 8]]  # single-head-3x4's Q·Kᵀ (Q = K = [[1, 1], [2, 2], [2, 2]]), by hand
HALVED = [[x / 2 for x in row] for row in SCORES]  # scores / 2: √d_model = √4 = d_k = d_v = 2
UNSCALED = SCORES
RIGHT = [[f"{x}/sqrt(2)" for x in row] for row in SCORES]
GROUP = "scale_sqrt_d_model+scale_d_k+scale_constant"


def _write(folder: Path, name: str, scaled: list) -> None:
    doc = {"exercise": "single-head-3x4", "student": name, "scaled": scaled}
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")


def test_the_divisors_tie_on_the_classic_and_are_one_event():
    from tutor.mistakes.diagnose import event, group_key, members, tied

    ex = resolve("single-head-3x4")
    assert math.sqrt(ex.d_model) == ex.heads[0].d_k == ex.heads[0].d_v == 2  # why they tie
    found = diagnose(solve(ex), "scaled", 0, HALVED, tolerance=1e-9)
    assert [d.key for d in found][:3] == ["scale_sqrt_d_model", "scale_d_k", "scale_constant"]
    assert tied(found) == 3 and event(found) == GROUP and members(GROUP) == tuple(GROUP.split("+"))
    assert event(diagnose(solve(ex), "scaled", 0, UNSCALED, tolerance=1e-9)) == "no_scaling"
    assert event([]) is None and group_key(["a", "a"]) == "a"


def test_more_than_three_ties_are_all_named_in_practice():
    """two-head-causal-3x4: scores / 2 is √d_model = √4, d_k = 2, √d_out = √4 and num_heads = d_v = 2 -- four
    sentences, none dropped (practice stopped at three)."""
    from tutor.mistakes.diagnose import event
    from tutor.practice.worked import alike

    ex = resolve("two-head-causal-3x4")
    assert (ex.d_model, ex.heads[0].d_k, ex.d_out, ex.num_heads) == (4, 2, 4, 2)
    sol = solve(ex)
    right = np.array(sol.step("scaled", 0).value, dtype=np.float64)  # [3, 3]
    halved = (right * math.sqrt(2) / 2).tolist()  # scores / 2
    found = diagnose(sol, "scaled", 0, halved, tolerance=1e-9)
    assert alike(sol, sol.step("scaled", 0), found) == 4
    assert event(found) == GROUP


def test_checks_comment_names_every_cause_and_the_row_one_mistake(cli, tmp_path):
    _write(tmp_path, "bob", HALVED)
    for lang, opening, items in (
            ("en", "scaled is the first wrong step. Your answer matches 3 mistakes, which give the same numbers here, "
                   "so it cannot tell which one you made: (1) You divided by √d_model = √4;",
             ["(2) You divided by d_k = 2 instead of its square root", "(3) You divided the scores by d_v = d_out = 2"]),
            ("zh", "第一个错误的步骤是 scaled。你的答案与 3 种错误都吻合，它们在这里得出的数字相同，因此无法判断你犯的是哪一种：（1）你除以的是 √d_model = √4；",
             ["（2）你除以的是 d_k = 2，而不是它的平方根", "（3）你把注意力分数除以了 d_v = d_out = 2"])):
        res = cli("--lang", lang, "check", tmp_path / "bob.yaml", "--format", "csv")
        assert res.code == 1
        row = next(csv.DictReader(io.StringIO(res.out)))
        assert row["mistakes"] == GROUP
        assert row["comment"].startswith(opening) and all(i in row["comment"] for i in items)


@pytest.fixture
def class10(tmp_path) -> Path:
    folder = tmp_path / "class"
    folder.mkdir()
    for i in range(1, 6):
        _write(folder, f"s0{i}", HALVED)
    for i in range(6, 9):
        _write(folder, f"s0{i}", UNSCALED)
    _write(folder, "s09", RIGHT)
    _write(folder, "s10", RIGHT)
    return folder


def test_report_counts_the_tie_once_and_assigns_an_exercise_that_tells_them_apart(cli, class10, tmp_path):
    doc = json.loads(cli("report", class10, "--format", "json").out)["submissions"]
    assert [(m["key"], m["submissions"]) for m in doc["mistakes"]] == [(GROUP, 5), ("no_scaling", 3)]
    a = doc["assign"]
    assert a["mistake"] == GROUP and a["exercise"] not in ("single-head-3x4", "single-head-asym-3x4")
    assert a["apart"] == ["scale_sqrt_d_model", "scale_d_k"]
    told = resolve(a["exercise"])
    assert math.sqrt(told.d_model) != told.heads[0].d_k  # there √d_model and d_k are different divisors
    # single-head-asym-3x4 ties the same way: its own check of scores / 2 names the same three
    from tutor.mistakes.diagnose import event

    asym = solve(resolve("single-head-asym-3x4"))
    halved = (np.array(asym.step("scaled", 0).value, dtype=np.float64) * math.sqrt(2) / 2).tolist()
    assert event(diagnose(asym, "scaled", 0, halved, tolerance=1e-9)) == GROUP
    with use_language("en"):
        md = cli("report", class10, "--format", "markdown").out
    row = next(line for line in md.splitlines() if line.startswith("| one error"))
    assert row.endswith("| 5 | s01, at scaled |") and "divided by d\\_k instead of √d\\_k" in row
    assert sum("√d\\_model" in line for line in md.splitlines() if line.startswith("| ")) == 1  # one row, not three
    assert f"On exercise {a['exercise']}, divided by √d\\_model instead of √d\\_k and divided by d\\_k instead of " \
           "√d\\_k give different numbers" in md
    # the gradebook read back gives the same one row
    csv_path = tmp_path / "grades.csv"
    csv_path.write_text(cli("check", class10, "--format", "csv").out, encoding="utf-8")
    back = json.loads(cli("report", csv_path, "--format", "json").out)["submissions"]
    assert [(m["key"], m["submissions"]) for m in back["mistakes"]] == [(GROUP, 5), ("no_scaling", 3)]


def test_practice_records_one_answer_as_one_mistake(cli, tmp_path, home):
    res = cli("practice", "single-head-3x4", "--steps", "scaled", input="1 2 2; 2 4 4; 2 4 4\nquit\n")
    assert "this answer matches three mistakes" in res.out
    doc = json.loads(cli("stats", "--format", "json").out)
    assert [(m["key"], m["count"]) for m in doc["mistakes"]] == [(GROUP, 1)]
    with use_language("zh"):
        from tutor.practice.stats import mistake_name

        assert mistake_name(GROUP) == ("同一个错误，答案无法区分它的几种可能原因：除以了 √d_model，而不是 √d_k；"
                                       "或除以了 d_k，而不是 √d_k；或除以了错误的常数")
    folder = tmp_path / "progress"
    folder.mkdir()
    assert cli("stats", "--export", folder / "ann.json").code == 0
    exported = json.loads((folder / "ann.json").read_text(encoding="utf-8"))["mistakes"]
    assert [(m["key"], m["count"]) for m in exported] == [(GROUP, 1)]
    prog = json.loads(cli("report", folder, "--format", "json").out)["progress"]
    assert [(m["key"], m["learners"], m["count"]) for m in prog["mistakes"]] == [(GROUP, 1, 1)]


def test_a_store_written_before_keeps_its_keys_readable(cli, home):
    """Answers saved before the group key kept one row per key: still read, each named."""
    from tutor.store import Attempt, Store

    with Store.open(home / "progress.sqlite3") as store:
        s = store.begin_session("single-head-3x4", mode="matrix", tolerance=None)
        store.record(s, Attempt("single-head-3x4", "scaled", 0, "wrong", 1, 0, ("scale_sqrt_d_model", "scale_d_k"),
                                family=resolve("single-head-3x4").family))
    doc = json.loads(cli("stats", "--format", "json").out)
    assert sorted((m["key"], m["count"]) for m in doc["mistakes"]) == [("scale_d_k", 1), ("scale_sqrt_d_model", 1)]


def test_practice_says_four_ties_and_shows_them_all(cli):
    """Head 1 of two-head-causal-3x4: scores [[4, 0, 4], [0, 16, 8], [4, 8, 8]] (Q0 = K0 = [[2, 0], [0, 4], [2, 2]]),
    halved.  practice stopped at three sentences (and had no words for four)."""
    for lang, said in (("en", "Diagnosis: this answer matches 4 mistakes, which give the same numbers here:"),
                       ("zh", "诊断：这个答案与 4 种错误都吻合，它们在这里得出的数字相同：")):
        res = cli("--lang", lang, "practice", "two-head-causal-3x4", "--steps", "scaled", "--head", "1",
                  input="2 0 2; 0 8 4; 2 4 4\nquit\n")
        assert said in res.out
        after = res.out[res.out.index(said):].splitlines()
        assert sum(line.lstrip().startswith("•") for line in after) == 4


def test_check_of_one_file_names_the_tie_as_alternatives(cli, tmp_path):
    """``check FILE`` said "Diagnosis: You divided by √d_model ..." three times, each a cause stated as fact."""
    _write(tmp_path, "bob", HALVED)
    out = cli("check", tmp_path / "bob.yaml").out
    assert "Diagnosis: this answer matches three mistakes, which give the same numbers" in out
    assert out.count("Diagnosis:") == 1 and out.count("    • You divided") == 3


def test_causes_no_exercise_tells_apart_are_said_so():
    """Two causes no bundled exercise gives different numbers (looked for over all of them) are said to be so;
    dividing by d_k or by the wrong constant (d_v there: every bundled head has d_v = d_k) is not claimed either
    way, the family standing for every size at once."""
    from tutor.audit.batch import WRONG, Row
    from tutor.audit.classview import class_report
    from tutor.mistakes import invisible
    from tutor.render.report import _assign_sentence, report_document

    def assign(key):
        rows = [Row("a.yaml", "ann", "single-head-3x4", WRONG, "scaled", "scaled", (key,), 0, 1,
                    steps=(("scaled", False),), mistake_steps=("scaled",))]
        return report_document(class_report(rows), None)["submissions"]["assign"]

    a = assign("scale_d_k+scale_constant")
    assert a["step"] == "scaled" and a["apart"] == [] and not a["alike_everywhere"]
    # a pair looked for and split nowhere: at q neither scaling mistake is made, so no exercise gives them
    # different numbers there
    assert invisible.apart(["no_scaling", "scale_d_k"], "q", "single-head-3x4") is None
    rows = [Row("a.yaml", "ann", "single-head-3x4", WRONG, "q", "q", ("no_scaling+scale_d_k",), 0, 1,
                steps=(("q", False),), mistake_steps=("q",))]
    a = report_document(class_report(rows), None)["submissions"]["assign"]
    assert a["step"] == "q" and a["alike_everywhere"]
    with use_language("en"):
        assert _assign_sentence(a).endswith("No bundled exercise gives its possible causes different numbers there, "
                                            "so practice will not tell them apart either.")


def test_a_tiled_part_that_fits_two_mistakes_is_one_mistake_in_the_row(tmp_path):
    """The ``tiled:`` part's mistakes that fit its first wrong quantity: one key in the row, each named in the
    comment as a possibility (the comment stated the first as fact)."""
    from dataclasses import dataclass

    from tutor.audit.batch import from_reports
    from tutor.audit.solution import load_solution

    path = tmp_path / "t.yaml"
    path.write_text("exercise: single-head-3x4\nstudent: tia\nq: [[1, 1], [2, 2], [2, 2]]\n", encoding="utf-8")
    sf = load_solution(str(path))

    @dataclass(frozen=True)
    class Outcome:
        ok: bool
        diagnoses: tuple[tuple[str, str], ...]

    keys = ("tiled_no_rescale_acc", "tiled_no_rescale_l")
    row = from_reports(str(path), sf, None, Outcome(False, tuple((k, "") for k in keys)))
    assert row.mistakes == ("tiled_no_rescale_acc+tiled_no_rescale_l",) and row.mistake_steps == ("tiled",)
    with use_language("en"):
        said = str(row.comment)
    assert said.startswith("tiled is the first wrong step. Your answer fits 2 mistakes as written, so it cannot tell "
                           "which one you made: (1) You did not rescale acc") and "(2) You did not rescale l" in said

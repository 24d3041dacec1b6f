"""Bundled exercise ids are reserved (issue 8, second round, item e).

A pack or instructor file that uses a bundled id for another exercise was reported by ``list``, ``validate``
and every lookup by id, but read by its *path* it was explained, practised -- its answers stored under the bundled exercise's id,
mixed into its statistics -- and checked (a solution's ``exercise: copy.yaml``) as if it were the bundled
exercise, silently; and ``new --id single-head-3x4`` wrote such a file.  Each is now an error naming both files.
"""

from __future__ import annotations

import sqlite3

import pytest

from tutor.exercise.catalog import bundled_ids

from .conftest import EXERCISES

BOTH = "exercise id 'single-head-3x4' is defined twice: bundled:single-head-3x4.yaml and {second}"


@pytest.fixture
def shadow(tmp_path):
    """A pack file with the causal exercise's content and the classic exercise's id."""
    text = (EXERCISES / "two-head-causal-3x4.yaml").read_text()
    lines = [("id: single-head-3x4" if ln.startswith("id:") else ln) for ln in text.splitlines()]
    (tmp_path / "copy.yaml").write_text("\n".join(lines) + "\n")
    return tmp_path / "copy.yaml"


def test_bundled_ids_are_the_bundled_files():
    assert sorted(bundled_ids()) == sorted(p.stem for p in EXERCISES.glob("*.yaml"))


@pytest.mark.parametrize("args", [["explain", "{f}"], ["explain", "{f}", "--format", "json"],
                                  ["practice", "{f}"], ["practice", "{f}", "--steps", "q"]], ids=" ".join)
def test_a_file_with_a_bundled_id_is_refused_by_path_naming_both(cli, shadow, args):
    code, out, err = cli(*[a.format(f=shadow) for a in args], input="1 1; 2 2; 2 2\nquit\n")
    assert code == 2
    assert err.startswith("error: " + BOTH.format(second=shadow))
    assert "SHADOW" not in out and "Two heads" not in out


def test_practice_of_it_stores_nothing_under_the_bundled_id(cli, shadow, tmp_path):
    cli("practice", shadow, "--steps", "q", input="0 2; 4 0; 2 2\nquit\n")
    store = tmp_path / "home" / "progress.sqlite3"
    if store.exists():
        with sqlite3.connect(store) as db:
            assert db.execute("SELECT count(*) FROM answers").fetchone() == (0,)


def test_a_solution_naming_it_is_refused_naming_both(cli, shadow):
    (shadow.parent / "sol.yaml").write_text("exercise: copy.yaml\nq: [[1, 1], [2, 2], [2, 2]]\n")
    code, out, err = cli("check", shadow.parent / "sol.yaml")
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {shadow.parent / 'sol.yaml'}:1:11: exercise: " + BOTH.format(second="copy.yaml"))


def test_check_with_exercise_option_naming_it_is_refused(cli, shadow):
    (shadow.parent / "sol.yaml").write_text("exercise: single-head-3x4\nq: [[1, 1], [2, 2], [2, 2]]\n")
    code, _, err = cli("check", shadow.parent / "sol.yaml", "--exercise", shadow)
    assert code == 2 and BOTH.format(second=shadow) in err


def test_the_bundled_file_itself_by_path_is_fine(cli):
    code, out, err = cli("explain", EXERCISES / "single-head-3x4.yaml")
    assert (code, err) == (0, "") and "single-head-3x4" in out


@pytest.mark.parametrize("exercise_id", ["single-head-3x4", "two-head-causal-3x4"])
def test_new_refuses_a_bundled_id(cli, tmp_path, exercise_id):
    code, out, err = cli("new", "--id", exercise_id, "-o", tmp_path / "mine.yaml")
    assert code == 2 and not (tmp_path / "mine.yaml").exists()
    assert err.splitlines()[0] == (f"error: invalid value for --id: '{exercise_id}' is the id of a bundled exercise "
                                   f"(bundled:{exercise_id}.yaml); bundled ids are reserved: choose another")


def test_a_pack_id_that_is_not_bundled_is_fine_by_path(cli, tmp_path):
    text = (EXERCISES / "single-head-3x4.yaml").read_text().replace("id: single-head-3x4", "id: my-copy")
    (tmp_path / "mine.yaml").write_text(text)
    assert cli("explain", tmp_path / "mine.yaml").code == 0


@pytest.mark.parametrize("edit", [lambda s: s, lambda s: s.replace('title: "Three tokens', 'title: "My copy: three tokens')],
                         ids=["a faithful copy", "retitled"])
def test_a_copy_that_computes_the_same_is_the_same_exercise(cli, tmp_path, edit):
    """Re-written or retitled, the same inputs, weights and masks: nothing is shadowed (the torch parity
    tests write bundled exercises out this way)."""
    (tmp_path / "copy.yaml").write_text(edit((EXERCISES / "single-head-3x4.yaml").read_text()))
    code, out, err = cli("explain", tmp_path / "copy.yaml")
    assert (code, err) == (0, "")


def test_a_copy_with_one_weight_changed_is_refused(cli, tmp_path):
    text = (EXERCISES / "single-head-3x4.yaml").read_text()
    changed = text.replace("w_v: [[1, 0], [1, 0], [0, 1], [0, 1]]", "w_v: [[1, 0], [1, 0], [0, 1], [0, 2]]", 1)
    assert changed != text
    (tmp_path / "copy.yaml").write_text(changed)
    code, _, err = cli("explain", tmp_path / "copy.yaml")
    assert code == 2 and BOTH.format(second=tmp_path / "copy.yaml") in err

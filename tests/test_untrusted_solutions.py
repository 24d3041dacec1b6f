"""`check` on files that are not a student's solution (issue 8, second round, item 4).

An autograder runs ``check`` on a submission and returns the report to its author.  A submission may be a
symbolic link (a git repository or a tarball holds them) to a file the author cannot read, or not a
solution at all: such a file is refused, unread or unquoted.  The rule is the one ``exercise:`` follows
(``tutor.exercise.catalog.resolve_reference``), applied to the path on the command line itself.
"""

from __future__ import annotations

import json
import os

import pytest

SECRET = "vm-host-7f3a SECRET_TOKEN_abc hunter2"
SOLUTION = "exercise: single-head-3x4\nq: [[1, 1], [2, 2], [2, 2]]\n"


@pytest.fixture
def layout(tmp_path):
    """``outside/`` holds a private file; ``sub/`` is where a submission is checked."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "hostname").write_text(SECRET + "\n")
    (tmp_path / "outside" / "sol.yaml").write_text(SOLUTION)
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    return tmp_path


def no_secret(*texts: str) -> None:
    for text in texts:
        for word in SECRET.split():
            assert word not in text


@pytest.mark.parametrize("target", ["../outside/hostname", "ABS", "../outside/sol.yaml"])
@pytest.mark.parametrize("fmt", ["rich", "json"])
@pytest.mark.parametrize("exercise", [None, "single-head-3x4"])
def test_a_link_out_of_the_folder_is_not_read(cli, layout, target, fmt, exercise):
    """``hw.yaml -> /etc/hostname`` gave "found the text 'vm'".  Refused unread, even when the target is
    a valid solution (it is not the file the student handed in)."""
    link = layout / "sub" / "hw.yaml"
    link.symlink_to(str(layout / "outside" / "hostname") if target == "ABS" else target)
    args = ["check", str(link), "--format", fmt] + (["--exercise", exercise] if exercise else [])
    code, out, err = cli(*args)
    assert code == 2
    assert f"error: {link}: the file leads through a symbolic link outside its folder, so it is not read" in err
    assert err.count(str(layout)) == 1  # the file as named, and no folder besides (issue 20, E)
    no_secret(out, err)
    if fmt == "json":
        assert json.loads(out)["error"] == "input"


def test_a_chain_of_links_that_ends_outside_is_not_read(cli, layout):
    (layout / "sub" / "b.yaml").symlink_to("../outside/hostname")
    (layout / "sub" / "a.yaml").symlink_to("b.yaml")
    code, out, err = cli("check", str(layout / "sub" / "a.yaml"))
    assert code == 2 and "leads through a symbolic link outside its folder" in err
    no_secret(out, err)


def test_a_link_that_stays_in_the_folder_is_read(cli, layout):
    (layout / "sub" / "deeper" / "real.yaml").write_text(SOLUTION)
    (layout / "sub" / "hw.yaml").symlink_to("deeper/real.yaml")
    code, out, err = cli("check", str(layout / "sub" / "hw.yaml"))
    assert (code, err) == (0, "")


def test_a_relative_path_is_judged_from_the_folder_it_names(cli, layout, monkeypatch):
    monkeypatch.chdir(layout / "sub")
    os.symlink("../outside/hostname", "hw.yaml")
    code, out, err = cli("check", "hw.yaml")
    assert code == 2 and err.startswith("error: hw.yaml: the file leads through a symbolic link outside its folder, ")
    assert str(layout) not in err  # the folder the grader runs in is not said (issue 20, E)
    no_secret(out, err)


@pytest.mark.parametrize(("text", "what"), [
    ("db_password: hunter2\napi_key: SECRET_TOKEN_abc\n", "it has no 'exercise' field and none of the steps"),
    ('{"password": "hunter2", "token": "SECRET_TOKEN_abc"}\n', "it has no 'exercise' field and none of the steps"),
    ("vm-host-7f3a\n", "its top level is text, not a mapping of fields"),
    ("- hunter2\n- SECRET_TOKEN_abc\n", "its top level is a list, not a mapping of fields"),
    ("SECRET_TOKEN_abc=hunter2\nvm-host-7f3a=1\n", "its top level is text, not a mapping of fields"),
    ("1234\n", "its top level is a single value, not a mapping of fields"),
])
@pytest.mark.parametrize("exercise", [None, "single-head-3x4"])
def test_a_file_that_is_not_a_solution_is_refused_without_quoting_it(cli, tmp_path, text, what, exercise):
    path = tmp_path / "conf.yml"
    path.write_text(text)
    args = ["check", str(path), "--format", "json"] + (["--exercise", exercise] if exercise else [])
    code, out, err = cli(*args)
    assert code == 2
    assert err == (f"error: {path}:1:1: not a solution file: {what}; nothing of it is shown (a solution file needs "
                   "at least `exercise: ID` and one step, e.g. `scores: [[2, 4], [4, 8]]`)\n")
    no_secret(out, err)
    assert "db_password" not in out + err and "api_key" not in out + err


def test_an_unknown_key_beside_steps_is_named_and_the_steps_are_listed_alone(cli, tmp_path):
    path = tmp_path / "hw.yaml"
    path.write_text("exercise: single-head-3x4\nq: [[1, 1], [2, 2], [2, 2]]\nanswer_key: 3\n")
    code, out, err = cli("check", str(path))
    assert code == 2
    assert err == (f"error: {path}:3:1: answer_key: 'answer_key' is not a step name (the steps of this exercise are q, k, v, scores, scaled, weights, head_output, and those of its backward pass, d_output … d_x; besides them a solution file may have exercise, title, source, heads, student, tiled)\n")

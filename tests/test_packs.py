"""Exercise packs: `--exercises DIR` and `ATTN_TUTOR_PATH` add folders to the bundled one.

`list` shows where each exercise comes from; an id defined twice is a problem
naming both files (never silently shadowed); a broken file in a pack is
reported and the others are still listed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tutor.base.env import Env
from tutor.base.errors import ExerciseError, NotFoundError
from tutor.exercise.catalog import exercises, load_catalog, resolve, search_folders

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "exercises"
BUNDLED_IDS = sorted(p.stem for p in EXERCISES.glob("*.yaml"))
CLASH_HINT = "give one of them another id; an id must be unique across the bundled exercises and every pack"


def exercise_text(exercise_id: str, title: str = "My first exercise") -> str:
    text = (EXERCISES / "single-head-3x4.yaml").read_text()
    return text.replace("id: single-head-3x4", f"id: {exercise_id}").replace(
        'title: "Three tokens, d_model = 4, one head with d_k = 2"', f'title: "{title}"')


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    """A pack folder: one exercise at the top, one in a subfolder, a hidden CI folder and a solution file."""
    folder = tmp_path / "pack"
    (folder / "week2").mkdir(parents=True)
    (folder / ".github" / "workflows").mkdir(parents=True)
    (folder / "first.yaml").write_text(exercise_text("my-first"))
    (folder / "week2" / "second.yml").write_text(exercise_text("my-second", "Second"))
    (folder / ".github" / "workflows" / "ci.yml").write_text("on: push\njobs: {}\n")
    (folder / "first.solution.yaml").write_text("exercise: my-first\nq: [[1, 1], [2, 2], [2, 2]]\n")
    return folder


# --- the catalogue ------------------------------------------------------------------------


def test_a_pack_adds_its_exercises_with_their_source(pack):
    cat = load_catalog([pack])
    assert cat.problems == ()
    by_id = {e.exercise.id: e for e in cat.entries}
    assert sorted(by_id) == sorted(BUNDLED_IDS + ["my-first", "my-second"])
    assert by_id["my-first"].source == str(pack) and by_id["my-second"].file == pack / "week2" / "second.yml"
    assert by_id["single-head-3x4"].source == "bundled"
    assert [e.exercise.id for e in cat.entries] == sorted(by_id)


def test_a_clashing_id_is_reported_naming_both_files_not_shadowed(pack):
    (pack / "copy.yaml").write_text((EXERCISES / "single-head-3x4.yaml").read_text())
    cat = load_catalog([pack])
    assert [str(p) for p in cat.problems] == [
        f"{pack / 'copy.yaml'}: id: exercise id 'single-head-3x4' is defined twice: "
        f"bundled:single-head-3x4.yaml and {pack / 'copy.yaml'} ({CLASH_HINT})"
    ]
    assert [e.source for e in cat.find("single-head-3x4")] == ["bundled", str(pack)]  # both listed
    with pytest.raises(NotFoundError, match="defined twice: bundled:single-head-3x4.yaml and .*copy.yaml"):
        resolve("single-head-3x4", [pack])
    assert "single-head-3x4" not in [ex.id for ex in exercises([pack])]  # practice never picks an ambiguous id


def test_two_packs_clashing_with_each_other(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x.yaml").write_text(exercise_text("same"))
    (b / "y.yaml").write_text(exercise_text("same"))
    cat = load_catalog([a, b])
    assert [p.message for p in cat.problems] == [f"exercise id 'same' is defined twice: {a / 'x.yaml'} and {b / 'y.yaml'}"]


def test_a_broken_file_is_reported_and_the_others_are_still_listed(pack):
    (pack / "broken.yaml").write_text("id: broken\ntitle: T\nx: [[1, yes]]\n")
    cat = load_catalog([pack])
    assert [str(p) for p in cat.problems] == [
        f"{pack / 'broken.yaml'}:1:1: no weights: give 'heads' (per-head form) or 'num_heads' with w_q, w_k, w_v "
        "(fused form) (`attn-tutor new` writes a complete example to start from)",
        f"{pack / 'broken.yaml'}:3:9: x[0][1]: expected a number (integer, decimal, or a fraction such as \"1/3\"), "
        "found the text 'yes' (yes is text in YAML 1.2, not a boolean as in YAML 1.1; write a number)",
    ]
    assert {"my-first", "my-second"} <= {e.exercise.id for e in cat.entries}
    assert resolve("my-first", [pack]).id == "my-first"
    with pytest.raises(ExerciseError):  # the broken file by its path is an error, as before
        resolve(str(pack / "broken.yaml"))


def packs_of(value: str) -> tuple[Path, ...]:
    """The packs an Env reads from ``ATTN_TUTOR_PATH=value``."""
    return Env.from_environ({"ATTN_TUTOR_PATH": value}, stdin=None, stdout=None, stderr=None).packs


def test_env_path_adds_folders_separated_by_pathsep(tmp_path, pack):
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.yaml").write_text(exercise_text("from-env"))
    packs = packs_of(os.pathsep.join([str(pack), "", str(other)]))
    assert packs == (pack, other)
    assert [f.label for f in search_folders(packs)] == ["bundled", str(pack), str(other)]
    assert resolve("from-env", packs).id == "from-env" and resolve("my-first", packs).id == "my-first"
    assert {"from-env", "my-first"} <= {ex.id for ex in exercises(packs)}


def test_env_path_reaches_the_commands(tmp_path, pack, cli):
    code, out, err = cli("list", "--format", "json", env={"ATTN_TUTOR_PATH": str(pack)})
    assert (code, err) == (0, "") and {"my-first", "my-second"} <= {row["id"] for row in json.loads(out)}
    assert cli("explain", "my-first", "--format", "json", env={"ATTN_TUTOR_PATH": str(pack)}).code == 0
    assert cli("explain", "my-first", "--format", "json").code == 2  # not without it


def test_a_folder_given_twice_is_read_once(pack):
    cat = load_catalog([pack, *packs_of(str(pack))])  # --exercises pack, ATTN_TUTOR_PATH=pack
    assert cat.problems == () and len(cat.find("my-first")) == 1


def test_a_missing_env_folder_is_a_problem_not_a_crash(tmp_path):
    cat = load_catalog(packs_of(str(tmp_path / "nowhere")))
    assert [str(p) for p in cat.problems] == [
        f"{tmp_path / 'nowhere'}: exercise folder not found (check --exercises and ATTN_TUTOR_PATH "
        f"(folders separated by '{os.pathsep}'))"
    ]
    assert sorted(e.exercise.id for e in cat.entries) == BUNDLED_IDS


def test_without_packs_resolve_is_unchanged():
    assert resolve("single-head-3x4").source == "bundled:single-head-3x4.yaml"
    with pytest.raises(NotFoundError, match="no exercise 'nope'"):
        resolve("nope")


# --- the commands ------------------------------------------------------------------------


def test_list_shows_the_source_of_each_exercise(pack, cli, monkeypatch):
    monkeypatch.chdir(pack.parent)
    code, out, err = cli("list", "--exercises", "pack")
    assert (code, err) == (0, "")
    lines = [line.rstrip() for line in out.splitlines()]
    assert lines[0] == "Exercises (bundled and packs)"
    # at 100 columns the titles do not fit a table: two lines per exercise, the id never cut
    i = lines.index("my-first  pending 0/7  L=3 L_k=3 d_model=4 heads=1 mask=none  (pack)")
    assert lines[i + 1] == "  My first exercise"
    assert "my-second  pending 0/7  L=3 L_k=3 d_model=4 heads=1 mask=none  (pack)" in lines
    assert sum(1 for line in lines if line.endswith("(bundled)")) == len(BUNDLED_IDS)


def test_list_is_a_table_when_it_fits(pack, cli, monkeypatch):
    monkeypatch.chdir(pack.parent)
    code, out, _ = cli("list", "--exercises", "pack", env={"COLUMNS": "200"})
    lines = [line.rstrip() for line in out.splitlines()]
    header = next(line for line in lines if line.lstrip().startswith("status "))
    assert header.split() == ["status", "id", "title", "L", "L_k", "d_model", "heads", "mask", "source"]
    row = next(line for line in lines if " my-first " in line)
    assert row.split() == ["pending", "0/7", "my-first", "My", "first", "exercise", "3", "3", "4", "1", "none", "pack"]
    assert "…" not in out


@pytest.mark.parametrize("width", [40, 60, 80])
def test_list_never_cuts_an_id(pack, cli, width):
    code, out, _ = cli("list", "--exercises", str(pack), env={"COLUMNS": str(width)})
    assert code == 0 and "…" not in out
    for exercise_id in [*BUNDLED_IDS, "my-first", "my-second"]:
        assert any(line.startswith(exercise_id + " ") for line in out.splitlines()), exercise_id


def test_list_json_has_the_source(pack, cli):
    code, out, _ = cli("list", "--format", "json", "--exercises", str(pack))
    rows = {r["id"]: r for r in json.loads(out)}
    assert code == 0
    assert rows["my-first"]["source"] == str(pack) and rows["my-first"]["file"] == str(pack / "first.yaml")
    assert rows["single-head-3x4"]["source"] == "bundled"


def test_list_reports_pack_problems_on_stderr_and_still_lists(pack, cli):
    (pack / "copy.yaml").write_text((EXERCISES / "padding-4x2.yaml").read_text())
    (pack / "broken.yaml").write_text("id: [\n")
    code, out, err = cli("list", "--format", "json", "--exercises", str(pack))
    assert code == 0
    assert len(json.loads(out)) == len(BUNDLED_IDS) + 3  # the clashing copy is listed with its source
    assert err.splitlines() == [
        f"warning: {pack / 'broken.yaml'}:2:1: not valid YAML: did not find expected node content "
        "(check the brackets, quotes and indentation here and on the line before)",
        f"warning: {pack / 'copy.yaml'}: id: exercise id 'padding-4x2' is defined twice: "
        f"bundled:padding-4x2.yaml and {pack / 'copy.yaml'} ({CLASH_HINT})",
    ]


def test_list_without_packs_shows_every_bundled_exercise(cli):
    code, out, err = cli("list", "--format", "json")
    assert (code, err) == (0, "")
    rows = json.loads(out)
    assert sorted(r["id"] for r in rows) == BUNDLED_IDS and {r["source"] for r in rows} == {"bundled"}


def test_explain_finds_a_pack_exercise_by_id(pack, cli):
    code, out, _ = cli("explain", "my-second", "--exercises", str(pack), "--format", "json")
    assert code == 0
    assert json.loads(out)["exercise"]["source"] == str(pack / "week2" / "second.yml")


def test_explain_of_a_clashing_id_names_both_files(pack, cli):
    shutil.copy(EXERCISES / "single-head-3x4.yaml", pack / "copy.yaml")
    code, out, err = cli("explain", "single-head-3x4", "--exercises", str(pack))
    assert code == 2 and out == ""
    assert err == (f"error: exercise id 'single-head-3x4' is defined twice: bundled:single-head-3x4.yaml and "
                   f"{pack / 'copy.yaml'} ({CLASH_HINT})\n")


def test_exercises_option_must_be_a_folder(tmp_path, cli):
    code, _, err = cli("list", "--exercises", str(tmp_path / "nope"))
    assert code == 2 and "--exercises" in err

"""Fresh numbers (issue 11, item 5) and generated exercises that are not dull (item 2).

`new --like ID --seed S` and `practice ID --fresh --seed S`: the shape of ID,
new small integers.  The oracle is the exact engine on the file as the loader
reads it, and properties checked here by hand (integers, symmetry, rows).
"""

from __future__ import annotations

import sqlite3
from fractions import Fraction

import pytest

from tutor.authoring.draw import LEVELS
from tutor.authoring.generate import Spec, fresh, generate, like
from tutor.authoring.shape import shape_of
from tutor.base.errors import ShapeError
from tutor.exact.numbers import Rat
from tutor.exercise import load_exercise, validate_text
from tutor.exercise.catalog import bundled, resolve
from tutor.mistakes.invisible import uncaught
from tutor.steps import solve

from .conftest import EXERCISES, wrapped


def integers(step) -> list[int]:
    out = []
    for row in step.exact:
        for e in row:
            assert isinstance(e, Rat) and e.q.denominator == 1, (step.id, str(e))
            out.append(e.q.numerator)
    return out


def matrix(step) -> list[list[int]]:
    return [[e.q.numerator for e in row] for row in step.exact]


# --- new --like ------------------------------------------------------------------------------------------------


def test_new_like_two_head_causal_seed_3(cli, tmp_path):
    target = tmp_path / "fresh.yaml"
    code, out, err = cli("new", "--like", "two-head-causal-3x4", "--seed", "3", "-o", str(target))
    assert (code, out) == (0, "") and err.startswith(f"wrote {target} (id two-head-causal-3x4-s3)")
    assert cli("validate", "--no-notes", str(target))[0] == 0
    ex, original = load_exercise(str(target)), resolve("two-head-causal-3x4")
    assert (ex.L, ex.L_k, ex.d_model, ex.num_heads, ex.d_out) == (3, 3, 4, 2, 4)
    assert [(h.d_k, h.d_v) for h in ex.heads] == [(2, 2), (2, 2)]
    assert ex.mask_kind == "causal" and ex.allowed() == original.allowed()
    assert ex.query_labels == original.query_labels and ex.w_o is not None and len(ex.w_o) == 4
    sol = solve(ex)
    for h in range(2):
        for sid in ("q", "k", "v", "scores"):
            assert max(map(abs, integers(sol.step(sid, h)))) <= LEVELS[3].score_bound(2)
    # the numbers are new, and another seed gives others again
    assert ex.x != original.x or ex.heads != original.heads
    other = load_exercise_text(cli("new", "--like", "two-head-causal-3x4", "--seed", "4")[1])
    assert (other.x, other.heads, other.w_o) != (ex.x, ex.heads, ex.w_o)
    # the same seed, the same exercise
    assert cli("new", "--like", "two-head-causal-3x4", "--seed", "3")[1] == target.read_text(encoding="utf-8")


def load_exercise_text(text: str):
    v = validate_text(text, "fresh.yaml")
    assert v.ok, v.problems
    return v.exercise


@pytest.mark.parametrize("exercise_id", sorted(ex.id for ex in bundled()))
def test_like_keeps_the_shape_of_every_bundled_exercise(exercise_id):
    original = resolve(exercise_id)
    if original.mla is not None:  # format v3's latent: no fresh numbers yet, said in one line
        with pytest.raises(ShapeError, match="multi-head latent attention"):
            like(original, 0)
        return
    if original.is_v2:  # grouped K/V heads, a cache, a bias: no fresh numbers (format v2 is written by new's options)
        with pytest.raises(ShapeError, match="uses format v2"):
            like(original, 0)
        return
    for seed in range(6):
        v = validate_text(like(original, seed), "fresh.yaml")
        assert v.ok and v.warnings == (), v.problems
        ex = v.exercise
        assert shape_of(ex) == shape_of(original)  # tokens, sizes, heads, mask, key padding, biases, W_O
        assert ex.difficulty == (original.difficulty or 1)
        sol = solve(ex)
        for h in range(ex.num_heads):  # after a norm each row carries a square root: X is what stays whole
            for sid in ("q", "k", "v") + (("scores",) if ex.rope is None else ()) if not ex.has_norm else ():
                integers(sol.step(sid, h))
        if ex.has_norm:
            assert all(isinstance(e, Fraction) and e.denominator == 1 for row in ex.x for e in row)
        assert (ex.rope is None) == (original.rope is None)  # new --like keeps the rotation
        # distinguishing where the shape allows: only what the sizes force stays invisible
        forced = set()
        if any(hd.d_k == 1 for hd in ex.heads):
            forced.add("no_scaling")
        if any(hd.d_k == ex.d_model for hd in ex.heads):
            forced.add("scale_sqrt_d_model")
        if ex.rope is not None and any(hd.d_k == 2 for hd in ex.heads):  # one pair: both pairings, θ_0 = 1 either way
            forced |= {"rope_pairing_mixed", "rope_theta_without_two", "rope_half_interleaved_angles",
                       "rope_interleaved_half_angles"}
        assert {key for key, _ in uncaught(sol)} <= forced, (exercise_id, seed, uncaught(sol))


def test_like_writes_a_fused_exercise_in_the_fused_form(cli):
    """two-head-fused-3x4 is written with one w_q, w_k, w_v and fused biases: fresh numbers keep its form
    (and its "fused-form" tag stays true); each head is its d_k columns of the fused matrices."""
    text = cli("new", "--like", "two-head-fused-3x4", "--seed", "2")[1]
    assert "\nnum_heads: 2\nw_q: [[" in text and "\nheads:" not in text and "fused-form" in text
    ex = load_exercise_text(text)
    assert ex.fused and ex.num_heads == 2
    import yaml

    doc = yaml.safe_load(text)
    assert len(doc["w_q"]) == 4 and all(len(row) == 4 for row in doc["w_q"])  # [d_model, num_heads·d_k]
    for h, head in enumerate(ex.heads):
        assert [list(map(int, row)) for row in head.w_q] == [row[2 * h:2 * h + 2] for row in doc["w_q"]]
        assert [int(b) for b in head.b_q or ()] == doc["b_q"][2 * h:2 * h + 2]
    assert "b_k" not in doc and len(doc["b_v"]) == 4 and len(doc["b_o"]) == 4  # as in two-head-fused-3x4
    # a per-head exercise stays per-head
    assert "\nheads:\n" in cli("new", "--like", "single-head-asym-3x4", "--seed", "2")[1]


def test_like_refuses_shape_options_and_needs_an_exercise(cli):
    code, _, err = cli("new", "--like", "single-head-3x4", "--tokens", "4")
    assert code == 2 and "--like takes the shape from the exercise; leave out --tokens" in err
    code, _, err = cli("new", "--like", "no-such-exercise")
    assert code == 2 and "no-such-exercise" in err


# --- practice --fresh ---------------------------------------------------------------------------------------------


def test_practice_fresh_drills_the_numbers_new_like_writes_and_records_the_original_id(cli, home):
    ex = load_exercise_text(cli("new", "--like", "single-head-3x4", "--seed", "5")[1])
    q = matrix(solve(ex).step("q", 0))  # the right Q of the fresh numbers
    answer = "; ".join(" ".join(map(str, row)) for row in q)
    code, out, err = cli("practice", "single-head-3x4", "--fresh", "--seed", "5", "--steps", "q", input=answer + "\n")
    assert (code, err) == (0, "")
    assert "Fresh numbers (seed 5) for single-head-3x4" in out
    assert "✓ Right." in out
    store = home / "progress.sqlite3"
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT exercise FROM sessions").fetchall() == [("single-head-3x4",)]
    assert fresh(resolve("single-head-3x4"), 5).x == ex.x  # the library function behind --fresh


def test_a_fresh_session_begins_anew_not_where_an_unfinished_one_stopped(cli):
    """An unfinished session was on other numbers (or the exercise's own): --fresh never resumes it."""
    ex = load_exercise_text(cli("new", "--like", "single-head-3x4", "--seed", "5")[1])
    q = matrix(solve(ex).step("q", 0))
    answer = "; ".join(" ".join(map(str, row)) for row in q)
    code, out, _ = cli("practice", "single-head-3x4", "--fresh", "--seed", "5", input=answer + "\nquit\n")
    assert code == 0 and "Step 2 of 7: Keys K" in out  # one step done, then quit: unfinished
    code, out, _ = cli("practice", "single-head-3x4", input="quit\n")  # the plain session resumes it ...
    assert "Resuming where your last session of these steps stopped: step 2 of 7, K;" in " ".join(out.split())
    code, out, _ = cli("practice", "single-head-3x4", "--fresh", "--seed", "6", input="quit\n")  # ... a fresh one not
    assert code == 0 and "Step 1 of 7: Queries Q" in out and "Resuming" not in out


def test_practice_fresh_without_a_seed_says_which_it_drew(cli):
    code, out, _ = cli("practice", "single-head-3x4", "--fresh", "--steps", "q", input="quit\n")
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("Fresh numbers (seed "))
    seed = int(line.split("seed ")[1].split(")")[0])
    assert f"attn-tutor new --like single-head-3x4 --seed {seed}" in " ".join(out.split())


def test_the_command_shown_for_a_file_or_a_pack_names_it_so_that_it_runs(cli, tmp_path):
    """An exercise outside the bundle is found by its file (or with its pack): the `new --like` command
    that practice shows and that the written file records says so, and it writes the same exercise."""
    pack = tmp_path / "my pack"
    pack.mkdir()
    text = (EXERCISES / "single-head-asym-3x4.yaml").read_text(encoding="utf-8")
    (pack / "mine.yaml").write_text(text.replace("id: single-head-asym-3x4", "id: my-asym"), encoding="utf-8")
    path = str(pack / "mine.yaml")
    code, out, err = cli("practice", path, "--fresh", "--seed", "4", "--steps", "q", input="quit\n")
    assert (code, err) == (0, "")
    assert wrapped(f"`attn-tutor new --like '{path}' --seed 4`", path).search(out)  # quoted: the path has a space
    written = cli("new", "--like", path, "--seed", "4")[1]
    assert f"# Written by `attn-tutor new --like '{path}' --seed 4`;" in written
    by_id = cli("new", "--like", "my-asym", "--exercises", str(pack), "--seed", "4")[1]
    assert by_id.startswith(f"# Written by `attn-tutor new --like my-asym '--exercises={pack}' --seed 4`;\n")
    assert by_id.split("\n", 1)[1] == written.split("\n", 1)[1]  # the same numbers, found by id in the pack


def test_seed_without_fresh_is_a_usage_error(cli):
    code, _, err = cli("practice", "single-head-3x4", "--seed", "3")
    assert code == 2 and "--seed chooses the fresh numbers of --fresh; add --fresh" in err


# --- generated exercises are not dull unless asked -----------------------------------------------------------------


@pytest.mark.parametrize("seed", range(30))
def test_the_default_classic_size_is_not_dull(seed):
    ex = load_exercise_text(generate(Spec(seed=seed)))
    sol = solve(ex)
    q, k, v, s = (matrix(sol.step(sid, 0)) for sid in ("q", "k", "v", "scores"))
    assert len({tuple(r) for r in q}) == 3                # no two identical Q rows
    assert all(len(set(r)) > 1 for r in s)                # no row of equal scores (uniform weights)
    assert s != [list(c) for c in zip(*s)]                # K·Qᵀ ≠ Q·Kᵀ
    assert k != v                                         # weights·K ≠ weights·V
    assert uncaught(sol) == []


def test_allow_dull_keeps_the_first_numbers_within_bounds(cli):
    dull = [s for s in range(40)
            if (lambda q: len({tuple(r) for r in q}) < len(q))(matrix(solve(load_exercise_text(
                generate(Spec(seed=s, allow_dull=True)))).step("q", 0)))]
    assert dull, "some seed draws two identical Q rows when dull numbers are allowed"
    code, out, _ = cli("new", "--seed", str(dull[0]), "--allow-dull")
    assert code == 0 and "--allow-dull" in out.splitlines()[0]
    assert out == generate(Spec(seed=dull[0], allow_dull=True))


def test_new_notes_what_the_shape_cannot_catch(cli):
    code, out, err = cli("new", "--d-k", "4", "--seed", "1")  # d_k = d_model = 4: √d_model scaling is √d_k
    assert code == 0
    assert err == ("<new>: note: cannot catch dividing by √d_model instead of √d_k at scaled (d_model = d_k): "
                   "it gives the right values there (use a d_k other than d_model)\n")


@pytest.mark.parametrize("argv", [("new", "--like", "mqa-two-heads-3x4", "--seed", "1"),
                                  ("practice", "decode-one-token-cache-3", "--fresh", "--seed", "1")])
def test_fresh_numbers_of_a_v2_exercise_are_refused_in_one_line(cli, argv):
    """new --like and practice --fresh draw a v1 shape: on a v2 exercise they say so (exit 2), never
    writing or practising a v1 exercise under the v2 one's id."""
    code, out, err = cli(*argv, input="")
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "uses format v2" in err and "Traceback" not in err

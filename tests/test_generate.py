"""`attn-tutor new`: generated exercises validate, are deterministic, and keep Q, K, V and scores small integers.

The oracle is the exact engine (``tutor.steps.solve``), not the generator's
own arithmetic: the numbers a learner will compute are read off the worked
solution of the file as the loader reads it.
"""

from __future__ import annotations

import random
import re
from fractions import Fraction

import pytest
import yaml

from tutor.authoring.draw import LEVELS
from tutor.authoring.generate import Spec, generate
from tutor.authoring.spec import MASKS, default_id
from tutor.base.messages import t
from tutor.exact.numbers import Rat
from tutor.exercise import load_exercise, validate_text
from tutor.steps import solve


def specs(n: int, seed: int = 0, big: bool = False) -> list[Spec]:
    """``n`` random specs up to 6 tokens, d_model 6, 3 heads, d_k 4 (``big``: 8, 8, 4, 8)."""
    rng = random.Random(seed)
    top_tokens, top_d, top_heads, top_d_k = (8, 8, 4, 8) if big else (6, 6, 3, 4)
    out = []
    while len(out) < n:
        heads, d_k = rng.randint(1, top_heads), rng.randint(1, top_d_k)
        tokens, cross = rng.randint(1, top_tokens), rng.choice([None, None, 2, 3, top_tokens - 1])
        mask = rng.choice(MASKS)
        if mask == "padding" and (cross or tokens) < 2 or heads * d_k > 32:
            continue
        out.append(Spec(tokens=tokens, d_model=rng.randint(1, top_d), heads=heads, d_k=d_k, mask=mask, cross=cross,
                        seed=rng.randrange(10**6), difficulty=rng.choice([None, 1, 2, 3, 4, 5])))
    return out


def integers(step) -> list[int]:
    """The entries of an exact step, all of which must be integers."""
    out = []
    for row in step.exact:
        for e in row:
            assert isinstance(e, Rat) and e.q.denominator == 1, (step.id, str(e))
            out.append(e.q.numerator)
    return out


def claimed_ranges(text: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """The ranges the file's comment states for Q, K, V and for the scores."""
    comment = " ".join(line[2:] for line in text.splitlines() if line.startswith("# "))
    qkv = re.search(r"Q, K and V is an integer from (-?\d+)(?: to (-?\d+))?", comment)
    sc = re.search(r"every score Q K\^T an integer from (-?\d+)(?: to (-?\d+))?", comment)
    assert qkv and sc, comment

    def pair(m: re.Match) -> tuple[int, int]:
        return int(m[1]), int(m[2] if m[2] is not None else m[1])
    return pair(qkv), pair(sc)


@pytest.mark.parametrize("spec", specs(120) + specs(40, seed=1, big=True), ids=lambda s: f"{s.tokens}x{s.d_model}-h{s.heads}-dk{s.d_k}-{s.mask}-{s.cross}-{s.seed}")
def test_generated_exercises_validate_and_have_small_integer_q_k_v_scores(spec):
    text = generate(spec)
    v = validate_text(text, "gen.yaml")
    assert v.ok, [str(p) for p in v.problems]
    # the only warning a generated file gets: a causal mask on cross-attention, which no model runs
    causal_cross = spec.mask == "causal" and spec.cross is not None
    assert [w.message for w in v.warnings] == ([t("mask.causal_cross")] if causal_cross else [])
    ex = v.exercise
    assert (ex.L, ex.d_model, ex.num_heads, ex.heads[0].d_k, ex.L_k) == (spec.tokens, spec.d_model, spec.heads, spec.d_k, spec.L_k)
    sol = solve(ex)
    qkv = [n for h in range(ex.num_heads) for sid in ("q", "k", "v") for n in integers(sol.step(sid, h))]
    scores = [n for h in range(ex.num_heads) for n in integers(sol.step("scores", h))]
    # the comment in the file says what the ranges are; it must be true
    assert claimed_ranges(text) == ((min(qkv), max(qkv)), (min(scores), max(scores)))
    # small enough for paper: within the bounds of the difficulty
    assert max(map(abs, qkv)) <= LEVELS[spec.level].qkv
    assert max(map(abs, scores)) <= LEVELS[spec.level].score_bound(spec.d_k)


def test_difficulty_one_stays_within_its_bounds_for_the_classic_size():
    for seed in range(60):
        ex = validate_text(generate(Spec(seed=seed, difficulty=1))).exercise
        sol = solve(ex)
        qkv = [n for sid in ("q", "k", "v") for n in integers(sol.step(sid, 0))]
        scores = integers(sol.step("scores", 0))
        assert 0 <= min(qkv) and max(qkv) <= 2, seed
        assert 0 <= min(scores) and max(scores) <= 4, seed
        assert len(set(scores)) > 1, seed  # not a flat attention pattern


def test_same_seed_same_text_other_seed_other_numbers():
    a, b, c = generate(Spec(seed=11)), generate(Spec(seed=11)), generate(Spec(seed=12))
    assert a == b
    body = lambda s: s[s.index("x: "):]  # noqa: E731
    assert body(a) != body(c)


def test_masks_cross_attention_and_difficulty_end_up_in_the_file():
    causal = load_text(generate(Spec(tokens=4, mask="causal", seed=1)))
    assert causal.mask_kind == "causal" and causal.key_padding is None
    padded = load_text(generate(Spec(tokens=4, mask="padding", seed=1)))
    assert padded.key_padding == (True, True, True, False) and padded.query_labels[-1] == "PAD"
    cross = load_text(generate(Spec(tokens=2, cross=5, mask="padding", seed=1, difficulty=5)))
    assert cross.is_cross and cross.L_k == 5 and cross.key_labels[-1] == "PAD" and cross.difficulty == 5
    assert "cross-attention" in cross.tags


def load_text(text: str):
    v = validate_text(text, "gen.yaml")
    assert v.ok, v.problems
    return v.exercise


def test_every_field_has_a_comment_above_it():
    text = generate(Spec(tokens=3, heads=2, mask="causal", cross=2, seed=3))
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"[a-z_]+:", line):
            assert lines[i - 1].startswith("#"), line
    assert "can be worked out on paper" in " ".join(line[2:] for line in lines if line.startswith("# "))
    data = yaml.safe_load(text)  # plain YAML any tool can read
    assert data["id"] == default_id(Spec(tokens=3, heads=2, mask="causal", cross=2, seed=3))


def test_the_largest_exercise_is_generated():
    """At the size limits (how long it takes is measured in benchmarks/exact_limits.py, not here)."""
    ex = load_text(generate(Spec(tokens=16, d_model=32, heads=8, d_k=4, mask="causal", cross=16, seed=2, difficulty=5)))
    assert (ex.L, ex.d_model, ex.num_heads, ex.L_k) == (16, 32, 8, 16)


@pytest.mark.parametrize("spec, message", [
    (Spec(tokens=17), "tokens must be between 1 and 16"),
    (Spec(heads=8, d_k=8), "heads x d_k must be at most 32"),
    (Spec(mask="padding", tokens=1), "padding needs at least two keys"),
    (Spec(mask="sliding"), "mask must be one of"),
])
def test_specs_outside_the_limits_are_refused(spec, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        generate(spec)


def test_title_and_id_are_written_safely():
    text = generate(Spec(seed=1, id="my-first", title='He said "hi" \\ then\nleft'))
    ex = load_text(text)
    assert ex.id == "my-first" and ex.title == 'He said "hi" \\ then left'


# --- the command ------------------------------------------------------------------------


def test_new_prints_to_stdout_by_default(cli):
    code, out, err = cli("new", "--seed", "4")
    assert (code, err) == (0, "")
    assert out == generate(Spec(seed=4))


def test_new_writes_a_file_that_loads_and_validates(tmp_path, cli):
    target = tmp_path / "pack" / "mine.yaml"
    code, out, err = cli("new", "--tokens", "4", "--d-model", "3", "--heads", "2", "--d-k", "1",
                         "--mask", "causal", "--seed", "9", "--difficulty", "2", "-o", str(target))
    assert (code, out) == (0, "")
    assert err == (f"wrote {target} (id gen-4x3-h2-dk1-causal-s9); check it with `attn-tutor validate {target}`\n"
                   # d_k = 1: dividing by √d_k changes nothing, which the shape decides, not the numbers
                   f"{target}: note: cannot catch forgetting to divide by √d_k at scaled of head 1, scaled of head 2 "
                   "(√d_k = 1): it gives the right values there (use d_k > 1)\n")
    ex = load_exercise(str(target))
    assert (ex.L, ex.d_model, ex.num_heads, ex.mask_kind, ex.difficulty) == (4, 3, 2, "causal", 2)
    assert cli("validate", str(target))[0] == 0


def test_new_refuses_to_overwrite_without_force(tmp_path, cli):
    target = tmp_path / "x.yaml"
    target.write_text("mine\n")
    code, _, err = cli("new", "--seed", "1", "-o", str(target))
    assert code == 2
    assert err == f"error: {target} already exists; choose another file or add --force to overwrite it\n"
    assert target.read_text() == "mine\n"
    assert cli("new", "--seed", "1", "-o", str(target), "--force")[0] == 0
    assert target.read_text() == generate(Spec(seed=1))


def test_new_without_a_seed_writes_the_seed_it_used(cli):
    code, out, _ = cli("new")
    assert code == 0
    seed = int(re.search(r"--seed (\d+)`", out)[1])
    assert out == generate(Spec(seed=seed))


@pytest.mark.parametrize("args, message", [
    (["--heads", "8", "--d-k", "8"], "--heads 8 with --d-k 8 concatenate to 64 columns; the limit of d_out is 32"),
    (["--mask", "padding", "--tokens", "1"], "--mask padding needs at least two keys"),
    (["--id", "Not_A_Slug"], "the id must be lowercase letters"),
    (["--tokens", "17"], "--tokens"),
])
def test_new_rejects_bad_options_with_exit_2(args, message, cli):
    code, out, err = cli("new", "--seed", "1", *args)
    assert code == 2 and out == ""
    assert message in " ".join(err.replace("│", " ").split())  # typer's error box, unwrapped


def test_generated_values_are_exact_integers_as_written():
    text = generate(Spec(tokens=3, d_model=4, seed=21, difficulty=5))
    ex = load_text(text)
    data = yaml.safe_load(text)
    assert [[Fraction(v) for v in row] for row in data["x"]] == [list(r) for r in ex.x]


def test_default_titles_count_in_words_and_agree_with_their_numbers():
    """The title is the catalogue's (new.title*): number words up to eight, a noun that agrees with its number."""
    from tutor.authoring.spec import default_title

    assert default_title(Spec()) == "Three tokens, d_model = 4, one head with d_k = 2"
    assert default_title(Spec(tokens=12, heads=2, mask="causal")) == "12 tokens, d_model = 4, two heads with d_k = 2, causal mask"
    assert default_title(Spec(tokens=1, cross=1, mask="padding")) == (
        "One token, d_model = 4, one head with d_k = 2, cross-attention over 1 key, key padding")  # was "1 keys"
    assert default_title(Spec(cross=3)).endswith(", cross-attention over 3 keys")

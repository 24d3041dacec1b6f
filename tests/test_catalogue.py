"""The step catalogue holds for every kind, and nothing outside it re-derives a step.

* every kind has its functions for every engine (side by side in its
  family's module), its messages, and a place in the graph;
* the walks agree: ``solve`` gives the steps of ``keys(ex)`` in order, the
  float walk reproduces the exact values, ``verify`` reads every step back;
* outside ``tutor/steps/`` at most five comparisons of a step id remain,
  each with a comment; one ``softmax`` definition in the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from tutor.base.errors import TutorError
from tutor.base.messages import EN
from tutor.exercise.catalog import resolve
from tutor.steps import BACKWARD_IDS, CATALOGUE, KINDS, STEP_IDS, downstream, exists, inputs, keys, solve, upstream
from tutor.steps import replay as walk

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "tutor"

BUNDLED = sorted(p.stem for p in (REPO / "exercises").glob("*.yaml"))


@pytest.mark.parametrize("kind", CATALOGUE, ids=lambda k: k.id)
def test_every_kind_has_its_functions_and_messages(kind):
    engines = (kind.build, kind.floats, kind.slack, kind.production, kind.rounding)
    assert all(callable(f) for f in engines), kind.id
    # the exact walk follows the forward pass of format v1 (a cache's and a bias's kinds, the gradients: the floats decide)
    # and RoPE's (format v3): cos and sin in the exponents are not algebraic, the exact walk's values need them to be;
    # nor post-norm's out_norm: the root of a sum of exponentials is no exact-walk value (Walk.get raises NoExactForm)
    assert (kind.exact_walk is None) == (kind.backward or kind.id in ("k_new", "v_new", "biased", "q_rot", "k_rot",
                                                                      "out_norm")), kind.id
    assert {f.__module__ for f in (*engines, *([kind.exact_walk] if kind.exact_walk else []))} <= {
        kind.build.__module__, "tutor.steps.grad"}, kind.id  # side by side in the kind's own module
    for key in (f"step.{kind.id}.title", f"step.{kind.id}.why", f"practice.hint.{kind.id}"):
        assert key in EN, key
    assert kind.scope in ("head", "layer")
    assert set(kind.checks) <= {"row_sums", "weights_range", "masked_zero", "column_range"}


def test_steps_an_exercise_may_lack_say_why_in_a_solution_file():
    for kind in CATALOGUE:
        lacking = [ex for ex in BUNDLED if not kind.exists(resolve(ex))]
        if lacking:
            assert f"solution.no_step.{kind.id}" in EN, kind.id


def test_the_order_is_the_contract_order():
    forward = ("x_norm", "c_kv", "q", "k_new", "v_new", "k", "v", "q_rot", "k_rot", "scores", "q_absorbed",
               "scores_absorbed", "scaled", "biased", "masked", "weights", "head_output", "concat", "output", "residual",
               "out_norm")
    # k_new, v_new, biased: format v2; x_norm, residual: the pre-norm block (out_norm: post-norm's, last); c_kv,
    # q_absorbed, scores_absorbed: MLA;
    # q_rot, k_rot: format v3 (RoPE)
    backward = ("d_output", "d_concat", "d_w_o", "d_b_o", "d_head_output", "d_weights", "d_scaled", "d_v", "d_q_rot", "d_q",
                "d_k_rot", "d_k", "d_w_q", "d_w_k", "d_w_v", "d_b_q", "d_b_k", "d_b_v", "d_x", "d_x_kv")  # the contract's v2 section
    assert STEP_IDS == forward + backward


@pytest.mark.parametrize("name", BUNDLED)
def test_solve_gives_the_steps_of_keys_in_order_and_the_graph_is_closed(name):
    ex = resolve(name)
    sol = solve(ex)
    assert [s.key for s in sol.steps] == keys(ex)
    seen: set = set()
    for key in keys(ex):
        assert exists(ex, key)
        assert set(inputs(ex, key)) <= seen, key  # every input comes earlier
        seen.add(key)
    last = keys(ex)[-1]
    assert upstream(ex, last) == set(keys(ex)) - {last}  # the final step depends on every other
    assert downstream(ex, [keys(ex)[0]])[0] == keys(ex)[0]


@pytest.mark.parametrize("name", BUNDLED)
def test_with_the_backward_pass_the_graph_is_closed_and_the_walks_agree(name):
    ex = resolve(name)
    if ex.mla is not None:  # MLA's backward pass is not built: refused in one line, never half-shown
        with pytest.raises(TutorError, match="not built"):
            solve(ex, backward=True)
        return
    if ex.has_norm or ex.residual:  # the backward pass through the pre-norm block is refused in one line (issue 23)
        with pytest.raises(TutorError, match="backward pass through the pre-norm block"):
            solve(ex, backward=True)
        return
    sol = solve(ex, backward=True)
    assert [s.key for s in sol.steps] == keys(ex, backward=True)
    assert keys(ex, backward=True)[:len(keys(ex))] == keys(ex)  # the forward pass first, unchanged
    seen: set = set()
    for key in keys(ex, backward=True):
        assert exists(ex, key)
        assert set(inputs(ex, key)) <= seen, key
        seen.add(key)
    values = walk(ex, backward=True).values
    assert set(values) == {s.key for s in sol.steps}
    for s in sol.steps:
        np.testing.assert_allclose(values[s.key], np.array(s.value), rtol=1e-12, atol=1e-12, err_msg=str(s.key))


@pytest.mark.parametrize("name", BUNDLED)
def test_the_float_walk_reproduces_the_exact_engine(name):
    sol = solve(resolve(name))
    values = walk(sol.exercise).values
    assert set(values) == {s.key for s in sol.steps}
    for s in sol.steps:
        np.testing.assert_allclose(values[s.key], np.array(s.value), rtol=1e-12, atol=1e-12, err_msg=str(s.key))


# --- every kind through every engine, on exercises that have every feature -------------------------------


def _frac(rng: np.random.Generator, r: int, c: int) -> list[list[str]]:
    """An ``[r, c]`` matrix of small fractions, as an exercise file writes them."""
    return [[f"{int(n)}/{int(d)}" for n, d in zip(rn, rd)]
            for rn, rd in zip(rng.integers(-3, 4, (r, c)), rng.integers(1, 4, (r, c)))]


def every_feature_v1(seed: int):
    """Format v1 with everything it has: cross-attention (so ``d_x_kv``), two heads, each with ``b_q``,
    ``b_k``, ``b_v``; ``W_O`` and ``b_O``; a mask matrix and key padding that leave a query row with no key
    (a fully masked row); an ``upstream``."""
    from tutor.exercise import exercise_from_data

    rng = np.random.default_rng(seed)
    L, L_k, d_model, d_kv, d_k, H, d_out = 3, 4, 3, 2, 2, 2, 3
    mask = [[True, True, False, False], [True, True, True, False], [False, False, True, True]]
    data = {
        "id": f"every-feature-v1-{seed}", "title": "every v1 feature", "x": _frac(rng, L, d_model),
        "x_kv": _frac(rng, L_k, d_kv), "num_heads": H,
        "heads": [{"w_q": _frac(rng, d_model, d_k), "w_k": _frac(rng, d_kv, d_k), "w_v": _frac(rng, d_kv, d_k),
                   "b_q": _frac(rng, 1, d_k)[0], "b_k": _frac(rng, 1, d_k)[0], "b_v": _frac(rng, 1, d_k)[0]}
                  for _ in range(H)],
        "w_o": _frac(rng, H * d_k, d_out), "b_o": _frac(rng, 1, d_out)[0],
        "mask": mask, "key_padding_mask": [False, False, True, True],  # row 3 may attend to keys 3, 4 only: padding
        "upstream": rng.integers(-2, 3, (L, d_out)).tolist(),
    }
    return exercise_from_data(data)


def every_feature_v2(seed: int, alibi: bool):
    """Format v2 with everything it has: four query heads on two K/V heads, a KV cache with the decode
    step's causal mask (bottom-right), key padding, a bias (ALiBi, or a given ``attn_bias``), every
    projection bias, ``W_O`` and ``b_O``, an ``upstream``."""
    from tutor.exercise import exercise_from_data

    rng = np.random.default_rng(seed)
    L, past, d_model, d_k, H, G, d_out = 2, 2, 3, 2, 4, 2, 2
    data = {
        "id": f"every-feature-v2-{seed}", "title": "every v2 feature", "x": _frac(rng, L, d_model), "num_heads": H,
        "heads": [{"w_q": _frac(rng, d_model, d_k), "b_q": _frac(rng, 1, d_k)[0]} for _ in range(H)],
        "num_kv_heads": G,
        "kv_heads": [{"w_k": _frac(rng, d_model, d_k), "w_v": _frac(rng, d_model, d_k), "b_k": _frac(rng, 1, d_k)[0],
                      "b_v": _frac(rng, 1, d_k)[0]} for _ in range(G)],
        "past_tokens": [f"p{j}" for j in range(past)],
        "cache": [{"k": _frac(rng, past, d_k), "v": _frac(rng, past, d_k)} for _ in range(G)],
        "mask": "causal_lower_right", "key_padding_mask": [True, False, False, False],
        "w_o": _frac(rng, H * d_k, d_out), "b_o": _frac(rng, 1, d_out)[0],
        "upstream": rng.integers(-2, 3, (L, d_out)).tolist(),
    }
    if alibi:
        data["alibi"] = True
    else:
        data["attn_bias"] = [[f"{int(n)}/4" for n in row] for row in rng.integers(-2, 3, (L, past + L))]
    return exercise_from_data(data)


def every_feature_v3(seed: int):
    """Format v3's RoPE with everything it goes with: two heads of d_k = 4 (angles 1 and 1/100), rotate_half
    pairs, every projection bias, a mask matrix and key padding that leave a query row with no key, ``W_O`` and
    ``b_O``; forward and backward (the backward pass through RoPE: issue 23)."""
    from tutor.exercise import exercise_from_data

    rng = np.random.default_rng(seed)
    L, d_model, d_k, H, d_out = 3, 3, 4, 2, 2
    data = {
        "id": f"every-feature-v3-{seed}", "title": "every v3 RoPE feature", "x": _frac(rng, L, d_model),
        "heads": [{"w_q": _frac(rng, d_model, d_k), "w_k": _frac(rng, d_model, d_k), "w_v": _frac(rng, d_model, 2),
                   "b_q": _frac(rng, 1, d_k)[0], "b_k": _frac(rng, 1, d_k)[0], "b_v": _frac(rng, 1, 2)[0]}
                  for _ in range(H)],
        "w_o": _frac(rng, H * 2, d_out), "b_o": _frac(rng, 1, d_out)[0],
        "mask": [[True, False, False], [True, True, False], [False, False, True]],
        "key_padding_mask": [False, False, True],  # row 3 may attend to key 3 only, which is padding: no key
        "rope": {"base": 10000, "pairing": "half"},
    }
    return exercise_from_data(data)


def every_feature_mla(seed: int, cross: bool):
    """Multi-head latent attention (format v3) with what goes with it: two heads with ``b_q`` over a latent of
    width ``d_c = 2``, ``W_O`` and ``b_O``; with ``cross``, K and V from ``x_kv`` under a mask matrix and key
    padding that leave a query row with no key; else a causal mask and ALiBi (format v2's bias)."""
    from tutor.exercise import exercise_from_data

    rng = np.random.default_rng(seed)
    L, L_k, d_model, d_kv, d_c, d_k, H, d_out = 3, 4, 3, 2, 2, 2, 2, 3
    data = {
        "id": f"every-feature-mla-{seed}", "title": "every mla feature", "x": _frac(rng, L, d_model),
        "heads": [{"w_q": _frac(rng, d_model, d_k), "b_q": _frac(rng, 1, d_k)[0]} for _ in range(H)],
        "mla": {"d_c": d_c, "w_dkv": _frac(rng, d_kv if cross else d_model, d_c),
                "heads": [{"w_uk": _frac(rng, d_c, d_k), "w_uv": _frac(rng, d_c, d_k)} for _ in range(H)]},
        "w_o": _frac(rng, H * d_k, d_out), "b_o": _frac(rng, 1, d_out)[0],
    }
    if cross:
        data.update(x_kv=_frac(rng, L_k, d_kv), key_padding_mask=[False, False, True, True],
                    mask=[[True, True, False, False], [True, True, True, False], [False, False, True, True]])
    else:
        data.update(mask="causal", alibi=True)
    return exercise_from_data(data)


def every_feature_block(seed: int, norm: str, placement: str = "pre"):
    """The pre-norm block (issue 23) with what it is built with: ``norm`` with an ``norm_eps``, a residual, two
    heads with every projection bias, ``W_O`` and ``b_O``, a causal mask and key padding (self-attention of
    format v1; no backward pass); ``placement="post"``: post-norm (X + output normalized, ``out_norm``)."""
    from tutor.exercise import exercise_from_data

    rng = np.random.default_rng(seed)
    L, d_model, d_k, H = 3, 3, 2, 2
    data = {
        "id": f"every-feature-block-{seed}", "title": "every pre-norm block feature", "x": _frac(rng, L, d_model),
        "heads": [{"w_q": _frac(rng, d_model, d_k), "w_k": _frac(rng, d_model, d_k), "w_v": _frac(rng, d_model, d_k),
                   "b_q": _frac(rng, 1, d_k)[0], "b_k": _frac(rng, 1, d_k)[0], "b_v": _frac(rng, 1, d_k)[0]}
                  for _ in range(H)],
        "w_o": _frac(rng, H * d_k, d_model), "b_o": _frac(rng, 1, d_model)[0],
        "mask": "causal", "key_padding_mask": [False, True, False],
        "norm": norm, "norm_eps": "1/8", "residual": True, "norm_placement": placement,
    }
    if placement == "post":
        data["id"] = f"every-feature-post-norm-{seed}"
    return exercise_from_data(data)


def _bw(ex) -> bool:
    """Whether the exercise has a backward pass the tests walk (MLA's and the pre-norm block's are refused; RoPE's is
    built, issue 23)."""
    return ex.mla is None and not (ex.has_norm or ex.residual)


EVERY_FEATURE = [("v1", lambda: every_feature_v1(1)), ("v2-alibi", lambda: every_feature_v2(2, True)),
                 ("v2-bias", lambda: every_feature_v2(3, False)), ("v3-rope", lambda: every_feature_v3(4)),
                 ("mla-cross", lambda: every_feature_mla(4, True)), ("mla-alibi", lambda: every_feature_mla(5, False))]


def test_the_every_feature_exercises_have_every_kind():
    """Between them the generated exercises have every kind of the catalogue, forward and backward."""
    made = [make() for _, make in EVERY_FEATURE]
    walked = {k for ex in made for k, _ in keys(ex, backward=_bw(ex))}
    walked |= {k for k, _ in keys(every_feature_block(4, "layernorm"))}  # forward only: no backward through a norm
    walked |= {k for k, _ in keys(every_feature_block(4, "rmsnorm", "post"))}  # post-norm's out_norm
    assert walked == set(STEP_IDS)
    v1 = every_feature_v1(1)
    assert v1.is_cross and v1.has_mask and v1.key_padding is not None and not v1.is_v2
    assert any(not any(row) for row in v1.allowed())  # a query row with no key to attend


def test_the_step_list_of_list_is_the_catalogue():
    """``attn-tutor list`` counts an exercise's steps with :mod:`tutor.authoring.steplist` (it loads no
    catalogue): its table is the forward kinds in order, and it gives :func:`keys` on every bundled
    exercise, every generated golden one and the every-feature ones."""
    from tutor.authoring.steplist import EARLY, FORWARD_STEPS, forward_keys
    from tutor.exercise.load import load_exercise

    forward = [(k.id, k.scope) for k in CATALOGUE if k.id not in BACKWARD_IDS]
    assert [(id, scope) for id, scope, _ in FORWARD_STEPS] == forward, "tutor/authoring/steplist.py: FORWARD_STEPS"
    assert EARLY == {k.id for k in CATALOGUE if k.early}, "tutor/authoring/steplist.py: EARLY"  # one notion of early
    golden = sorted((REPO / "tests" / "golden" / "generate").glob("*.yaml"))
    assert len(golden) > 50
    exercises = ([resolve(name) for name in BUNDLED] + [load_exercise(str(p)) for p in golden]
                 + [make() for _, make in EVERY_FEATURE] + [every_feature_block(4, "layernorm")]
                 + [every_feature_block(4, "rmsnorm", "post")])
    for ex in exercises:
        assert forward_keys(ex) == keys(ex), (ex.id, "tutor/authoring/steplist.py")
    has = [{id for id, _ in forward_keys(ex)} for ex in exercises]
    assert set.union(*has) == {id for id, _ in forward}  # each step is there somewhere...
    assert set.union(*has) - set.intersection(*has) == {"k_new", "v_new", "biased", "masked", "concat", "output",
                                                        "q_rot", "k_rot", "c_kv", "q_absorbed", "scores_absorbed", "x_norm",
                                                        "residual", "out_norm"}
    # ... and each step an exercise may lack is missing somewhere


@pytest.mark.parametrize("make", [m for _, m in EVERY_FEATURE], ids=[n for n, _ in EVERY_FEATURE])
def test_every_kind_goes_through_every_engine(make):
    """Every step of the exercise, forward and backward, through each engine of its kind: the exact build
    (solve), the float walk (it reproduces the exact values), the slack ``check`` carries (finite, the shape
    of the step), the batched layer's reading within its rounding bound (verify), and, where the exact walk
    follows the exercise, the exact walk (it gives the exact engine's values)."""
    from tutor.exact.matrices import entry_value
    from tutor.production import verify
    from tutor.steps import RIGHT, Walk, replay, supports

    ex = make()
    backward = _bw(ex)
    sol = solve(ex, backward=backward)
    assert [s.key for s in sol.steps] == keys(ex, backward=backward)
    values = walk(ex, backward=backward).values
    for s in sol.steps:
        np.testing.assert_allclose(values[s.key], np.array(s.value), rtol=1e-12, atol=1e-12, err_msg=str(s.key))
    carried = replay(ex, given=lambda key: None, backward=backward)
    for s in sol.steps:
        value, slack = carried.computed[s.key]
        assert slack.shape == value.shape and np.all(np.isfinite(slack)), s.key
    verify(sol)  # raises EngineMismatchError at the first step the batched layer disagrees on
    if supports(RIGHT, ex):
        exact = Walk(ex, RIGHT)
        for s in sol.steps:
            if KINDS[s.id].backward:
                continue
            got = exact.get(s.key)
            assert got is not None, s.key
            np.testing.assert_allclose([[entry_value(e) for e in row] for row in got], np.array(s.value),
                                       rtol=1e-12, atol=1e-12, err_msg=str(s.key))


@pytest.mark.parametrize("make", [m for _, m in EVERY_FEATURE], ids=[n for n, _ in EVERY_FEATURE])
def test_every_mistake_walks_every_kind_it_can_change(make):
    """Every misconception of the catalogue, at every step it can change: the float walk gives a value of a
    sane shape or none (a step the mistake cannot reach), never an error; and where the exact walk follows
    the mistake, it gives what the float walk does (to 1e-9; the shape only for a mistake that rounds)."""
    from tutor.exact.matrices import entry_value
    from tutor.mistakes.diagnose import MISCONCEPTIONS
    from tutor.steps import Walk, replay, supports

    ex = make()
    backward = _bw(ex)
    sol = solve(ex, backward=backward)
    for m in MISCONCEPTIONS:
        if m.variant is None:
            continue
        floats = replay(ex, m.variant, backward=backward).values
        exact = Walk(ex, m.variant) if supports(m.variant, ex) else None
        for key in keys(ex, backward=backward):
            if not m.applies(ex, key) or key not in floats:
                continue
            assert floats[key].ndim == 2, (m.key, key)
            if exact is not None and not KINDS[key[0]].backward:
                got = exact.get(key)
                assert got is not None, (m.key, key)
                if m.variant.turned() & {"round_scaled", "round_weights", "truncate"}:
                    # rounding is discontinuous: a weight of 0.99999999… (exact) is 1.0 in floats, and cut to
                    # 2 places they differ by 0.01; the exact walk is the one that is right there
                    assert np.array(got, dtype=object).shape == floats[key].shape, (m.key, key)
                    continue
                with np.errstate(invalid="ignore"):
                    np.testing.assert_allclose([[entry_value(e) for e in row] for row in got], floats[key],
                                               rtol=1e-9, atol=1e-9, err_msg=f"{m.key} {key}")
    assert sol.steps


@pytest.mark.parametrize("norm", ["rmsnorm", "layernorm"])
def test_the_pre_norm_block_goes_through_every_engine(norm):
    """The block's exercise forward (its backward pass is refused): the exact build, the float walk, the slack
    ``check`` carries, the batched layer within its rounding bound, the exact walk; and every mistake's float
    walk against its exact walk, as :func:`test_every_mistake_walks_every_kind_it_can_change` does."""
    from tutor.exact.matrices import entry_value
    from tutor.mistakes.diagnose import MISCONCEPTIONS
    from tutor.production import verify
    from tutor.steps import RIGHT, Walk, replay, supports

    ex = every_feature_block(4, norm)
    sol = solve(ex)
    assert [s.key for s in sol.steps] == keys(ex) and keys(ex)[0] == ("x_norm", None) and keys(ex)[-1] == ("residual", None)
    values = walk(ex).values
    for s in sol.steps:
        np.testing.assert_allclose(values[s.key], np.array(s.value), rtol=1e-12, atol=1e-12, err_msg=str(s.key))
    carried = replay(ex, given=lambda key: None)
    for s in sol.steps:
        value, slack = carried.computed[s.key]
        assert slack.shape == value.shape and np.all(np.isfinite(slack)), s.key
    verify(sol)
    assert supports(RIGHT, ex)
    exact = Walk(ex, RIGHT)
    for s in sol.steps:
        got = exact.get(s.key)
        assert got is not None, s.key
        np.testing.assert_allclose([[entry_value(e) for e in row] for row in got], np.array(s.value),
                                   rtol=1e-12, atol=1e-12, err_msg=str(s.key))
    turned = set()
    for m in MISCONCEPTIONS:
        if m.variant is None:
            continue
        floats = replay(ex, m.variant).values
        mistaken = Walk(ex, m.variant) if supports(m.variant, ex) else None
        for key in keys(ex):
            if not m.applies(ex, key) or key not in floats:
                continue
            if mistaken is None or m.variant.turned() & {"round_scaled", "round_weights", "truncate"}:
                continue
            got = mistaken.get(key)
            assert got is not None, (m.key, key)
            turned |= m.variant.turned()
            with np.errstate(invalid="ignore"):
                np.testing.assert_allclose([[entry_value(e) for e in row] for row in got], floats[key],
                                           rtol=1e-9, atol=1e-9, err_msg=f"{m.key} {key}")
    assert {"norm_axis", "residual"} <= turned


@pytest.mark.parametrize("norm", ["rmsnorm", "layernorm"])
def test_the_post_norm_block_goes_through_every_engine(norm):
    """Post-norm (issue 23): the projections read X, ``out_norm`` last; the exact build against the float walk,
    the slack ``check`` carries, the batched layer within its rounding bound (``verify``); the exact walk
    follows every step but out_norm, of which it says NoExactForm (every time it is asked)."""
    from tutor.exact.matrices import entry_value
    from tutor.production import verify
    from tutor.steps import RIGHT, NoExactForm, Walk, replay

    ex = every_feature_block(4, norm, "post")
    sol = solve(ex)
    assert keys(ex)[0] == ("q", 0) and keys(ex)[-2:] == [("residual", None), ("out_norm", None)]
    assert "x_norm" not in {k for k, _ in keys(ex)} and sol.step("q", 0).operands[0].name == "X"
    values = walk(ex).values
    for s in sol.steps:
        np.testing.assert_allclose(values[s.key], np.array(s.value), rtol=1e-12, atol=1e-12, err_msg=str(s.key))
    carried = replay(ex, given=lambda key: None)
    for s in sol.steps:
        value, slack = carried.computed[s.key]
        assert slack.shape == value.shape and np.all(np.isfinite(slack)), s.key
    verify(sol)
    exact = Walk(ex, RIGHT)
    for s in sol.steps[:-1]:
        got = exact.get(s.key)
        assert got is not None, s.key
        np.testing.assert_allclose([[entry_value(e) for e in row] for row in got], np.array(s.value),
                                   rtol=1e-12, atol=1e-12, err_msg=str(s.key))
    for _ in range(2):
        with pytest.raises(NoExactForm):
            exact.get(("out_norm", None))


def test_exists_refuses_keys_the_exercise_has_not():
    ex = resolve("single-head-3x4")  # one head, no mask, no W_O
    assert exists(ex, ("q", 0)) and not exists(ex, ("q", 1)) and not exists(ex, ("q", None))
    assert not exists(ex, ("masked", 0)) and not exists(ex, ("concat", None)) and not exists(ex, ("output", None))
    assert not exists(ex, ("nonsense", 0))


# --- nothing outside the catalogue re-derives a step -------------------------------------------------


def _names_an_id(node: ast.expr) -> bool:
    """``step.id``, ``g.id``, ``id``, ``step_id``, ``sid``, ``key[0]``: an expression that holds a step id."""
    if isinstance(node, ast.Attribute):
        return node.attr == "id"
    if isinstance(node, ast.Name):
        return node.id in ("id", "step_id", "sid")
    if isinstance(node, ast.Subscript):  # key[0], src[0]
        return isinstance(node.slice, ast.Constant) and node.slice.value == 0
    return False


def _step_id_comparisons() -> list[tuple[Path, int, str]]:
    """Comparisons (``==``, ``!=``, ``in``, ``not in``) of a step id with a step-id string literal,
    outside tutor/steps/ (``step.id == "weights"``, ``id in ("q", "k")``)."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        if "steps" in path.relative_to(PACKAGE).parts:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            literals = [o.value for o in operands if isinstance(o, ast.Constant) and isinstance(o.value, str)]
            literals += [e.value for o in operands if isinstance(o, (ast.Tuple, ast.List, ast.Set))
                         for e in o.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if any(v in STEP_IDS for v in literals) and any(_names_an_id(o) for o in operands):
                found.append((path, node.lineno, lines[node.lineno - 1]))
    return found


def test_at_most_five_step_id_comparisons_outside_the_catalogue_each_with_a_comment():
    found = _step_id_comparisons()
    assert len(found) <= 5, found
    for path, line, text in found:
        assert "#" in text, f"{path}:{line}: say why this step is special here"


def test_one_softmax_in_the_package():
    defs = [(p, n.name) for p in PACKAGE.rglob("*.py") for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(n, ast.FunctionDef) and n.name == "softmax"]
    assert len(defs) == 1, defs


def test_every_kind_is_reachable_by_its_id():
    assert all(KINDS[k.id] is k for k in CATALOGUE)
    assert len(KINDS) == len(CATALOGUE)

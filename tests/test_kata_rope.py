"""The `rope` kata (issue 23, item 1): its reference against a rotation written in torch 2.13 (``rotate_half``
for pairing half, ``torch.view_as_complex`` times ``torch.polar`` for interleaved) and against
``F.scaled_dot_product_attention`` with the bottom-right causal mask; its hand cases from the exact engine;
and learner files run through the real child-process harness: the reference solutions (NumPy and PyTorch)
pass, the start files raise NotImplementedError on every case, and one buggy file per named mistake, written
here (the NumPy or PyTorch solution with one realistic slip), is named by the judge, alone, on every case it
fails.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tutor.base.catalogs.en import EN
from tutor.base.catalogs.zh import ZH
from tutor.katas import catalog, hand, rope
from tutor.katas.judge import judge
from tutor.katas.run import Run, run

KATA = rope.KATA
CASES = KATA.cases()
FILES = Path(__file__).resolve().parent.parent / "tutor" / "katas" / "files" / "rope"
F32 = {"rtol": 1e-4, "atol": 1e-5}
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _close(a: np.ndarray, b: np.ndarray, dtype: str) -> bool:
    tol = F32 if dtype == "float32" else {"rtol": 1e-9, "atol": 1e-12}
    return a.shape == b.shape and bool(np.allclose(a, b, **tol))


# --- the reference against torch -----------------------------------------------------------------------------


def torch_rope(x: torch.Tensor, positions: torch.Tensor, base: float, pairing: str) -> torch.Tensor:
    """RoPE written in torch, float64: half as GPT-NeoX / Hugging Face LLaMA (``rotate_half``), interleaved as
    Meta's LLaMA (each pair a complex number, times ``e^(i·m·θ)``)."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.outer(positions.to(torch.float64), theta)  # [L, d/2]
    if pairing == "half":
        emb = torch.cat([angles, angles], dim=-1)
        return x * emb.cos() + torch.cat([-x[..., d // 2:], x[..., : d // 2]], dim=-1) * emb.sin()
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2)


def test_registered_last_in_the_catalogue() -> None:
    assert catalog.get("rope") is KATA and catalog.IDS[-1] == "rope"
    assert all(k in EN["cli.code.kata"] and k in ZH["cli.code.kata"] for k in catalog.IDS)  # --help names them all


def _code(key: str, flavour: str = "torch") -> list[str]:
    """The code spans (between backticks) of the English sentence ``code.mistake.<key>``; the Chinese has the same.
    ``flavour``: "torch" leaves out the NumPy lines (those with ``np.``), "numpy" keeps only them."""
    spans = re.findall(r"`([^`]+)`", EN[f"code.mistake.{key}"])
    assert spans == re.findall(r"`([^`]+)`", ZH[f"code.mistake.{key}"])
    return [s for s in spans if ("np." in s) == (flavour == "numpy")]


def _run(line: str, scope: dict) -> None:
    """A span as Python: ``f(x) = expr`` defines ``f``; ``name = expr`` assigns; an expression is kept as ``_``."""
    head, _, body = line.partition(" = ")
    if body and head.endswith(")"):
        exec(f"def {head}: return {body}", scope)
    elif body:
        exec(line, scope)
    else:
        scope["_"] = eval(line, scope)


def test_the_fixes_the_mistakes_name_are_right_in_torch() -> None:
    """Each mistake's sentence ends with the right line of PyTorch code: run, those lines rotate as torch_rope does
    (its interleaved form is the complex one: an independent check of the rotate_every_two line) and grow the
    cache as the kata's step expects."""
    # the same x every run; the lines' `torch.arange(0, d, 2) / d` is float32 (torch's default dtype), so their
    # angles are float32 and the rotation agrees with torch_rope's float64 to ~1e-6, not to allclose's default
    # rtol alone (an entry near 0 failed it for some random x)
    x = torch.randn(2, 3, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(23))
    positions, base, d = torch.tensor([4, 0, 9]), 10000.0, 8
    scope: dict = {"torch": torch, "x": x, "positions": positions, "base": base, "d": d}
    _run(_code("rope_theta_no_2")[0], scope)  # theta = base ** (-torch.arange(0, d, 2) / d)
    _run(_code("rope_positions_ignored")[0], scope)  # angles = positions[:, None] * theta[None, :]
    _run(_code("rope_pairing_swapped")[2], scope)  # rotate_half(x) = torch.cat([-x[..., d // 2:], …])
    for key, pairing in (("rope_half_interleaved_angles", "half"), ("rope_interleaved_half_angles", "interleaved")):
        spans = [s for s in _code(key) if not s.startswith("pairing=")]
        for line in [s for s in spans if " = " in s]:
            _run(line, scope)  # emb = …, rotate_every_two(x) = …
        _run(next(s for s in spans if " = " not in s and s.startswith("x * ")), scope)  # the rotation
        assert torch.allclose(scope["_"], torch_rope(x, positions, base, pairing), atol=1e-5), key
    assert _code("rope_sign")[-1] == _code("rope_pairing_swapped")[2]
    case = next(c for c in CASES if c.id == "decode-three-half")
    P, T = case.sizes["P"], case.sizes["T"]
    step = {"torch": torch, "P": P, "T": T, "k": torch.tensor(case.inputs["k"]), "v": torch.tensor(case.inputs["v"]),
            "k_cache": torch.tensor(case.inputs["k_cache"]), "v_cache": torch.tensor(case.inputs["v_cache"]),
            "apply_rope": lambda t, p: torch_rope(t, p, case.inputs["base"], case.inputs["pairing"])}
    for key in ("rope_positions_from_1", "rope_decode_position_0"):
        _run(_code(key)[-1], step)
        assert step["positions"].tolist() == list(range(P, P + T))
    _run(_code("rope_v_rotated")[-1], step)
    _run(_code("rope_cache_rotated_again")[-1], step)
    assert np.allclose(step["k_cache"].numpy(), case.expected[1]) and np.allclose(step["v_cache"].numpy(), case.expected[2])


def test_every_fix_line_in_pytorch_has_its_numpy_line_and_it_is_right() -> None:
    """A NumPy learner is given NumPy code: each mistake whose sentence shows a PyTorch line shows the NumPy one too,
    and those lines, run on arrays, rotate as torch_rope does and grow the cache as the kata's step expects."""
    for m in KATA.mistakes:
        if _code(m.key) and any("torch." in s for s in _code(m.key)):
            assert _code(m.key, "numpy"), m.key
    x, positions, base, d = np.random.default_rng(7).normal(size=(2, 3, 8)), np.array([4, 0, 9]), 10000.0, 8
    scope: dict = {"np": np, "x": x, "positions": positions, "base": base, "d": d}
    scope["theta"] = eval(_code("rope_theta_no_2", "numpy")[0], scope)
    _run(_code("rope_positions_ignored")[0], scope)  # angles = positions[:, None] * theta[None, :]
    _run(_code("rope_pairing_swapped", "numpy")[0], scope)  # rotate_half(x) = np.concatenate(…)
    assert _code("rope_sign", "numpy") == _code("rope_pairing_swapped", "numpy")
    want = {p: torch_rope(torch.tensor(x), torch.tensor(positions), base, p).numpy() for p in ("half", "interleaved")}
    half = _code("rope_half_interleaved_angles", "numpy")  # emb = …, then the rotation
    _run(half[0], scope)
    _run(half[1], scope)
    assert np.allclose(scope["_"], want["half"])
    for line in _code("rope_interleaved_half_angles", "numpy"):  # emb = …, rotate_every_two(x) = …
        _run(line, scope)
    got = x * np.cos(scope["emb"]) + scope["rotate_every_two"](x) * np.sin(scope["emb"])
    assert np.allclose(got, want["interleaved"])
    case = next(c for c in CASES if c.id == "decode-three-half")
    P, T = case.sizes["P"], case.sizes["T"]

    def apply_rope(t: np.ndarray, p: np.ndarray) -> np.ndarray:
        return torch_rope(torch.tensor(t), torch.tensor(p), case.inputs["base"], case.inputs["pairing"]).numpy()

    fresh = {"np": np, "P": P, "T": T, "k": case.inputs["k"], "v": case.inputs["v"], "k_cache": case.inputs["k_cache"],
             "v_cache": case.inputs["v_cache"], "apply_rope": apply_rope}
    for key in ("rope_positions_from_1", "rope_decode_position_0"):
        step = dict(fresh)
        _run(_code(key, "numpy")[-1], step)
        assert step["positions"].tolist() == list(range(P, P + T))
    step = dict(fresh)
    _run(_code("rope_v_rotated", "numpy")[-1], step)
    _run(_code("rope_cache_rotated_again", "numpy")[-1], step)
    assert np.allclose(step["k_cache"], case.expected[1]) and np.allclose(step["v_cache"], case.expected[2])
    step = dict(fresh, k_rot=apply_rope(case.inputs["k"], np.arange(P, P + T)))
    _run(_code("rope_cache_unrotated", "numpy")[-1], step)
    assert np.allclose(step["k_cache"], case.expected[1])


def test_the_two_pairings_differ_and_agree_up_to_a_permutation() -> None:
    """What the starter file says: the same x gives different numbers, and a checkpoint for one runs with the
    other once its dimensions are permuted (interleaved's 2i, 2i + 1 moved to i, i + d/2)."""
    x, pos = torch.randn(3, 8, dtype=torch.float64), torch.tensor([0, 4, 9])
    half, inter = torch_rope(x, pos, 10000.0, "half"), torch_rope(x, pos, 10000.0, "interleaved")
    assert not torch.allclose(half, inter)
    perm = torch.tensor([0, 2, 4, 6, 1, 3, 5, 7])  # new dimension k reads old dimension perm[k]
    assert torch.allclose(torch_rope(x[:, perm], pos, 10000.0, "half"), inter[:, perm])


@pytest.mark.parametrize("case", [c for c in CASES if c.call is None], ids=lambda c: c.id)
def test_rotation_cases_against_torch(case) -> None:
    i = case.inputs
    want = torch_rope(torch.tensor(i["x"]), torch.tensor(i["positions"]), i["base"], i["pairing"]).numpy()
    assert _close(case.expected[0], want, "float64")
    assert case.expected[0].shape == i["x"].shape


@pytest.mark.parametrize("case", [c for c in CASES if c.call == rope.DECODE], ids=lambda c: c.id)
def test_step_cases_against_torch_sdpa(case) -> None:
    i = case.inputs
    q, k, v, k_cache, v_cache = (torch.tensor(i[n]) for n in ("q", "k", "v", "k_cache", "v_cache"))
    P, T = k_cache.shape[2], q.shape[2]
    pos = torch.arange(P, P + T)
    keys = torch.cat([k_cache, torch_rope(k, pos, i["base"], i["pairing"])], dim=2)
    values = torch.cat([v_cache, v], dim=2)
    allowed = torch.ones(T, P + T, dtype=torch.bool).tril(diagonal=P)  # causal_lower_right
    out = F.scaled_dot_product_attention(torch_rope(q, pos, i["base"], i["pairing"]), keys, values, attn_mask=allowed)
    for got, want in zip(case.expected, (out, keys, values), strict=True):
        assert _close(got, want.numpy(), "float64")


def test_step_caches_are_the_earlier_keys_rotated_at_their_positions() -> None:
    """A decode step's cache is what the steps before it stored: the hand case's, the exact engine's k_rot rows."""
    for case in CASES:
        if case.call == rope.DECODE and case.sizes["P"]:
            c = case.inputs["k_cache"]
            assert not np.allclose(c[..., 1:, :], 0)  # rows past position 0 are turned (and not empty)


def test_hand_cases_come_from_the_exact_engine() -> None:
    hands = [c for c in CASES if c.hand]
    assert [c.id for c in hands] == ["hand-rotate-k", "hand-prefill", "hand-decode"]
    k_rot = hand.step(rope.HAND, "k_rot", 0)
    out = hand.step(rope.HAND, "head_output", 0)
    assert np.array_equal(hands[0].expected[0], k_rot)
    assert np.array_equal(hands[1].expected[0][0, 0], out) and np.array_equal(hands[2].expected[0][0, 0], out[2:])
    assert np.array_equal(hands[2].inputs["k_cache"][0, 0], k_rot[:2])
    for c in hands:  # the float reference agrees with the exact values
        assert all(_close(a, b, "float64") for a, b in zip(KATA.reference(c.inputs, frozenset()), c.expected,
                                                           strict=True))


# --- learner files through the harness --------------------------------------------------------------------

NUMPY = (FILES / "numpy_solution.py").read_text(encoding="utf-8")
TORCH = (FILES / "torch_solution.py").read_text(encoding="utf-8")


def _bug(solution: str, *edits: tuple[str, str]) -> str:
    for old, new in edits:
        assert solution.count(old) == 1, old
        solution = solution.replace(old, new)
    return solution


#: Each buggy file: the mistake it makes, and the file (a solution with that one slip).
BUGS: dict[str, tuple[str, str]] = {
    "pairing_swapped": ("rope_pairing_swapped", _bug(NUMPY, ('if pairing == "half":', 'if pairing == "interleaved":'))),
    "half_repeat_interleave_torch": ("rope_half_interleaved_angles", _bug(
        TORCH, ("emb = torch.cat([angles, angles], dim=-1)", "emb = angles.repeat_interleave(2, dim=-1)"))),
    "interleaved_cat_torch": ("rope_interleaved_half_angles", _bug(
        TORCH, ("emb = angles.repeat_interleave(2, dim=-1)", "emb = torch.cat([angles, angles], dim=-1)"))),
    "theta_no_2": ("rope_theta_no_2", _bug(NUMPY, ("-np.arange(0, d, 2) / d", "-np.arange(d // 2) / d"))),
    "sign": ("rope_sign", _bug(NUMPY, ("[a * cos - b * sin, a * sin + b * cos]", "[a * cos + b * sin, -a * sin + b * cos]"),
                               ("= a * cos - b * sin", "= a * cos + b * sin"), ("= a * sin + b * cos", "= -a * sin + b * cos"))),
    "positions_ignored": ("rope_positions_ignored", _bug(NUMPY, ("np.asarray(positions)[:, None]",
                                                                 "np.arange(x.shape[-2])[:, None]"))),
    "positions_from_1": ("rope_positions_from_1", _bug(NUMPY, ("positions = np.arange(P, P + T)",
                                                               "positions = np.arange(P, P + T) + 1"))),
    "decode_position_0": ("rope_decode_position_0", _bug(NUMPY, ("positions = np.arange(P, P + T)",
                                                                 "positions = np.arange(T)"))),
    "v_rotated": ("rope_v_rotated", _bug(NUMPY, ("values = np.concatenate([v_cache, v], axis=2)",
                                                 "values = np.concatenate([v_cache, apply_rope(v, positions, base, "
                                                 "pairing)], axis=2)"))),
    "cache_rotated_again": ("rope_cache_rotated_again", _bug(NUMPY, (
        "keys = np.concatenate([k_cache, k_rot], axis=2)",
        "keys = apply_rope(np.concatenate([k_cache, k], axis=2), np.arange(P + T), base, pairing)"))),
    "cache_rotated_again_torch": ("rope_cache_rotated_again", _bug(TORCH, (
        "keys = torch.cat([k_cache, k_rot], dim=2)",
        "keys = apply_rope(torch.cat([k_cache, k], dim=2), torch.arange(P + T), base, pairing)"))),
    "keys_rotated_at_attention_torch": ("rope_cache_rotated_again", _bug(TORCH, (
        "scores = q_rot @ keys.transpose(-2, -1)",
        "scores = q_rot @ apply_rope(keys, torch.arange(P + T), base, pairing).transpose(-2, -1)"))),
    "cache_unrotated": ("rope_cache_unrotated", _bug(NUMPY, ("return weights @ values, keys, values",
                                                             "return weights @ values, np.concatenate([k_cache, k], "
                                                             "axis=2), values"))),
    "decode_top_left": ("decode_top_left", _bug(NUMPY, ("j <= P + i", "j <= i"))),
    "no_scaling": ("no_scaling", _bug(NUMPY, (" / math.sqrt(d)", ""))),
}
#: The step cannot tell these apart: apply_rope turning rows by arange(L) whatever the positions is, inside the
#: step, the new tokens at 0 … T − 1; the rotation's own cases tell them apart.
SAME_IN_THE_STEP = {"rope_positions_ignored": "rope_decode_position_0", "rope_decode_position_0": "rope_positions_ignored"}


@cache
def _runs(folder: str) -> dict[str, Run]:
    """Every buggy file, the solutions and the start files, each run once on every case (two at a time)."""
    root = Path(folder)
    paths = {name: root / f"{name}.py" for name in BUGS}
    for name, (_, text) in BUGS.items():
        paths[name].write_text(text, encoding="utf-8")
    paths |= {f"files/{p.stem}": p for p in FILES.glob("*.py") if p.name.count(".") == 1}
    request, cases = KATA.request(), [c.request() for c in CASES]
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = {name: pool.submit(run, path, request, cases) for name, path in paths.items()}
        return {name: f.result() for name, f in done.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Run]:
    return _runs(str(tmp_path_factory.mktemp("rope-files")))


def _decoded(outputs) -> tuple[np.ndarray, ...]:
    return tuple(np.array(o["data"], dtype=np.float64).reshape(o["shape"]) for o in outputs)


@pytest.mark.parametrize("name,flavour", [("files/numpy_solution", "numpy"), ("files/torch_solution", "torch")])
def test_the_reference_solutions_pass(runs, name, flavour) -> None:
    r = runs[name]
    assert (r.status, r.flavour) == ("ran", flavour), (r.status, r.detail, r.stderr)
    for case, cr in zip(CASES, r.cases, strict=True):
        assert cr.outputs is not None, cr.exception
        assert [o["dtype"] for o in cr.outputs] == [case.dtype] * len(case.expected), case.id  # x's dtype kept
    assert judge(KATA, CASES, r).passed


@pytest.mark.parametrize("name,flavour", [("files/numpy_start", "numpy"), ("files/torch_start", "torch")])
def test_the_start_files_run_and_say_not_written_yet(runs, name, flavour) -> None:
    r = runs[name]
    assert (r.status, r.flavour) == ("ran", flavour)
    assert [cr.exception for cr in r.cases] == ["NotImplementedError"] * len(CASES)
    report = judge(KATA, CASES, r)
    assert not report.passed and set(report.mistakes) == {"exception"}


def test_every_mistake_has_a_buggy_file() -> None:
    assert {key for key, _ in BUGS.values()} == {m.key for m in KATA.mistakes}
    assert sum(name.endswith("_torch") for name in BUGS) >= 2


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_buggy_file_is_named_by_its_mistake(runs, name) -> None:
    key, _ = BUGS[name]
    r = runs[name]
    assert (r.status, r.flavour) == ("ran", "torch" if name.endswith("_torch") else "numpy"), (r.status, r.detail)
    report = judge(KATA, CASES, r)
    failed = [v for v in report.cases if not v.passed]
    assert failed, f"{name} passes every case"
    allowed = {key, SAME_IN_THE_STEP.get(key, key)}
    for v in failed:
        named = {d.key for d in v.diagnoses}
        assert key in named and named <= allowed, (v.case.id, named)
        theirs = _decoded(r.cases[CASES.index(v.case)].outputs)
        assert any(all(_close(a, b, "float32") for a, b in zip(theirs, KATA.reference(v.case.inputs, m.slips),
                                                               strict=True)) for m in KATA.mistakes if m.key == key)
    assert report.mistakes[0] == key


def test_two_mistakes_at_once_are_both_named(tmp_path) -> None:
    """θ without the 2 in apply_rope and V rotated in the step: the rotation's cases name the first, the step's
    the pair (no one mistake gives those numbers)."""
    f = tmp_path / "two.py"
    f.write_text(_bug(BUGS["theta_no_2"][1], ("values = np.concatenate([v_cache, v], axis=2)",
                                              "values = np.concatenate([v_cache, apply_rope(v, positions, base, pairing)], axis=2)")),
                 encoding="utf-8")
    report = judge(KATA, CASES, run(f, KATA.request(), [c.request() for c in CASES]))
    for v in report.cases:
        want = "rope_theta_no_2" if v.case.call is None else "rope_theta_no_2+rope_v_rotated"
        assert [d.key for d in v.diagnoses] == [want], v.case.id


def test_a_file_with_apply_rope_alone_passes_its_cases_and_is_told_the_step_is_missing(tmp_path) -> None:
    f = tmp_path / "only_rotation.py"
    f.write_text(NUMPY[: NUMPY.index("def rope_decode_step")], encoding="utf-8")
    r = run(f, KATA.request(), [c.request() for c in CASES])
    report = judge(KATA, CASES, r)
    for v in report.cases:
        assert v.passed == (v.case.call is None), v.case.id
        if not v.passed:
            assert v.exception is not None and "rope_decode_step" in v.exception


def test_a_file_without_apply_rope_is_refused_naming_the_function(cli, tmp_path) -> None:
    f = tmp_path / "no_rotation.py"
    f.write_text("KATA = 'rope'\n\n\ndef rotate(x, positions):\n    return x\n", encoding="utf-8")
    for lang, catalogue in (("en", EN), ("zh", ZH)):
        r = cli("code", "check", f, "--lang", lang)
        assert r.code == 2 and r.err.count("\n") == 1, r.err
        said = catalogue["code.file.missing_function"].format(file=f, name="apply_rope", kata="rope", defined="rotate")
        assert said in r.err


# --- what the learner reads ------------------------------------------------------------------------------------


def test_code_list_shows_the_kata_in_english_and_chinese(cli) -> None:
    rows = json.loads(cli("code", "list", "--format", "json").out)["katas"]
    assert {"id": "rope", "title": EN["code.kata.rope"], "done": False, "review_due": False} in rows
    zh = cli("code", "list", "--lang", "zh", env={"COLUMNS": "200"}).out
    line = next(line for line in zh.splitlines() if line.lstrip().startswith("rope "))
    assert ZH["code.kata.rope"] in line


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_buggy_file_is_told_its_mistake_with_the_fix(cli, tmp_path, lang) -> None:
    f = tmp_path / "rope_bug.py"
    f.write_text(BUGS["cache_rotated_again"][1], encoding="utf-8")
    r = cli("code", "check", f, "--lang", lang, env={"COLUMNS": "1000"})  # the sentence on one line
    assert r.code == 1, r.err
    catalogue = EN if lang == "en" else ZH
    assert catalogue["code.mistake.rope_cache_rotated_again"] in r.out
    assert "torch.cat([k_cache, apply_rope(k, torch.arange(P, P + T))], dim=2)" in r.out  # the right line
    assert not CONTROL.search(r.out + r.err)


def test_start_writes_the_file_of_the_language(cli, tmp_path) -> None:
    assert cli("code", "start", "rope", "-o", tmp_path / "zh.py", "--lang", "zh").code == 0
    assert (tmp_path / "zh.py").read_text(encoding="utf-8") == (FILES / "numpy_start.zh.py").read_text(encoding="utf-8")
    text = (FILES / "numpy_start.py").read_text(encoding="utf-8")
    assert 'pairing="half"' in text and 'pairing="interleaved"' in text and "rotate_half" in text
    assert not CONTROL.search(text.replace("\n", ""))

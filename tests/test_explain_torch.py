"""`explain --format json` of any valid file matches PyTorch (float64) on every step to 1e-9.

The exercise is generated here as numbers, written as YAML, run through the
CLI, and recomputed from the same numbers with torch — the package never
imports torch.  Fully masked rows: torch's softmax gives NaN, the contract
zeros, so the oracle zeroes them explicitly.
"""

from __future__ import annotations

import json
import os
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import EXERCISES
from .test_torch_parity import require_torch

torch = require_torch()

TOL = 1e-9


def frac_text(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else f'"{q.numerator}/{q.denominator}"'


def yaml_matrix(m) -> str:
    return "[" + ", ".join("[" + ", ".join(frac_text(v) for v in row) + "]" for row in m) + "]"


def yaml_vector(v) -> str:
    return "[" + ", ".join(frac_text(x) for x in v) + "]"


def T(m) -> torch.Tensor:
    return torch.tensor([[float(v) for v in row] for row in m], dtype=torch.float64)


def V(v) -> torch.Tensor:
    return torch.tensor([float(x) for x in v], dtype=torch.float64)


def oracle(spec: dict) -> list[tuple[str, int | None, torch.Tensor]]:
    """Every step per the contract, computed with torch from the generated numbers."""
    x = T(spec["x"])
    kv = T(spec["x_kv"]) if spec.get("x_kv") is not None else x
    L, L_k = x.shape[0], kv.shape[0]
    allowed = None
    if spec.get("mask") == "causal":
        allowed = torch.ones(L, L_k, dtype=torch.bool).tril()
    elif isinstance(spec.get("mask"), list):
        allowed = torch.tensor(spec["mask"], dtype=torch.bool)
    if spec.get("key_padding") is not None:
        pad = torch.tensor(spec["key_padding"], dtype=torch.bool).expand(L, L_k)
        allowed = pad if allowed is None else allowed & pad
    steps, outs = [], []
    for h, head in enumerate(spec["heads"]):
        def proj(inp, w, b):
            out = inp @ T(w)
            return out + V(b) if b is not None else out
        q = proj(x, head["w_q"], head.get("b_q"))
        k = proj(kv, head["w_k"], head.get("b_k"))
        v = proj(kv, head["w_v"], head.get("b_v"))
        scores = q @ k.T
        scaled = scores / torch.sqrt(torch.tensor(float(q.shape[1]), dtype=torch.float64))
        steps += [("q", h, q), ("k", h, k), ("v", h, v), ("scores", h, scores), ("scaled", h, scaled)]
        logits = scaled
        if allowed is not None:
            logits = scaled.masked_fill(~allowed, float("-inf"))
            steps.append(("masked", h, logits))
        weights = torch.softmax(logits, dim=-1)
        weights = torch.nan_to_num(weights, nan=0.0)  # fully masked rows: zeros (the contract)
        out = weights @ v
        steps += [("weights", h, weights), ("head_output", h, out)]
        outs.append(out)
    concat = torch.cat(outs, dim=-1)
    if len(outs) > 1:
        steps.append(("concat", None, concat))
    if spec.get("w_o") is not None:
        o = concat @ T(spec["w_o"])
        if spec.get("b_o") is not None:
            o = o + V(spec["b_o"])
        steps.append(("output", None, o))
    return steps


def to_yaml(spec: dict, fused: bool) -> str:
    lines = [f"id: {spec['id']}", "title: generated", f"x: {yaml_matrix(spec['x'])}"]
    if spec.get("x_kv") is not None:
        lines.append(f"x_kv: {yaml_matrix(spec['x_kv'])}")
    heads = spec["heads"]
    if fused:
        lines.append(f"num_heads: {len(heads)}")
        for name in ("w_q", "w_k", "w_v"):
            lines.append(f"{name}: {yaml_matrix([sum((list(h[name][r]) for h in heads), []) for r in range(len(heads[0][name]))])}")
        for name in ("b_q", "b_k", "b_v"):
            if heads[0].get(name) is not None:
                lines.append(f"{name}: {yaml_vector(sum((list(h[name]) for h in heads), []))}")
    else:
        lines.append("heads:")
        for h in heads:
            first = True
            for name in ("w_q", "w_k", "w_v", "b_q", "b_k", "b_v"):
                if h.get(name) is not None:
                    value = yaml_matrix(h[name]) if name.startswith("w") else yaml_vector(h[name])
                    lines.append(f"  {'- ' if first else '  '}{name}: {value}")
                    first = False
    if spec.get("w_o") is not None:
        lines.append(f"w_o: {yaml_matrix(spec['w_o'])}")
    if spec.get("b_o") is not None:
        lines.append(f"b_o: {yaml_vector(spec['b_o'])}")
    if spec.get("mask") == "causal":
        lines.append("mask: causal")
    elif isinstance(spec.get("mask"), list):
        lines.append("mask: [" + ", ".join("[" + ", ".join(str(b).lower() for b in row) + "]" for row in spec["mask"]) + "]")
    if spec.get("key_padding") is not None and spec.get("padding_field") == "key_padding_mask":  # True = padding
        lines.append("key_padding_mask: [" + ", ".join(str(not b).lower() for b in spec["key_padding"]) + "]")
    elif spec.get("key_padding") is not None:  # the v1 field: True = a real key
        lines.append("key_padding: [" + ", ".join(str(b).lower() for b in spec["key_padding"]) + "]")
    return "\n".join(lines) + "\n"


def check(cli, tmp_path, text: str, spec: dict) -> None:
    path = tmp_path / "ex.yaml"
    path.write_text(text)
    code, out, err = cli("explain", path, "--format", "json")
    assert code == 0, err
    got = json.loads(out)["steps"]
    want = oracle(spec)
    assert [(s["id"], s["head"]) for s in got] == [(sid, h) for sid, h, _ in want]
    for s, (sid, h, ref) in zip(got, want):
        value = torch.tensor([[float("-inf") if v is None else v for v in row] for row in s["value"]], dtype=torch.float64)
        assert value.shape == ref.shape, (sid, h)
        inf = torch.isinf(ref)
        assert torch.equal(inf, torch.isinf(value)), (sid, h)
        assert torch.allclose(value[~inf], ref[~inf], rtol=TOL, atol=TOL), (sid, h, (value - ref).abs().max())


# --- bundled exercises: inputs read back from the JSON's exercise record ----------

def _v1(path) -> bool:
    """A bundled exercise this file's oracle reads (format v2 ones are tests/test_v2_torch.py's, MLA's
    tests/test_mla.py's)."""
    from tutor.exercise.catalog import resolve

    ex = resolve(path.stem)
    return (not ex.is_v2 and ex.mask_kind not in ("causal_lower_right", "sliding_window") and ex.mla is None
            and ex.rope is None and not (ex.has_norm or ex.residual))
    # RoPE: test_rope.py, MLA: test_mla.py, the block: test_prenorm_block.py, a window: test_masks_v3.py


@pytest.mark.parametrize("path", [p for p in sorted(EXERCISES.glob("*.yaml")) if _v1(p)], ids=lambda p: p.stem)
def test_bundled_exercise_matches_torch(cli, tmp_path, path):
    ex = json.loads(cli("explain", path, "--format", "json").out)["exercise"]
    F = lambda m: None if m is None else [[Fraction(v) for v in row] for row in m]  # noqa: E731
    Fv = lambda v: None if v is None else [Fraction(x) for x in v]  # noqa: E731
    spec = {
        "x": F(ex["x"]), "x_kv": F(ex["x_kv"]), "w_o": F(ex["w_o"]), "b_o": Fv(ex["b_o"]),
        "key_padding": ex["key_padding"],
        "heads": [{k: (F(v) if k.startswith("w") else Fv(v)) for k, v in h.items()} for h in ex["heads"]],
    }
    text = path.read_text()
    if ex["mask"] == "causal":
        spec["mask"] = "causal"
    elif ex["mask"] == "matrix":
        import yaml

        spec["mask"] = yaml.safe_load(text)["mask"]
    check(cli, tmp_path, text, spec)


# --- any valid file ------------------------------------------------------------------

NUMS = st.fractions(min_value=-3, max_value=3, max_denominator=6)


@st.composite
def exercises(draw):
    L = draw(st.integers(1, 5))
    cross = draw(st.booleans())
    L_k = draw(st.integers(1, 5)) if cross else L
    d_model = draw(st.integers(1, 4))
    d_kv = draw(st.integers(1, 4)) if cross else d_model
    H = draw(st.integers(1, 3))
    d_k, d_v = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    mat = lambda r, c: [[draw(NUMS) for _ in range(c)] for _ in range(r)]  # noqa: E731
    vec = lambda n: [draw(NUMS) for _ in range(n)]  # noqa: E731
    biases = draw(st.booleans())
    heads = [{"w_q": mat(d_model, d_k), "w_k": mat(d_kv, d_k), "w_v": mat(d_kv, d_v),
              "b_q": vec(d_k) if biases else None, "b_k": vec(d_k) if biases else None,
              "b_v": vec(d_v) if biases else None} for _ in range(H)]
    spec = {"id": "generated", "x": mat(L, d_model), "x_kv": mat(L_k, d_kv) if cross else None, "heads": heads}
    if draw(st.booleans()):
        d_out = draw(st.integers(1, 4))
        spec["w_o"] = mat(H * d_v, d_out)
        spec["b_o"] = vec(d_out) if draw(st.booleans()) else None
    mask = draw(st.sampled_from(["none", "causal", "matrix"]))
    if mask == "causal":
        spec["mask"] = "causal"
    elif mask == "matrix":
        spec["mask"] = [[draw(st.booleans()) for _ in range(L_k)] for _ in range(L)]
    if draw(st.booleans()):
        spec["key_padding"] = [draw(st.booleans()) for _ in range(L_k)]  # True = a real key
        spec["padding_field"] = draw(st.sampled_from(["key_padding", "key_padding_mask"]))
    return spec, draw(st.booleans())


@settings(max_examples=int(os.environ.get("ATTN_TUTOR_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(exercises())
def test_any_valid_file_matches_torch(cli, tmp_path, case):
    spec, fused = case
    check(cli, tmp_path, to_yaml(spec, fused), spec)

"""Exact engine at the size limits: `explain --format json` vs importing its libraries.

Target (issue 2): `attn-tutor explain FILE --format json` of an exercise at the
limits (L = 16, d_model = 32, 8 heads, so d_k = d_model / heads = 4) takes at
most twice the time it takes a fresh interpreter just to import the libraries
the tool is built on (sympy, numpy, rich, typer, pydantic, yaml).  A stress
case with d_k = 32 (every head as wide as d_model) is reported beside it.
Both sides are measured as fresh processes, warm file cache, best of N runs;
the explain side includes loading the YAML, the exact engine, the check
against the NumPy core and writing the JSON.

Run:  .venv/bin/python benchmarks/exact_limits.py   (also part of `make bench`)
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 5
TARGET = 2.0
NEW_TARGET = 5.0  # seconds for `attn-tutor new` at the size limits (it draws heads until each is within bounds)
ENTRIES = ["1", "-1", "2", "0.5", "-0.25", "1/3", "3/7", "0", "-2/5", "0.1"]


def exercise_yaml(L: int, d_model: int, heads: int, d_k: int, seed: int = 0) -> str:
    """A fused-form exercise with a causal mask, key padding, biases and W_O, entries from ENTRIES."""
    r = random.Random(seed)

    def m(rows: int, cols: int) -> str:
        return "[" + ", ".join("[" + ", ".join(f'"{r.choice(ENTRIES)}"' for _ in range(cols)) + "]" for _ in range(rows)) + "]"

    def v(n: int) -> str:
        return "[" + ", ".join(f'"{r.choice(ENTRIES)}"' for _ in range(n)) + "]"

    pad = ", ".join("false" if j == L - 1 else "true" for j in range(L))
    return "\n".join([
        f"id: limits-{L}x{d_model}-h{heads}-dk{d_k}",
        f'title: "Size limits: L={L}, d_model={d_model}, {heads} heads, d_k={d_k}"',
        f"num_heads: {heads}",
        f"x: {m(L, d_model)}",
        f"w_q: {m(d_model, heads * d_k)}",
        f"w_k: {m(d_model, heads * d_k)}",
        f"w_v: {m(d_model, heads * d_k)}",
        f"b_q: {v(heads * d_k)}",
        f"b_v: {v(heads * d_k)}",
        f"w_o: {m(heads * d_k, d_model)}",
        f"b_o: {v(d_model)}",
        "mask: causal",
        f"key_padding: [{pad}]",
        "",
    ])


def _timed(call) -> float:
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def best(cmd: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    py = sys.executable
    baseline = best([py, "-c", "import sympy, numpy, rich, typer, pydantic, yaml"])
    print(f"import sympy, numpy, rich, typer, pydantic, yaml: {baseline:.3f} s (best of {RUNS})")
    ok = True
    cases = [  # (L, d_model, heads, d_k, counts toward the target)
        (16, 32, 8, 4, True),  # the case: the size limits, d_k = d_model / heads
        (16, 32, 8, 32, False),  # stress: every head as wide as d_model (8x the projections), reported only
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for L, d_model, heads, d_k, target in cases:
            path = Path(tmp) / f"limits-{d_k}.yaml"
            path.write_text(exercise_yaml(L, d_model, heads, d_k))
            out = subprocess.run([py, "-m", "tutor", "explain", str(path), "--format", "json"],
                                 check=True, capture_output=True, text=True).stdout
            took = best([py, "-m", "tutor", "explain", str(path), "--format", "json"])
            ratio = took / baseline
            if target:
                verdict = f"(target <= {TARGET}) " + ("PASS" if ratio <= TARGET else "MISS")
                ok &= ratio <= TARGET
            else:
                verdict = "(stress case, no target)"
            print(f"explain --format json, L={L} d_model={d_model} heads={heads} d_k={d_k}: "
                  f"{took:.3f} s, {len(out) / 1e6:.1f} MB of JSON; ratio {ratio:.2f} {verdict}")
    from tutor.authoring.generate import Spec, generate

    spec = Spec(tokens=16, d_model=32, heads=8, d_k=4, mask="causal", cross=16, seed=2, difficulty=5)
    took = min(_timed(lambda: generate(spec)) for _ in range(RUNS))
    print(f"new at the size limits (16 tokens, d_model 32, 8 heads, cross 16): {took:.3f} s "
          f"(target <= {NEW_TARGET} s) " + ("PASS" if took <= NEW_TARGET else "MISS"))
    ok &= took <= NEW_TARGET
    print("target met" if ok else "target missed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

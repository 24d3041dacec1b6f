"""The NumPy SDPA backward against torch autograd on CPU (``make bench``; issue 13).

One case, B=4 H=8 L=512 d_k=64 float32: the time of a forward and backward
of scaled dot-product attention for a given ``d_out`` -- NumPy:
``tutor.numeric.backward.scaled_dot_product_attention_backward`` (it
recomputes the weights, then the five products of the backward); PyTorch:
``F.scaled_dot_product_attention(q, k, v)`` on tensors that require grad,
then ``out.backward(d_out)`` (what autograd needs: the forward and the
backward).  The gradients are compared before anything is timed.  Timing
rules as in benchmarks/run.py (warm, best of many, one side at a time with
a rest between turns; threads equal on both sides).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from run import TIME_TARGET, OthersCPU, best_times, blas_report, line, torch  # noqa: E402

from tutor.numeric.backward import scaled_dot_product_attention_backward  # noqa: E402


def backward_case(B: int, H: int, L: int, d: int, runs: int, rounds: int) -> tuple[str, float]:
    rng = np.random.default_rng(2)
    q, k, v, dO = (rng.standard_normal((B, H, L, d), dtype=np.float32) for _ in range(4))
    qt, kt, vt = (torch.from_numpy(a.copy()).requires_grad_() for a in (q, k, v))
    dOt = torch.from_numpy(dO)

    def run_torch() -> tuple:
        for t in (qt, kt, vt):
            t.grad = None
        torch.nn.functional.scaled_dot_product_attention(qt, kt, vt).backward(dOt)
        return qt.grad, kt.grad, vt.grad

    def run_numpy() -> tuple:
        return scaled_dot_product_attention_backward(q, k, v, dO)

    ours, ref = run_numpy(), run_torch()
    err = max(float(np.abs(a - r.numpy()).max()) for a, r in zip(ours, ref))
    assert err < 1e-3, f"the two sides disagree ({err:.2e})"
    best = best_times({"numpy": run_numpy, "torch": run_torch}, runs, rounds)
    text = line(f"sdpa backward B={B} H={H} L={L} d_k={d} f32", best["numpy"], best["torch"])
    text += "\n    (both sides: the forward and the backward for a given d_out; torch autograd, CPU)"
    return text, best["numpy"] / best["torch"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="timed calls per side per round (the best is kept)")
    ap.add_argument("--rounds", type=int, default=6, help="rounds (calls per side = runs x rounds)")
    ap.add_argument("--size", type=int, nargs=4, default=(4, 8, 512, 64), metavar=("B", "H", "L", "D"))
    args = ap.parse_args(argv)
    threads, blas = blas_report()
    torch.set_num_threads(threads)
    print("attn-tutor benchmark: the NumPy SDPA backward vs torch autograd, CPU (ratio = NumPy time / PyTorch time)")
    print(f"  BLAS {blas}; torch {torch.__version__}, threads {torch.get_num_threads()}; load {os.getloadavg()[0]:.2f}")
    with OthersCPU() as others:
        text, ratio = backward_case(*args.size, args.runs, args.rounds)
    print(text + others.note())
    exact_seconds = exact_at_the_bound()
    print(f"  exact backward at the size bound ({EXACT_CASE}): {exact_seconds:.2f} s CPU   "
          f"target <= {EXACT_TARGET:.1f} s   {'PASS' if exact_seconds <= EXACT_TARGET else 'MISS'}")
    long_seconds = exact_long_numbers()
    print(f"  exact backward of long numbers ({LONG_CASE}): {long_seconds:.2f} s CPU   "
          f"target <= {EXACT_TARGET:.1f} s   {'PASS' if long_seconds <= EXACT_TARGET else 'MISS'}")
    met = ratio <= TIME_TARGET and exact_seconds <= EXACT_TARGET and long_seconds <= EXACT_TARGET
    print("target met" if met else "target missed - see benchmarks/README.md")
    return 0


#: The exact backward pass (tutor.steps.solve(..., backward=True)) of an exercise at its size bound
#: (num_heads·L·L_k²·d_model = 16,384: tutor.steps.catalogue.MAX_BACKWARD_WORK), with ALiBi's exponents
#: (u·√t + r pairs, the slowest kind) and grouped K/V heads; what explain --backward waits for before printing.
EXACT_CASE = "4 heads, 2 K/V heads, 8 tokens, d_model 8, d_k 4, ALiBi, padding, difficulty 5"
EXACT_TARGET = 5.0


def exact_at_the_bound() -> float:
    import time

    from tutor.authoring.generate import Spec, generate
    from tutor.exercise.load import validate_text
    from tutor.steps import solve
    from tutor.steps.catalogue import MAX_BACKWARD_WORK

    spec = Spec(tokens=8, heads=4, kv_heads=2, d_model=8, d_k=4, alibi=True, mask="padding", difficulty=5, seed=7)
    ex = validate_text(generate(spec)).exercise
    assert ex is not None and ex.num_heads * ex.L * ex.L_k ** 2 * ex.d_model == MAX_BACKWARD_WORK
    start = time.process_time()
    solve(ex, backward=True)
    return time.process_time() - start


#: Issue 20, A: inside every limit, entries that are fractions over one 24-digit denominator; the long
#: division of each gradient's numerator by the softmax's denominator ran on without end (137 s, then 170 s).
LONG_CASE = "8 tokens, d_model 8, 2 heads of d_k 4, W_O, 14-digit integers over 999999999999999999999989"


def long_numbers_yaml(seed: int = 1) -> str:
    """The exercise of :data:`LONG_CASE` as a file's text."""
    import random

    rng = random.Random(seed)
    den = "999999999999999999999989"

    def m(r: int, c: int) -> str:
        return "[" + ", ".join("[" + ", ".join(f"{rng.randint(10**13, 10**14 - 1) * rng.choice([1, -1])}/{den}"
                                              for _ in range(c)) + "]" for _ in range(r)) + "]"

    heads = "\n".join(f"  - w_q: {m(8, 4)}\n    w_k: {m(8, 4)}\n    w_v: {m(8, 4)}" for _ in range(2))
    return f"id: long-numbers\ntitle: long numbers\nx: {m(8, 8)}\nheads:\n{heads}\nw_o: {m(8, 8)}\n"


def exact_long_numbers() -> float:
    import time

    from tutor.exercise.load import validate_text
    from tutor.steps import solve

    ex = validate_text(long_numbers_yaml()).exercise
    assert ex is not None
    start = time.process_time()
    solve(ex, backward=True)
    return time.process_time() - start


if __name__ == "__main__":
    raise SystemExit(main())

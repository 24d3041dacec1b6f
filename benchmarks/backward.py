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
    print("target met" if ratio <= TIME_TARGET else "target missed - see benchmarks/README.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

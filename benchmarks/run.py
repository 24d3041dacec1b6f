"""NumPy core vs PyTorch CPU, measured side by side in one run (``make bench``).

Prints, for each case, the best warm time of each side, their ratio
(NumPy / PyTorch), the target and PASS or MISS; then the peak memory and
time of the blocked path against the plain path.  See benchmarks/README.md.

Fairness rules kept here:
  * both sides get the same inputs and weights, and the outputs are compared
    before anything is timed (a benchmark of two different computations
    would prove nothing);
  * PyTorch gets as many threads as NumPy's BLAS (threadpoolctl reads it);
  * each side is timed alone (never both at once: they share the cores), warm,
    best of several runs, in turns of several calls with a rest between turns
    so that neither side runs while the other's idle threads still spin.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Self

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tutor.numeric import DEFAULT_BLOCK_SIZE, MultiHeadAttention, blocked_attention, scaled_dot_product_attention

try:
    import torch
    import torch.nn.functional as F
    from threadpoolctl import threadpool_info
except ImportError as exc:  # pragma: no cover - a message, not a crash
    sys.exit(
        f"benchmarks need torch==2.13.0 and threadpoolctl ({exc}); "
        "run: .venv/bin/python -m pip install torch==2.13.0 threadpoolctl"
    )

TIME_TARGET = 1.5  # NumPy / PyTorch
MEMORY_TARGET = 0.25  # blocked peak / plain peak
BLOCKED_TIME_TARGET = 1.5  # blocked time / plain time


SETTLE = 0.3  # seconds of rest before a side's turn: idle worker threads stop spinning


def best_times(fns: dict[str, Callable[[], object]], runs: int, rounds: int) -> dict[str, float]:
    """Best wall time (seconds) of each function: one side at a time, sides in turns.

    In each of ``rounds`` rounds every function gets a turn: a rest of
    ``SETTLE`` seconds, one warm-up call, then ``runs`` timed calls.  The rest
    matters: after a call OpenBLAS's worker threads spin for a while (and
    PyTorch's OpenMP threads too), and a side timed while the other side's
    pool still spins loses a core - calling the sides alternately, call by
    call, slowed PyTorch's SDPA from 15 ms to 24-28 ms here.  Rounds spread a
    busy spell of the machine over both sides.
    """
    best = dict.fromkeys(fns, math.inf)
    for _ in range(rounds):
        for name, fn in fns.items():
            time.sleep(SETTLE)
            fn()
            for _ in range(runs):
                gc.collect()
                t0 = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t0)
    return best


def side_by_side(numpy_fn: Callable[[], object], torch_fn: Callable[[], object], runs: int, rounds: int) -> tuple[float, float]:
    """Best times (seconds) of the two sides, one side at a time, interleaved."""
    best = best_times({"numpy": numpy_fn, "torch": torch_fn}, runs, rounds)
    return best["numpy"], best["torch"]


def _busy_jiffies() -> int | None:
    """CPU time (clock ticks) all processes spent, from /proc/stat; None off Linux."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle


class OthersCPU:
    """How much of the machine other processes took while a case ran.

    Both sides split work over both cores and wait for the slower thread
    (OpenMP in PyTorch, pthreads in OpenBLAS), so a busy neighbour slows them
    unevenly and by up to 20x (seen here): a ratio measured while others were
    busy means little, whichever way it leans.
    """

    def __enter__(self) -> Self:
        self.t0, self.j0, self.self0 = time.perf_counter(), _busy_jiffies(), sum(os.times()[:2])
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self.t0
        j1 = _busy_jiffies()
        self.share = None
        if self.j0 is not None and j1 is not None and wall > 0:
            busy = (j1 - self.j0) / os.sysconf("SC_CLK_TCK")
            mine = sum(os.times()[:2]) - self.self0
            self.share = max(0.0, busy - mine) / (wall * (os.cpu_count() or 1))

    def note(self) -> str:
        if self.share is None:
            return ""
        text = f"\n    other processes used {self.share:.0%} of the CPU meanwhile"
        if self.share > 0.05:
            text += " - these timings are not trustworthy; rerun on an idle machine"
        return text


def verdict(measured: float, target: float) -> str:
    return "PASS" if measured <= target else "MISS"


def ms(t: float) -> str:
    return f"{t * 1e3:8.1f} ms"


def line(label: str, t_np: float, t_torch: float) -> str:
    ratio = t_np / t_torch
    return (
        f"  {label:<44} numpy {ms(t_np)}   torch {ms(t_torch)}   ratio {ratio:5.2f}"
        f"   target <= {TIME_TARGET}   {verdict(ratio, TIME_TARGET)}"
    )


def blas_report() -> tuple[int, str]:
    """NumPy's BLAS (library, version, kernel, threads) as threadpoolctl sees it."""
    import numpy  # noqa: F401  (already loaded; threadpoolctl inspects loaded libraries)

    blas = [i for i in threadpool_info() if i.get("user_api") == "blas" and "numpy" in i.get("filepath", "")]
    if not blas:
        blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    if not blas:
        return os.cpu_count() or 1, "no BLAS found by threadpoolctl"
    b = blas[0]
    text = (
        f"{b.get('internal_api')} {b.get('version')} (kernel {b.get('architecture', '?')}, "
        f"{b.get('threading_layer', '?')} threads: {b.get('num_threads')}) from {os.path.basename(b.get('filepath', ''))}"
    )
    return int(b.get("num_threads") or 1), text


def layer_case(B: int, L: int, D: int, H: int, runs: int, rounds: int) -> tuple[str, float]:
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(D, H, batch_first=True, dtype=torch.float32).eval()
    with torch.no_grad():
        mha.in_proj_bias.normal_()
        mha.out_proj.bias.normal_()
    params = (mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias)
    layer = MultiHeadAttention.from_torch_layout(*(p.detach().numpy() for p in params), H, batch_first=True)
    x = np.random.default_rng(0).standard_normal((B, L, D), dtype=np.float32)
    xt = torch.from_numpy(x)

    def run_torch():
        return mha(xt, xt, xt, need_weights=True, average_attn_weights=False)

    def run_numpy():
        return layer(x, x, x, need_weights=True, average_attn_weights=False)

    with torch.inference_mode():
        out_t, w_t = run_torch()
        out_n, w_n = run_numpy()
        err = max(np.abs(out_n - out_t.numpy()).max(), np.abs(w_n - w_t.numpy()).max())
        assert out_n.dtype == np.float32 and err < 1e-4, f"the two sides disagree ({err:.2e})"
        best = best_times(
            {"numpy": run_numpy, "torch": run_torch, "fast": lambda: mha(xt, xt, xt, need_weights=False)},
            runs, rounds,
        )
    t_np, t_torch, t_fast = best["numpy"], best["torch"], best["fast"]
    label = f"layer forward B={B} L={L} d_model={D} H={H} f32"
    text = line(label, t_np, t_torch)
    text += f"\n    (both return output and per-head weights; max |diff| {err:.1e}. For reference, PyTorch"
    text += f"\n     without weights, need_weights=False on its fast path: {ms(t_fast).strip()}, ratio {t_np / t_fast:.2f})"
    return text, t_np / t_torch


def sdpa_case(B: int, H: int, L: int, d: int, runs: int, rounds: int, blas_threads: int) -> tuple[str, list[float]]:
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((B, H, L, d), dtype=np.float32) for _ in range(3))
    qt, kt, vt = map(torch.from_numpy, (q, k, v))
    with torch.inference_mode():
        ref = F.scaled_dot_product_attention(qt, kt, vt).numpy()
        plain = lambda: scaled_dot_product_attention(q, k, v)
        blocked = lambda: blocked_attention(q, k, v, block_size=DEFAULT_BLOCK_SIZE)
        err = max(np.abs(plain() - ref).max(), np.abs(blocked() - ref).max())
        assert err < 1e-4, f"the two sides disagree ({err:.2e})"
        run_torch = lambda: F.scaled_dot_product_attention(qt, kt, vt)
        best = best_times({"plain": plain, "blocked": blocked, "torch": run_torch}, runs, rounds)
    t_plain, t_blocked, t_torch = best["plain"], best["blocked"], best["torch"]
    text = line(f"sdpa plain   B={B} H={H} L={L} d_k={d} f32", t_plain, t_torch) + "\n"
    text += line(f"sdpa blocked B={B} H={H} L={L} d_k={d} f32", t_blocked, t_torch)
    text += "\n    (all three return the output only: PyTorch's CPU SDPA is a fused flash kernel; NumPy's"
    text += "\n     scaled_dot_product_attention forms the [B, H, L, L] weights, blocked_attention does not)"

    return text, [t_plain / t_torch, t_blocked / t_torch]


def peak_bytes(fn: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    result = fn()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    del result
    return peak


def memory_case(L: int, d: int, runs: int, rounds: int) -> tuple[str, bool]:
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((L, d), dtype=np.float32) for _ in range(3))
    plain = lambda: scaled_dot_product_attention(q, k, v)
    blocked = lambda: blocked_attention(q, k, v, block_size=DEFAULT_BLOCK_SIZE)
    err = np.abs(plain() - blocked()).max()
    assert err < 1e-4, f"blocked and plain disagree ({err:.2e})"
    m_plain, m_blocked = peak_bytes(plain), peak_bytes(blocked)
    t_blocked, t_plain = side_by_side(blocked, plain, runs, rounds)
    mem_ratio, time_ratio = m_blocked / m_plain, t_blocked / t_plain
    mib = lambda b: f"{b / 2**20:8.1f} MiB"
    text = (
        f"  blocked vs plain, L_q = L_k = {L}, d_k = {d}, f32, block_size = {DEFAULT_BLOCK_SIZE}"
        f" (peak by tracemalloc, which sees NumPy's buffers)\n"
        f"    peak memory   plain {mib(m_plain)}   blocked {mib(m_blocked)}   ratio {mem_ratio:6.3f}"
        f"   target <= {MEMORY_TARGET}   {verdict(mem_ratio, MEMORY_TARGET)}\n"
        f"    time          plain {ms(t_plain)}   blocked {ms(t_blocked)}   ratio {time_ratio:6.2f}"
        f"   target <= {BLOCKED_TIME_TARGET}   {verdict(time_ratio, BLOCKED_TIME_TARGET)}"
    )
    return text, mem_ratio <= MEMORY_TARGET and time_ratio <= BLOCKED_TIME_TARGET


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=4, help="timed calls per side per round (the best is kept)")
    ap.add_argument("--rounds", type=int, default=10, help="rounds (calls per side = runs x rounds)")
    args = ap.parse_args(argv)

    threads, blas = blas_report()
    torch.set_num_threads(threads)
    # need_weights=True never takes the MHA fast path; the need_weights=False reference line does.
    print("attn-tutor benchmark: NumPy core vs PyTorch CPU (ratio = NumPy time / PyTorch time)")
    print(f"  machine : {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"  numpy   : {np.__version__}, BLAS {blas}")
    print(f"  torch   : {torch.__version__}, threads {torch.get_num_threads()} (set equal to the BLAS threads)")
    print(f"  timing  : warm, best of {args.runs * args.rounds} calls per side; one side at a time, {args.runs} calls a turn, a {SETTLE} s rest between turns")
    print(f"  load    : {os.getloadavg()[0]:.2f} (1-minute load average before the run; other work on the cores skews both sides)")
    print()
    ratios = []
    for B, L, D, H in ((4, 512, 512, 8), (1, 2048, 256, 4)):
        with OthersCPU() as others:
            text, r = layer_case(B, L, D, H, args.runs, args.rounds)
        print(text + others.note())
        ratios.append(r)
    with OthersCPU() as others:
        text, rs = sdpa_case(4, 8, 512, 64, args.runs, args.rounds, threads)
    print(text + others.note())
    ratios += rs
    print()
    with OthersCPU() as others:
        text, mem_ok = memory_case(8192, 64, max(2, args.runs // 2), args.rounds)
    print(text + others.note())
    missed = sum(r > TIME_TARGET for r in ratios) + (not mem_ok)
    print(f"  load    : {os.getloadavg()[0]:.2f} after the run")
    print()
    print("all targets met" if not missed else f"{missed} target(s) missed - see benchmarks/README.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

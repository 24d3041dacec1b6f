"""``attn-tutor stats`` on a 500,000-answer progress store: peak memory and CPU time (issue 20, E).

Builds a store as a long-time learner's would be (``--answers`` rows: four
practice answers in five, one drill answer in five, a mistake on every wrong
practice answer, a skill per step and exercise family), then runs
``attn-tutor stats`` and ``stats --format json`` each in a fresh process and
reads the child's peak resident memory (``ru_maxrss``) and CPU time (user +
system: on this shared 2-core machine the wall time moves with the other
sessions' load, the CPU time much less; it is printed too).

The statistics are aggregated in SQL (:func:`tutor.store.queries.stats`), so the
peak does not grow with the number of answers.  Targets: peak RSS <= 150 MiB
(the interpreter, rich and the catalogue take about 45 MiB before the first
query) and CPU <= 5 s (about 1.5 s of it is the start-up).  Recorded in
benchmarks/README.md.

    .venv/bin/python benchmarks/stats_memory.py [--answers 500000]
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tutor.store import Store  # noqa: E402

TARGET_MIB = 150
TARGET_CPU_S = 5.0
STEPS = ("q", "k", "v", "scores", "scaled", "masked", "weights", "head_output", "concat", "output")
EXERCISES = ("single-head-3x4", "two-head-causal-3x4", "padding-4x2", "cross-attention-2x3")
MISTAKES = ("no_scaling", "transposed", "mask_inverted", "softmax_columns", "grad_no_scale", "single_entry",
            "kq_transposed", "no_mask")
DRILL_TOPICS = ("drill:shapes:scores", "drill:counts:kv_cache", "drill:masks:sdpa_bool", "drill:concepts:scaling")


def build(path: Path, answers: int, seed: int = 0) -> None:
    """A store at ``path`` with ``answers`` answers (written directly, in one transaction)."""
    Store.open(path).close()  # the schema, as attn-tutor creates it
    rng = random.Random(seed)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO sessions (id, exercise, mode, started, ended, complete)"
                     " VALUES (1, 'single-head-3x4', 'practice', '2026-01-01T00:00:00+00:00', NULL, 0)")
        rows, mistakes = [], []
        for i in range(1, answers + 1):
            if i % 5 == 0:
                step, exercise, head, family = rng.choice(DRILL_TOPICS), "drill:x", None, None
                exercise = "drill:" + step.split(":")[1]
            else:
                step, exercise = rng.choice(STEPS), rng.choice(EXERCISES)
                head, family = (rng.randrange(2) if step not in ("concat", "output") else None), exercise[:8]
            outcome = rng.choice(("correct", "correct", "wrong", "shown", "skipped"))
            rows.append((i, 1, "2026-01-01T00:00:00+00:00", exercise, step, head, outcome, 1, 0,
                         "1 2; 3 4", family))
            if outcome == "wrong" and family is not None:
                mistakes.append((i, rng.choice(MISTAKES), "diagnosis", 0))
        conn.executemany("INSERT INTO answers (id, session, at, exercise, step, head, outcome, attempt, hints,"
                         " answer, family) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        conn.executemany("INSERT INTO mistakes (answer, key, kind, rank) VALUES (?, ?, ?, ?)", mistakes)
        conn.executemany("INSERT INTO skills (step, family, state, learning_step, stability, difficulty, due,"
                         " last_review, reviews) VALUES (?, ?, 2, NULL, 3.5, 5.0, '2026-02-01T00:00:00+00:00',"
                         " '2026-01-01T00:00:00+00:00', 4)",
                         [(s, e[:8]) for s in STEPS for e in EXERCISES])
    conn.close()


def measure(home: Path, *argv: str) -> tuple[float, float, float]:
    """Peak RSS (MiB), CPU time (s) and wall time (s) of ``attn-tutor stats ...`` in a fresh process
    (that process's own resource usage, from ``wait4``)."""
    env = {**os.environ, "ATTN_TUTOR_HOME": str(home), "COLUMNS": "100", "NO_COLOR": "1"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "tutor", "stats", *argv], env=env, stdout=out, stderr=err,
                                 cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        if child.returncode != 0:
            err.seek(0)
            raise SystemExit(f"stats {' '.join(argv)} failed ({child.returncode}): {err.read().decode()}")
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=500_000)
    parser.add_argument("--build", metavar="PATH", help=argparse.SUPPRESS)  # the build, in a process of its own
    args = parser.parse_args()
    if args.build:
        build(Path(args.build), args.answers)
        return 0
    verdicts = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        started = time.perf_counter()
        # built in another process: a child started from this one would begin with this one's memory
        # (ru_maxrss counts it across exec), so this one stays small
        subprocess.run([sys.executable, __file__, "--answers", str(args.answers), "--build",
                        str(home / "progress.sqlite3")], check=True)
        size = (home / "progress.sqlite3").stat().st_size / 2**20
        print(f"store: {args.answers:,} answers, {size:.0f} MiB, built in {time.perf_counter() - started:.1f} s")
        for argv in ((), ("--format", "json")):
            peak, cpu, wall = measure(home, *argv)
            ok = peak <= TARGET_MIB and cpu <= TARGET_CPU_S
            verdicts.append(ok)
            name = " ".join(("stats", *argv))
            print(f"{name}: peak RSS {peak:.0f} MiB (target <= {TARGET_MIB}), CPU {cpu:.1f} s (target <= "
                  f"{TARGET_CPU_S:.0f}), wall {wall:.1f} s: {'PASS' if ok else 'MISS'}")
    print(f"load average: {os.getloadavg()[0]:.1f}")
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())

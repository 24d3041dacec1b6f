"""Start-up: `attn-tutor --help` against the `--help` of a hello-world Typer app.

Target (issue 19, item 7): `attn-tutor --help` takes at most 1.25 times what
`--help` of a one-command Typer app takes (both print their help through
typer's rich formatter, so both pay for importing typer, click and rich; the
ratio is what attn-tutor adds on top).  `attn-tutor list`, `attn-tutor
explain --help` and `attn-tutor drill shapes --help` are printed beside it
for reference (no target).

Each side runs as a fresh process (`python FILE --help`, the console script
for attn-tutor, a file holding the hello app for the other), warm file cache
and bytecode cached as an installed package has it (``PYTHONDONTWRITEBYTECODE``
is removed from the children's environment, and a first round writes the
cache: otherwise every run compiles attn-tutor's modules from source, the
message catalogue alone taking tens of milliseconds), the sides alternated
run by run so a busy spell hits both.  Two clocks:
wall time and the CPU time of the process (user + system, from
``os.wait4``), best of ``--runs`` each.  The verdict is on CPU time, which
other work on a shared machine moves less than wall time; both ratios are
printed.  With the load of other sessions at 5-10 on 2 cores even the CPU
ratio moved by 0.1-0.2 from run to run, so ``--instructions`` also counts
the instructions each case executes under valgrind's callgrind (one run
each, about half a minute; the same whatever the load), and the verdict is
then on that ratio.

Run:  .venv/bin/python benchmarks/startup.py [--runs N] [--instructions]   (also part of `make bench`)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.25
HELLO = '''\
import typer

app = typer.Typer()


@app.command()
def hello(name: str = "world") -> None:
    """Say hello."""
    print(f"hello {name}")


if __name__ == "__main__":
    app()
'''


def attn_tutor() -> list[str]:
    """The command that runs attn-tutor: the console script beside this interpreter, else ``-m tutor``."""
    script = Path(sys.executable).with_name("attn-tutor")
    return [sys.executable, str(script)] if script.exists() else [sys.executable, "-m", "tutor"]


def run_once(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Run ``argv`` once; its wall time and CPU time (user + system) in seconds.  Fails on a non-zero exit."""
    start = time.perf_counter()
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd,
                            env={**env, "COLUMNS": "100"})
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited with {proc.returncode}: {err}")
    return wall, usage.ru_utime + usage.ru_stime


def best(cases: dict[str, list[str]], runs: int, cwd: Path) -> dict[str, tuple[float, float]]:
    """Best wall and best CPU time of every case over ``runs`` alternated rounds (one warm-up round first)."""
    for argv in cases.values():
        run_once(argv, cwd)
    walls: dict[str, list[float]] = {name: [] for name in cases}
    cpus: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, argv in cases.items():
            wall, cpu = run_once(argv, cwd)
            walls[name].append(wall)
            cpus[name].append(cpu)
    return {name: (min(walls[name]), min(cpus[name])) for name in cases}


def instructions(argv: list[str], cwd: Path) -> int:
    """The instructions ``argv`` executes (callgrind's ``Collected``), hash seed fixed."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv], cwd=cwd,
                          env={**env, "COLUMNS": "100", "PYTHONHASHSEED": "0"}, capture_output=True, text=True,
                          check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from valgrind: {done.stderr[-500:]}")
    return int(found.group(1))


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover - no load average on this platform
        return "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="rounds per case (best of them is kept)")
    parser.add_argument("--instructions", action="store_true",
                        help="also count instructions under valgrind (load-independent; about 30 s per case)")
    args = parser.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    tool = attn_tutor()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "hello.py").write_text(HELLO, encoding="utf-8")
        cases = {
            "hello-world Typer app --help": [sys.executable, "hello.py", "--help"],
            "attn-tutor --help": [*tool, "--help"],
            "attn-tutor explain --help": [*tool, "explain", "--help"],
            "attn-tutor drill shapes --help": [*tool, "drill", "shapes", "--help"],
            "attn-tutor list": [*tool, "list"],
        }
        print(f"load average before: {load()}; best of {args.runs} fresh processes per case")
        times = best(cases, args.runs, folder)
        print(f"load average after:  {load()}")
        counts = {name: instructions(argv, folder) for name, argv in cases.items()} if args.instructions else {}
    base_wall, base_cpu = times["hello-world Typer app --help"]
    print(f"{'case':34} {'wall ms':>8} {'CPU ms':>8} {'wall ratio':>11} {'CPU ratio':>10}")
    for name, (wall, cpu) in times.items():
        print(f"{name:34} {wall * 1000:8.1f} {cpu * 1000:8.1f} {wall / base_wall:11.2f} {cpu / base_cpu:10.2f}")
    ratio, clock = times["attn-tutor --help"][1] / base_cpu, "CPU"
    if counts:
        base_count = counts["hello-world Typer app --help"]
        print(f"{'case':34} {'instructions':>14} {'ratio':>6}")
        for name, count in counts.items():
            print(f"{name:34} {count:14,} {count / base_count:6.2f}")
        print(f"attn-tutor --help / hello-world --help (CPU): {ratio:.2f}")
        ratio, clock = counts["attn-tutor --help"] / base_count, "instructions"  # the load does not move it
    verdict = "PASS" if ratio <= TARGET else "MISS"
    print(f"attn-tutor --help / hello-world --help ({clock}): {ratio:.2f}, target <= {TARGET}: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

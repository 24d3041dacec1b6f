# Two set-up commands, each self-sufficient and order-independent:
#   make run       - create .venv, install, show the classic worked solution
#   make test      - create .venv if needed, install test extras, run the whole suite
#   make test-fast - the same, a subset for the edit-test loop (under a minute; see FAST below)
#   make lint      - ruff over the code and the tests, mypy over the package
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check

.PHONY: run test test-fast lint bench fuzz venv install install-test clean

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "attn-tutor needs Python >= 3.11")'
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(PY) pyproject.toml
	$(PIP) -e .
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) -e '.[test]'
	@touch $@

$(VENV)/.installed-bench: $(VENV)/.installed-test  # benchmarks/answers_budget.py grades the tests' inputs
	$(PIP) torch==2.13.0
	@touch $@

venv: $(PY)
install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

run: $(VENV)/.installed
	$(VENV)/bin/attn-tutor explain single-head-3x4

# The suite runs on every core (pytest-xdist; each worker takes the next test when it is free).
# JOBS=0 runs it in this one process (what `pytest FILE` does too), e.g. to use a debugger.
JOBS ?= auto
XDIST = -n $(JOBS) $(if $(filter 0,$(JOBS)),,--dist worksteal)

test: $(VENV)/.installed-test
	$(PY) -m pytest $(XDIST)

# A subset for the edit-test loop, under a minute on a 2-core machine, that exercises every package of
# tutor/.  Measured with coverage, the share of each package's functions these files run (not only import),
# at least:
# answers 78%, audit 80%, authoring 65%, base 75%, cli 63%, drills 80%, exact 83%, exercise 88%, flash 70%,
# mistakes 77%, numeric 96%, practice 85%, production 89%, render 79%, steps 79%, store 81%.
#   test_exercise          exercise: the schema, the checks, v2, YAML reading
#   test_grading_rule      answers, practice, audit (check), mistakes, render, store, cli: one grading rule
#   test_shared_kv_views   steps, exact, production, numeric, render: grouped K/V heads, forward and backward
#   test_numeric           numeric: the NumPy mirror (less the test that runs pytest in a process)
#   test_tiled_practice    flash: the online-softmax drill
#   test_drill_interview   drills
#   test_goldens_issue11   authoring (new --like), render, practice: to the character
#   test_cli_commands      cli: every command's module and help
#   test_schedule          store: the FSRS schedule and stats
# No file here imports torch (seconds per worker).  A new package needs a file here that runs it.
# `make test` stays the whole suite: run it before a commit.
FAST = tests/test_exercise.py tests/test_grading_rule.py tests/test_shared_kv_views.py tests/test_numeric.py \
	tests/test_tiled_practice.py tests/test_drill_interview.py tests/test_goldens_issue11.py \
	tests/test_cli_commands.py tests/test_schedule.py tests/test_katas_catch_every_mistake.py \
	--deselect tests/test_numeric.py::test_parity_tests_fail_without_torch_only_when_required

test-fast: $(VENV)/.installed-test
	$(PY) -m pytest $(XDIST) $(FAST)

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check tutor tests
	$(VENV)/bin/mypy tutor

# Only the fuzz tests, with FUZZ examples each (make test runs a few): tests/test_fuzz.py (answers,
# exercise files, solution files), the terminal fuzz of tests/test_terminal.py and the files at the
# limits of tests/test_engine_limits.py.  Measured: 700 took 25 minutes on a 2-core machine shared
# with other work (load 5-8; a typed-answer example ~1 s, the others ~0.4 s), so 1000 takes ~35.
FUZZ ?= 1000

fuzz: $(VENV)/.installed-test
	ATTN_TUTOR_FUZZ=$(FUZZ) ATTN_TUTOR_FUZZ_EXAMPLES=$(FUZZ) $(PY) -m pytest --durations=5 tests/test_fuzz.py \
		tests/test_terminal.py::test_fuzzed_text_through_every_command_and_format \
		tests/test_engine_limits.py::test_files_at_the_limits_validate_and_explain

bench: $(VENV)/.installed-bench
	$(PY) benchmarks/startup.py
	$(PY) benchmarks/answers_budget.py
	$(PY) benchmarks/exact_limits.py
	$(PY) benchmarks/run.py
	$(PY) benchmarks/backward.py
	$(PY) benchmarks/stats_memory.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build dist

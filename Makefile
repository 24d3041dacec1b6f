# Two set-up commands, each self-sufficient and order-independent:
#   make run   - create .venv, install, show the classic worked solution
#   make test  - create .venv if needed, install test extras, run the suite
#   make lint  - ruff over the code and the tests, mypy over the package
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check

.PHONY: run test lint bench fuzz venv install install-test clean

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

test: $(VENV)/.installed-test
	$(PY) -m pytest

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
	$(PY) benchmarks/answers_budget.py
	$(PY) benchmarks/exact_limits.py
	$(PY) benchmarks/run.py
	$(PY) benchmarks/backward.py
	$(PY) benchmarks/stats_memory.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build dist

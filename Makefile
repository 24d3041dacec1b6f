# Two set-up commands, each self-sufficient and order-independent:
#   make run   - create .venv, install, show the classic worked solution
#   make test  - create .venv if needed, install test extras, run the suite
#   make lint  - ruff over the code and the tests, mypy over the package
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check

.PHONY: run test lint bench venv install install-test clean

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "attn-tutor needs Python >= 3.11")'
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(PY) pyproject.toml
	$(PIP) -e .
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) -e '.[test]'
	@touch $@

$(VENV)/.installed-bench: $(VENV)/.installed
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

bench: $(VENV)/.installed-bench
	$(PY) benchmarks/answers_budget.py
	$(PY) benchmarks/exact_limits.py
	$(PY) benchmarks/run.py
	$(PY) benchmarks/backward.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build dist

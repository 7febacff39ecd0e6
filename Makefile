PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: demo test lint install install-test clean

# the demo's environment: torch (CPU build) and statetrack's own dependencies, nothing the demo does not import
$(VENV)/.installed: pyproject.toml
	@echo "set-up 1/4: a virtualenv in $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "set-up 2/4: the latest pip"
	$(PIP) install --progress-bar on --upgrade pip
	@echo "set-up 3/4: torch 2.13.0, CPU build (the largest download; pip shows each file as it comes)"
	$(PIP) install --progress-bar on torch==2.13.0
	@echo "set-up 4/4: statetrack and what it imports (numpy, matplotlib, pydantic, pyyaml, rich, safetensors)"
	$(PIP) install --progress-bar on -e .
	touch $@
	@echo "set-up done: $(VENV)/bin/statetrack"

# the tests' extras on top: pytest, hypothesis, sympy, ray, triton, tensorboard, tokenizers, ruff, mypy, ...
$(VENV)/.installed-test: $(VENV)/.installed
	@echo "set-up: the test tools and the optional packages the tests cover (statetrack[test])"
	$(PIP) install --progress-bar on -e '.[test]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

demo: install
	$(VENV)/bin/statetrack reproduce khavari2025-parity --scale quick

test: install-test
	$(PY) -m pytest -q

lint: install-test
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) runs

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: demo test lint install clean

$(VENV)/.installed: pyproject.toml
	@echo "set-up 1/4: a virtualenv in $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "set-up 2/4: the latest pip"
	$(PIP) install --progress-bar on --upgrade pip
	@echo "set-up 3/4: torch 2.13.0, CPU build (the largest download; pip shows each file as it comes)"
	$(PIP) install --progress-bar on torch==2.13.0
	@echo "set-up 4/4: statetrack and its test tools (numpy, matplotlib, pydantic, rich, pytest, ruff, mypy, ...)"
	$(PIP) install --progress-bar on -e '.[test]'
	touch $@
	@echo "set-up done: $(VENV)/bin/statetrack"

install: $(VENV)/.installed

demo: install
	$(VENV)/bin/statetrack reproduce khavari2025-parity --scale quick

test: install
	$(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) runs

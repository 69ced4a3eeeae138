# Two commands do all the set-up on a fresh machine:
#   make demo   creates .venv, installs duckscore, scores the bundled SciFact log
#   make test   the same set-up plus test dependencies, then the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test install install-test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel

# build/ is removed first: setuptools reuses it, and a module deleted from the tree would
# otherwise still ship from an earlier build.
install: $(BIN)/python
	rm -rf build
	$(BIN)/python -m pip install --quiet --no-build-isolation .

install-test: $(BIN)/python
	rm -rf build
	$(BIN)/python -m pip install --quiet --no-build-isolation ".[test]"

demo: install
	$(BIN)/duckscore demo

test: install-test
	$(BIN)/python -m pytest -n auto --dist loadgroup

clean:
	rm -rf build *.egg-info duckscore-demo .pytest_cache

# Two commands do all the set-up on a fresh machine:
#   make demo   creates .venv, installs duckscore, scores the bundled SciFact log
#   make test   the same set-up plus test dependencies, then the checks and the whole test suite
# For the inner loop: make check (lint, format, types: seconds), make test-fast (no slow tests).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-fast test-extended check install install-test integrations mutants clean

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

# demo stays lean: duckscore alone. A command that needs an optional extra (serve, phoenix,
# spark, postgres) names it in one line, `pip install 'duckscore[serve]'` (from a checkout:
# $(BIN)/python -m pip install '.[serve]'); orchestrator/common/extras.py holds the text.
demo: install
	$(BIN)/duckscore demo

check: install-test
	$(BIN)/ruff check orchestrator tests benchmarks
	$(BIN)/ruff format --check orchestrator tests benchmarks
	$(BIN)/mypy orchestrator

test: check
	$(BIN)/python -m pytest -n auto --dist loadgroup -m "not extended" --durations=25

# The integrations' own tools, each in its own environment, as their users run them: their pins
# conflict with the test extra's (dbt-core 1.11 needs pathspec < 0.13, mypy >= 1.0; arize-phoenix
# needs sqlglot older than duckscore's). tests/integrations/requirements-*.txt pin them.
.venv-dbt/bin/dbt: tests/integrations/requirements-dbt.txt
	$(PYTHON) -m venv .venv-dbt
	.venv-dbt/bin/python -m pip install --quiet -r $<
	touch $@

.venv-phoenix/bin/phoenix: tests/integrations/requirements-phoenix.txt
	$(PYTHON) -m venv .venv-phoenix
	.venv-phoenix/bin/python -m pip install --quiet -r $<
	touch $@

# the producers of fixtures/traces (LangChain, LlamaIndex, their instrumentations, the OpenTelemetry
# SDK): tests/integrations/trace_apps.py regenerates the fixtures with them. The stamp is the
# installed versions (bin/python is a link to the interpreter: touching it would touch that).
.venv-traces/freeze.txt: tests/integrations/requirements-traces.txt
	$(PYTHON) -m venv .venv-traces
	.venv-traces/bin/python -m pip install --quiet -r $<
	.venv-traces/bin/python -m pip freeze > $@

integrations: .venv-dbt/bin/dbt .venv-phoenix/bin/phoenix .venv-traces/freeze.txt

# what `make test` leaves out to stay within CI's time (redundant with cases it keeps), and the
# integrations against the real tools (dbt build, a Phoenix server)
test-extended: install-test integrations
	$(BIN)/python -m pytest -n auto --dist loadgroup -m extended --durations=25

# a sample of the SQL templates' mutants against their fast tests (docs/testing.md, "Mutation testing")
mutants: install-test
	$(BIN)/python -m tests.mutants.run --sample 3 --seed 0 --jobs 2

test-fast: install-test
	$(BIN)/python -m pytest -n auto -m "not slow"

clean:
	rm -rf build *.egg-info duckscore-demo duckscore-bids-demo .pytest_cache .mypy_cache .ruff_cache

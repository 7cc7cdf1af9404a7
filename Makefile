# attnkit: `make lab` to learn, `make test` to check everything. See README.md.
PYTHON   ?= python3.11
VENV     := .venv
PY       := $(VENV)/bin/python
STAMP    := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium
# Extra pip options, e.g. PIP_ARGS='--extra-index-url https://download.pytorch.org/whl/cpu' (README).
PIP_ARGS ?=
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: setup lab test chromium data bench site figures

setup: $(STAMP)

# The environment is rebuilt whenever pyproject.toml (the one list of pinned packages) changes.
$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "make: $(PYTHON) not found; install Python 3.11 (or: make PYTHON=/path/to/python3.11 ...)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(PIP_ARGS) -e '.[dev,site]'
	touch $@

lab: setup
	$(VENV)/bin/jupyter lab $(ROOT_FLAG) notebooks/

# Unit tests, then every notebook under nbval: notebooks are committed without outputs, so
# --nbval-lax runs every cell and their assert cells carry the checks; --dist loadfile keeps
# each notebook's cells on one worker (one kernel, in order). One thread per worker: two
# workers already fill two cores, and oversubscribed OpenMP threads made training ~10x slower.
# The student edition (build/student: every solution a stub) runs under nbval too; the root
# conftest.py requires every check cell to print ✅ in notebooks/ and ⏳ in the student edition.
test: setup chromium
	$(PY) -m attnkit student build/student --force
	OMP_NUM_THREADS=1 CHROMIUM=$(CHROMIUM) $(PY) -m pytest -n 2 --dist loadfile --nbval-lax tests notebooks build/student

# The course for a class: the student edition (stubs, hints, no solutions) to hand out, and the
# self-study edition (each solution collapsed under its stub). Neither overwrites a changed notebook.
.PHONY: student self-study
student: setup
	$(PY) -m attnkit student student

self-study: setup
	$(PY) -m attnkit student self-study --with-solutions

# The course site: every notebook run on the committed checkpoints and rendered with its outputs
# to site/ (index.html first), readable offline; then the site's browser test on every page.
# npm fetches two pinned JavaScript packages once (build/site-vendor/). About 4 minutes on 2 cores.
site: setup chromium
	OMP_NUM_THREADS=1 $(PY) docs/build_site.py --out site
	ATTNKIT_SITE=site CHROMIUM=$(CHROMIUM) $(PY) -m pytest -q -p no:cacheprovider tests/test_site.py

# The README's pictures in docs/, from the committed checkpoints and results (docs/figures.json
# records a hash of what each was drawn from; tests/test_docs_figures.py fails when one is stale).
figures: setup chromium
	OMP_NUM_THREADS=1 CHROMIUM=$(CHROMIUM) $(PY) docs/make_figures.py

# Headless Chromium for the browser test, from the system's packages.
chromium:
	@if [ -x "$(CHROMIUM)" ]; then exit 0; fi; \
	if ! command -v apt-get >/dev/null; then \
		echo "make: Chromium not found at $(CHROMIUM); install it and run: make test CHROMIUM=/path/to/chromium"; exit 1; \
	elif [ "$$(id -u)" = 0 ]; then SUDO=; \
	elif command -v sudo >/dev/null; then SUDO=sudo; \
	else echo "make: Chromium is missing and installing it needs root: apt-get install chromium"; exit 1; fi; \
	echo "Installing Chromium for the browser test..."; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null

# Regenerate every committed checkpoint and result file in data/ (long: minutes each).
data: setup
	$(PY) -m attnkit train adder
	$(PY) -m attnkit train sortedness
	$(PY) -m attnkit study ablation

# nbgrader out of the box: nbgrader 0.9.5 in an environment of its own (build/nbgrader-venv, never the
# learner's install), generate_assignment + autograde on planted submissions (honest, wrong, blank,
# cheating), compared exercise by exercise with `attnkit grade`. Minutes: not part of `make test`.
.PHONY: nbgrader-check
NBGRADER_VENV := build/nbgrader-venv
$(NBGRADER_VENV)/.installed:
	$(PYTHON) -m venv $(NBGRADER_VENV)
	$(NBGRADER_VENV)/bin/pip install --quiet $(PIP_ARGS) nbgrader==0.9.5
	touch $@

nbgrader-check: setup $(NBGRADER_VENV)/.installed
	OMP_NUM_THREADS=1 $(PY) tests/nbgrader_check.py $(NBGRADER_VENV) 01 06

bench: setup
	@for script in benchmarks/bench_*.py benchmarks/check_gpu.py; do echo "== $$script"; $(PY) $$script || exit 1; done

# Every README number recomputed where `make test` cannot afford it: every sortedness run (seeds 1-2,
# the variants) from its checkpoint in data/sortedness-runs/, two of them and the adder retrained,
# notebook 02's short runs, the whole ablation study; and each of notebooks 02-05 run against a
# broken checkpoint, which must fail: tests/test_claims.py, tests/test_broken_models.py.
# worksteal: an idle worker takes queued tests from the busy one (the long tests are uneven).
.PHONY: claims
claims: setup
	ATTNKIT_CLAIMS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -n 2 --dist worksteal -p no:cacheprovider tests/test_claims.py tests/test_broken_models.py

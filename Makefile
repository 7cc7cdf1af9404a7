# attnkit: `make lab` to learn, `make test` to check everything. See README.md.
PYTHON   ?= python3.11
VENV     := .venv
PY       := $(VENV)/bin/python
STAMP    := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium
# Extra pip options, e.g. a mirror: PIP_ARGS='--index-url https://pypi.example.edu/simple'.
PIP_ARGS ?=
# Every install takes its exact versions from constraints.txt (the lock); pyproject.toml states ranges.
LOCK     := constraints.txt
# On Linux, PyPI's torch bundles CUDA (several GB): take the CPU build from PyTorch's own index
# instead. `make lab TORCH_INDEX=` keeps PyPI's build, for a learner with an NVIDIA GPU.
TORCH_INDEX ?= $(if $(filter Linux,$(shell uname -s)),https://download.pytorch.org/whl/cpu)
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
# The learner's edition `make lab` opens: stubs first, each solution folded beneath (git-ignored).
LEARNER_EDITION := self-study
comma := ,

.PHONY: setup lab solutions test check test-cpus chromium data bench site figures lint

# One environment, .venv: the lab extra (JupyterLab) for `make lab`; dev and site for the tests.
LAB_STAMP := $(VENV)/.installed-lab
setup: $(STAMP)
$(PY):
	@command -v $(PYTHON) >/dev/null || { echo "make: $(PYTHON) not found; install Python 3.11 (or: make PYTHON=/path/to/python3.11 ...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)

# torch on its own first (--no-deps: only torch comes from its index), then the rest.
define install
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet --no-deps $(PIP_ARGS) -c $(LOCK) \
		$(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) torch
	$(PY) -m pip install --quiet $(PIP_ARGS) -c $(LOCK) -e '.[$(1)]'
endef

$(STAMP): pyproject.toml $(LOCK) | $(PY)
	$(call install,lab$(comma)dev$(comma)site)
	touch $@ $(LAB_STAMP)

$(LAB_STAMP): pyproject.toml $(LOCK) | $(PY)
	$(call install,lab)
	touch $@

# JupyterLab on the learner's edition, written once to self-study/ (a notebook you changed there is
# never overwritten; a notebook new to the course is added). Instructors: `make solutions`.
lab: $(LAB_STAMP)
	$(PY) -m attnkit course $(LEARNER_EDITION) --edition self-study --keep-changed
	$(VENV)/bin/jupyter lab $(ROOT_FLAG) $(LEARNER_EDITION)/

# The solved notebooks (every answer written out), for instructors and the tests.
solutions: $(LAB_STAMP)
	$(VENV)/bin/jupyter lab $(ROOT_FLAG) notebooks/

# Unit tests, then every notebook under nbval: notebooks are committed without outputs, so
# --nbval-lax runs every cell and their assert cells carry the checks; --dist loadfile keeps
# each notebook's cells on one worker (one kernel, in order). One thread per worker: two
# workers already fill two cores, and oversubscribed OpenMP threads made training ~10x slower.
# The student edition (build/student: every solution a stub) runs under nbval too; the root
# conftest.py requires every check cell to print ✅ in notebooks/ and ⏳ in the student edition, and
# skips the student edition's cells that repeat the solution edition's work (attnkit/course/repeats.py)
# and hands out the longest files first (--no-loadscope-reorder keeps that order). Bytecode caches
# are written even where PYTHONDONTWRITEBYTECODE is set: the suite starts ~60 Python processes
# (kernels, graders, scripts), and without them each compiles the kit, and each worker rewrites the
# tests' asserts, from source (they go to the git-ignored __pycache__ folders).
# Every process of the suite keeps the memory it frees (KEEP_FREED: glibc's thresholds as the kit's
# CLI sets them, attnkit/core/allocator.py; other C libraries ignore it): evaluation frees and
# allocates blocks of a few MB hundreds of times, and with glibc's defaults each comes back as page
# faults (tests/test_claims.py alone: 9.3 s of system time -> 0.3 s, 37 -> 27 s). What is computed
# does not change; `make lab` keeps glibc's defaults, and there a notebook kernel gives freed memory back
# after every cell (attnkit/core/allocator.py; KEEP_FREED switches that off too).
KEEP_FREED := GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824
test: setup chromium site-vendor
	PYTHONDONTWRITEBYTECODE= $(PY) -m attnkit student build/student --force
	PYTHONDONTWRITEBYTECODE= OMP_NUM_THREADS=1 $(KEEP_FREED) CHROMIUM=$(CHROMIUM) $(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder --nbval-lax tests notebooks build/student

# The fast tier, for a developer between edits: the unit tests that start no kernel, subprocess
# or browser and train nothing. Whole files are left out where they start processes (their other
# tests run under `make test`); `slow` and `browser` marks are left out everywhere. No nbval.
CHECK_SKIP := nbgrader_check.py test_broken_models.py test_browser.py test_course.py test_grading.py \
	test_guards_files.py test_guards_runs.py test_imports.py test_notebooks.py test_resources.py \
	test_install.py test_robustness.py test_site.py test_site_vendor.py test_wheel.py test_wheel_hub.py test_widgets.py test_claims.py test_bench_threads.py
check: setup
	OMP_NUM_THREADS=1 $(KEEP_FREED) $(PY) -m pytest -q -n 2 -p no:cacheprovider -o addopts="-p pytest_startup" -m "not slow and not browser" \
		$(addprefix --ignore=tests/,$(CHECK_SKIP)) tests

# Lint, format and types: ruff and mypy in an environment of their own (build/lint-venv), never in
# a learner's install; mypy reads the kit's own environment for torch's and numpy's types.
LINT_VENV := build/lint-venv
$(LINT_VENV)/.installed:
	$(PYTHON) -m venv $(LINT_VENV)
	$(LINT_VENV)/bin/python -m pip install --quiet ruff==0.17.6 mypy==2.4.1
	touch $@

LINTED := attnkit tests benchmarks docs conftest.py
lint: setup $(LINT_VENV)/.installed
	$(LINT_VENV)/bin/ruff check $(LINTED)
	$(LINT_VENV)/bin/ruff format --check $(LINTED)
	$(LINT_VENV)/bin/mypy --python-executable $(PY)

# The float-sensitive tests under each of PyTorch's CPU kernel sets (ATEN_CPU_CAPABILITY): float32
# rounds differently under AVX2, AVX-512 and the plain "default" kernels, and the suite must pass
# under all of them; `make test` runs the best set this CPU has. On a CPU without AVX-512, "avx512"
# falls back to the best it has. FLOAT_TESTS: every test module that compares floats computed by
# torch kernels, and every notebook (their assert cells and stated numbers); the browser, grading
# and site tests compute nothing new. .ci/run runs FLOAT_UNIT_TESTS under default and avx2.
CPU_CAPABILITIES ?= default avx2 avx512
FLOAT_UNIT_TESTS := tests/test_attention.py tests/test_hooks.py tests/test_model.py tests/test_patching.py \
	tests/test_positional.py tests/test_sortedness.py tests/test_ablation.py tests/test_roles.py tests/test_adder.py \
	tests/test_train.py tests/test_data.py tests/test_exercises_attention.py tests/test_exercises_adder.py \
	tests/test_exercises_heatmaps.py tests/test_exercises_ablation.py tests/test_exercises_positional.py \
	tests/test_exercises_patching.py tests/test_every_checker.py tests/test_edge_cases_checks.py \
	tests/test_planted_mistakes_checks.py tests/test_reseed_and_inputs_checks.py tests/test_fused.py
FLOAT_TESTS ?= $(FLOAT_UNIT_TESTS) notebooks
test-cpus: setup
	@for cap in $(CPU_CAPABILITIES); do \
		echo "== ATEN_CPU_CAPABILITY=$$cap"; \
		ATEN_CPU_CAPABILITY=$$cap OMP_NUM_THREADS=1 $(KEEP_FREED) $(PY) -m pytest -q -n 2 --dist loadfile -p no:cacheprovider $(FLOAT_TESTS) || exit 1; \
	done

# The course for a class: the student edition (stubs, hints, no solutions) to hand out, and the
# self-study edition (each solution collapsed under its stub). Neither overwrites a changed notebook.
.PHONY: student self-study
student: $(LAB_STAMP)
	$(PY) -m attnkit course student --edition student --keep-changed

self-study: $(LAB_STAMP)
	$(PY) -m attnkit course self-study --edition self-study --keep-changed

# The course site: every notebook run on the committed checkpoints and rendered with its outputs
# to site/ (index.html first), readable offline; then the site's browser test on every page.
# npm fetches two pinned JavaScript packages once (build/site-vendor/). About 4 minutes on 2 cores.
site: setup chromium site-vendor
	OMP_NUM_THREADS=1 $(PY) docs/build_site.py --out site
	ATTNKIT_SITE=site CHROMIUM=$(CHROMIUM) $(PY) -m pytest -q -p no:cacheprovider tests/test_site.py

# The pinned JavaScript packages of the site and of the tests' accessibility checks (axe-core), fetched
# once with npm into build/site-vendor/ before the tests start (not by whichever test needs one first,
# inside pytest's time). Without npm, the tests that need them say so: skipped, or failed under CI.
.PHONY: site-vendor
site-vendor: setup
	@if command -v npm >/dev/null; then $(PY) docs/build_site.py --fetch-only; \
	else echo "make: npm not found: the site and accessibility tests need it once (apt-get install npm)"; fi

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
	$(PY) -m attnkit study replay

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

# TransformerLens's hook idioms run by the same code on TransformerLens itself and on the adder
# (tests/compat/transformer_lens_check.py): TransformerLens 3.9 and 4.3, each in an environment of
# its own (build/tl-venv, build/tl4-venv; never the learner's install; torch and numpy at the lock's
# versions). About 2 minutes the first time (pip installs transformers, datasets, wandb... once: the
# second environment is a copy of the first, upgraded), about 25 seconds after. Not in `make test`;
# CI runs it.
TL_VENV := build/tl-venv
TL_VERSION := 3.9.0
$(TL_VENV)/.installed:
	$(PYTHON) -m venv $(TL_VENV)
	# torch alone from the CPU index, as setup does: with that index beside PyPI for every package,
	# pip retried the unreachable index for each of TransformerLens's ~80 and took 11 minutes, not 2.
	$(TL_VENV)/bin/pip install --quiet --no-deps $(PIP_ARGS) -c $(LOCK) \
		$(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) torch
	$(TL_VENV)/bin/pip install --quiet $(PIP_ARGS) -c $(LOCK) transformer-lens==$(TL_VERSION)
	touch $@

# TransformerLens 4 removed HookedTransformer: the script checks its TransformerBridge instead, on
# TransformerLens's own model and around a small GPT-2, both made from configs (nothing downloaded).
TL4_VENV := build/tl4-venv
TL4_VERSION := 4.3.0
# A copy of the 3.9 environment, upgraded: torch and most of the rest are already there (seconds,
# where a fresh environment took 2.5 minutes). `python -m pip`: the copy's scripts name the original.
$(TL4_VENV)/.installed: $(TL_VENV)/.installed
	rm -rf $(TL4_VENV) && cp -a $(TL_VENV) $(TL4_VENV) && rm $(TL4_VENV)/.installed
	$(TL4_VENV)/bin/python -m pip install --quiet $(PIP_ARGS) -c $(LOCK) transformer-lens==$(TL4_VERSION)
	touch $@

.PHONY: hooks-check
hooks-check: $(TL_VENV)/.installed $(TL4_VENV)/.installed
	OMP_NUM_THREADS=1 $(TL_VENV)/bin/python tests/compat/transformer_lens_check.py
	OMP_NUM_THREADS=1 $(TL4_VENV)/bin/python tests/compat/transformer_lens_check.py

# The speed guard (benchmarks/speed_guard.py, about 35 s): the kit's hot paths as ratios against a
# PyTorch-only baseline of the same run, failing when one is more than its margin above the
# committed figure (benchmarks/speed_guard.json); then two planted slowdowns, which must fail it.
.PHONY: speed-guard
speed-guard: setup
	cd benchmarks && ../$(PY) speed_guard.py
	cd benchmarks && if ../$(PY) speed_guard.py --plant chunk16 --only evaluation; then \
		echo "speed-guard: a chunk size of 16 was not caught"; exit 1; fi
	cd benchmarks && if ../$(PY) speed_guard.py --plant hook-sleep --only "training step" --only "ablation sweep"; then \
		echo "speed-guard: a sleep in every hook point was not caught"; exit 1; fi
	@echo "speed-guard: the kit is as fast as committed, and both planted slowdowns were caught"

bench: setup
	@for script in benchmarks/bench_*.py benchmarks/check_gpu.py; do echo "== $$script"; $(PY) $$script || exit 1; done

# Every benchmark on a tiny scale (--smoke, seconds each; CI runs it): a figure's command keeps working.
# Two at a time, each on one thread (their numbers mean nothing here; each writes only to a temporary
# folder), the longest (the site's, 42 s) first: one at a time left a core idle for two and a half minutes of CI.
SMOKES := smoke-bench_site $(filter-out smoke-bench_site,$(patsubst benchmarks/%.py,smoke-%,$(wildcard benchmarks/bench_*.py)))
.PHONY: bench-smoke $(SMOKES)
bench-smoke: setup
	$(MAKE) --no-print-directory -j2 --output-sync=target $(SMOKES)
	cd benchmarks && ../$(PY) check_gpu.py
$(SMOKES): smoke-%:
	@echo "== benchmarks/$*.py --smoke"
	@cd benchmarks && OMP_NUM_THREADS=1 $(KEEP_FREED) ../$(PY) $*.py --smoke

# The kit as an administrator installs it (tests/test_wheel.py): the sdist and wheel built, the wheel
# installed into a fresh venv outside the repository with the lock; every model loaded, the
# instructor's path (course, student, grade on per-learner folders) compared with the clone's,
# notebook 03 run there; then the wheel added to an environment built like a year-old hub
# (tests/compat/year-old-hub.txt), which must not change, with notebooks 01 and 03 run there.
# Minutes (pip installs torch and JupyterLab into two venvs); CI runs it. compat-test: the last part only.
.PHONY: wheel-test compat-test
# Two workers, a file each: the year-old hub's environment is built and run beside the fresh venv's.
wheel-test: setup
	ATTNKIT_WHEEL=1 OMP_NUM_THREADS=1 $(PY) -m pytest -q -n 2 --dist loadfile -p no:cacheprovider \
		tests/test_wheel.py tests/test_wheel_hub.py

compat-test: setup
	ATTNKIT_WHEEL=1 OMP_NUM_THREADS=1 $(PY) -m pytest -q -p no:cacheprovider tests/test_wheel_hub.py

# A real JupyterHub serving the course (tests/hub/hub_check.py; not in `make test`; needs root: it
# makes a Unix user per learner and removes them after). JupyterHub and the kit's wheel go into
# build/hub/venv, made from a Python every user may run; configurable-http-proxy from npm into
# build/hub/chp. Three learners at once run notebooks 03 and 04 through the hub: about 2 minutes
# once build/hub exists (the first run installs JupyterHub, torch and JupyterLab there: 2-3 more).
HUB_PYTHON ?= /usr/bin/python3.11
JUPYTERHUB_VERSION := 6.1.1
CHP_VERSION := 5.3.0
HUB := build/hub
.PHONY: hub
hub: setup
	@test "$$(id -u)" = 0 || { echo "make hub: run as root (it makes a Unix user per learner)"; exit 1; }
	@command -v npm >/dev/null || { echo "make hub: npm is missing (apt-get install npm)"; exit 1; }
	rm -rf build/lib build/bdist.* $(HUB)/dist
	$(PY) -m pip wheel --quiet --no-deps -w $(HUB)/dist .
	rm -rf build/lib build/bdist.*
	test -x $(HUB)/venv/bin/python || $(HUB_PYTHON) -m venv $(HUB)/venv
	$(HUB)/venv/bin/pip install --quiet $(PIP_ARGS) jupyterhub==$(JUPYTERHUB_VERSION)
	$(HUB)/venv/bin/pip install --quiet $(PIP_ARGS) -c $(LOCK) "$$(ls $(HUB)/dist/attnkit-*.whl)[lab]"
	$(HUB)/venv/bin/pip install --quiet --force-reinstall --no-deps $(HUB)/dist/attnkit-*.whl  # same version, new build
	test -x $(HUB)/chp/node_modules/.bin/configurable-http-proxy || \
		npm install --prefix $(HUB)/chp --no-save --no-audit --no-fund configurable-http-proxy@$(CHP_VERSION)
	$(HUB)/venv/bin/python tests/hub/hub_check.py --venv $(HUB)/venv --proxy $(HUB)/chp/node_modules/.bin/configurable-http-proxy

# Every README number recomputed where `make test` cannot afford it: every sortedness run (seeds 1-2,
# the variants) from its checkpoint in data/sortedness-runs/, two of them and the adder retrained,
# notebook 02's short runs, the whole ablation study; and each of notebooks 02-05 run against a
# broken checkpoint, which must fail: tests/test_claims.py, tests/test_broken_models.py.
# worksteal: an idle worker takes queued tests from the busy one (the long tests are uneven).
.PHONY: claims
claims: setup
	ATTNKIT_CLAIMS=1 OMP_NUM_THREADS=1 $(PY) -m pytest -n 2 --dist worksteal -p no:cacheprovider tests/test_claims.py tests/test_broken_models.py

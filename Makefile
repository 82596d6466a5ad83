# tiedlm — make setup | make test | make main [EXP=v3 SCALE=cpu] | make lint
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SCALE ?= cpu
EXPS ?= v3 v4
export OMP_NUM_THREADS ?= 2

.PHONY: setup test main lint clean-runs

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $@

# The test suite: smoke-sized, CPU only, a minute or two.
test: setup
	$(BIN)/python -m pytest -q

# The main job (until the notebooks land): train and evaluate the paper's v3 (single-depth) and v4 (multi-depth)
# at the chosen scale; each run is cached under runs/<scale>/ and trained once.
main: setup
	@for e in $(EXPS); do \
	  $(BIN)/python -m tiedlm_lib train $$e --scale $(SCALE) && \
	  $(BIN)/python -m tiedlm_lib eval $$e --scale $(SCALE) || exit 1; \
	done

lint: setup
	$(BIN)/ruff check tiedlm_lib tests

clean-runs:
	rm -rf runs

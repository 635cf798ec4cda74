# Two commands on a fresh machine: `make demo` and `make test`.
# torch is pinned to the CPU build that lies on these machines' disk before the project is
# installed, so the open range in pyproject.toml pulls no multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_CPU ?= torch==2.13.0
# Model library for the whole-model tests (tests/rt/test_compile_backend.py); empty to skip them.
# Not timm or torchvision: the registry's torchvision is a CUDA build that fails to load against
# the CPU torch (and timm needs it).
ZOO ?= transformers==5.23.0

.PHONY: setup demo test bench-lint

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_CPU)
	$(PY) -m pip install -q -e '.[rt,test]'
	$(if $(ZOO),$(PY) -m pip install -q $(TORCH_CPU) $(ZOO))
	touch $@

demo: setup
	$(PY) examples/demo.py

test: setup
	$(PY) -m pytest -q -n 2 --durations=15

bench-lint: setup
	$(PY) bench/lint_speed.py

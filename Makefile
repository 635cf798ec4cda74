# Two commands on a fresh machine: `make demo` and `make test`.
# torch is installed first, from TORCH_CPU, so the open range in pyproject.toml then pulls no
# multi-GB CUDA build. The default, torch==2.13.0, is the CPU build only on machines whose pip
# finds it first: the project's CI machines keep torch-2.13.0+cpu on local disk (pip's find-links),
# and that local version sorts above PyPI's CUDA 2.13.0. Elsewhere name the CPU index:
#   make test TORCH_CPU="torch --index-url https://download.pytorch.org/whl/cpu"
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_CPU ?= torch==2.13.0
# Model library for the whole-model tests (tests/rt/test_compile_backend.py); empty to skip them.
# Not timm or torchvision: the registry's torchvision is a CUDA build that fails to load against
# the CPU torch (and timm needs it). It installs with torch pinned to the version already there.
ZOO ?= transformers==5.23.0

.PHONY: setup demo test bench-lint

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_CPU)
	$(PY) -m pip install -q -e '.[rt,test]'
	$(if $(ZOO),$(PY) -m pip install -q $(ZOO) "torch==$$($(PY) -c 'import torch; print(torch.__version__)')")
	touch $@

demo: setup
	$(PY) examples/demo.py

test: setup
	$(PY) -m pytest -q -n 2 --durations=15

bench-lint: setup
	$(PY) bench/lint_speed.py

# Two commands: `make demo` and `make test`. Both create .venv and install what is missing.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONUNBUFFERED := 1

.PHONY: demo test setup system clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

# System packages from apt, installed only when missing.
system:
	@missing=""; \
	command -v adb >/dev/null 2>&1 || missing="$$missing adb"; \
	[ -d /usr/share/datasets/fashion-mnist ] || missing="$$missing dataset-fashion-mnist"; \
	if [ -n "$$missing" ]; then \
	  echo "installing with apt-get:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

setup: system $(STAMP)

demo: setup
	$(BIN)/python -m nagkit.cli.demo

# The suite on 2 workers (pytest-xdist, a file per worker at a time), then the tests that judge a
# latency measured on this CPU, alone, so that the other worker's load does not decide them.
# Bytecode is written (an environment's PYTHONDONTWRITEBYTECODE is cleared here): without it each
# pytest process rewrites the test modules again (~6 s of CPU) and each of the suite's `python -m
# nagkit` processes compiles nagkit again (~0.4 s); git ignores the __pycache__ folders.
test: export PYTHONDONTWRITEBYTECODE :=
test: setup
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not serial"
	$(BIN)/python -m pytest -q -m serial

clean:
	rm -rf $(VENV) .pytest_cache

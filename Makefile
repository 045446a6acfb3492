# TemporalStore: `make run` serves, `make test` checks everything.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell $(PYTHON) -c "import hashlib,sys;print(hashlib.sha1(open('pyproject.toml','rb').read()).hexdigest()[:12])")

.PHONY: run test lint typecheck layers pytest compat redis-server install clean bench soak

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

run: $(STAMP)
	$(BIN)/temporalstore serve

# Debian's redis-server is the reference for the differential tests.
redis-server:
	@command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 || { \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server redis-tools; }

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# The layer contracts of pyproject.toml ([tool.importlinter]): imports go one way.
layers: $(STAMP)
	$(BIN)/lint-imports

pytest: $(STAMP) redis-server
	$(BIN)/pytest -q

test: lint typecheck layers pytest

# Prints "differential: N of M command cases identical to redis-server".
compat: $(STAMP) redis-server
	$(BIN)/pytest -q tests

# Side-by-side benchmarks against redis-server: writes docs/benchmarks.md and
# bench-results.json (see bench/run.py).
bench: $(STAMP) redis-server
	$(BIN)/python -m bench.run

# The long versions of the reliability tests (about 13 minutes): a million fuzzed
# frames, 20 kill -9 cycles, a 30-second object storage outage, 1,000 idle connections
# with a million commands pipelined unread, history at bounded cost at issue 11's
# sizes. `make test` runs their short versions.
# Writes soak-figures.jsonl, soak-results.xml and the table of docs/reliability.md.
SOAK_TESTS := tests/test_fuzz.py tests/test_crashloop.py tests/test_storage_faults.py \
	tests/test_floods.py tests/test_corruption_inspect.py tests/test_durability.py \
	tests/test_history_bounds.py
soak: $(STAMP) redis-server
	rm -f soak-figures.jsonl soak-results.xml
	TS_SOAK=1 TS_FIGURES=soak-figures.jsonl $(BIN)/pytest -q -s --timeout 1800 \
	  --junitxml=soak-results.xml $(SOAK_TESTS); status=$$?; \
	  $(BIN)/python tools/reliability_report.py soak-figures.jsonl soak-results.xml \
	  docs/reliability.md && exit $$status

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# TemporalStore: `make run` serves, `make test` checks everything.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell $(PYTHON) -c "import hashlib,sys;print(hashlib.sha1(open('pyproject.toml','rb').read()).hexdigest()[:12])")

.PHONY: run test lint typecheck layers pytest pytest-pure native compat redis-server etcd chromium node-deps install clean bench bench-long soak cluster redis-suite redispy-suite

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $@

# The compiled hot path (tools/compiled.py): mypyc compiles the reader, dispatch, the
# common command families, the store and the codec into build/native/ when a C compiler
# and Python's headers exist; it rebuilds when a compiled source changed (the build's
# manifest holds their SHA-256) and does nothing otherwise. store/native.py uses the
# build only while it matches the sources; TEMPORALSTORE_PURE=1 runs all Python.
# Then the bytecode of the server's own modules, written ahead: compileall writes it
# even where PYTHONDONTWRITEBYTECODE is set, and Python reads it either way (a stale
# file is compiled again in memory). Without it a server compiles every module it
# imports at each start: 0.34 s to the first PONG here instead of 0.19 s.
native: $(STAMP)
	$(BIN)/python tools/compiled.py build
	$(BIN)/python -m compileall -q commands store flusher proxy replay

install: $(STAMP) native

run: install
	$(BIN)/temporalstore serve

# A group on this machine: etcd and three nodes on one storage directory (Ctrl-C stops).
cluster: install etcd
	$(BIN)/python tools/cluster.py

# Debian's redis-server is the reference for the differential tests.
redis-server:
	@command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 || { \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server redis-tools; }

# Debian's chromium and its WebDriver for the explorer's browser test
# (tests/test_explorer_browser.py, headless, driven by Selenium).
chromium:
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || { \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver; }

# Debian's etcd: leader election, fencing and the RAFT-mode log of a group
# (flusher/coordination.py); the tests start their own members (tests/etcd.py).
# etcd-client (etcdctl) is installed too where the release has it.
etcd:
	@command -v etcd >/dev/null 2>&1 || { \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  if apt-cache show etcd-client >/dev/null 2>&1; then pkgs="etcd-server etcd-client"; \
	  else pkgs=etcd-server; fi && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$pkgs; }

# ioredis for tests/test_ioredis.py, from tests/js/package-lock.json (Node.js 20 and npm
# are on the machine); installed again when the lock file changes.
NODE_STAMP := tests/js/node_modules/.installed
$(NODE_STAMP): tests/js/package.json tests/js/package-lock.json
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
	  echo "node and npm (Node.js 20) are needed for tests/test_ioredis.py" >&2; exit 1; }
	npm ci --prefix tests/js --no-audit --no-fund
	touch $@

node-deps: $(NODE_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# The layer contracts of pyproject.toml ([tool.importlinter]): imports go one way.
layers: $(STAMP)
	$(BIN)/lint-imports

pytest: install redis-server etcd chromium node-deps
	$(BIN)/pytest -q

# A fast subset on pure Python (TEMPORALSTORE_PURE=1: the compiled build stays off the
# packages' paths), so the fallback stays identical to the compiled build.
PURE_TESTS := tests/test_compiled.py tests/test_reader.py tests/test_protocol.py \
	tests/test_strings.py tests/test_transactions.py tests/test_scripting.py \
	tests/test_temporal.py tests/test_store.py tests/test_codec.py
pytest-pure: $(STAMP) redis-server
	TEMPORALSTORE_PURE=1 $(BIN)/pytest -q $(PURE_TESTS)

test: lint typecheck layers pytest pytest-pure

# Prints "differential: N of M command cases identical to redis-server".
compat: install redis-server node-deps
	$(BIN)/pytest -q tests

# The Redis 7.0 project's own test suite (fetched from Debian's pool into .cache/, never
# kept here) in external mode, unit by unit, against redis-server and ours: writes the
# table of docs/compatibility.md (see tools/redis_suite.py). Not part of `make test`.
redis-suite: $(STAMP) redis-server
	@command -v tclsh >/dev/null 2>&1 || { \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq tcl; }
	$(BIN)/python tools/redis_suite.py run --report

# redis-py's own command tests (tests/test_commands.py and its asyncio twin, from the sdist
# of the installed redis-py, fetched from PyPI into .cache/, never kept here) against
# redis-server and ours: writes the "redis-py's own tests" section of docs/compatibility.md
# (see tools/redispy_suite.py). Not part of `make test`.
redispy-suite: $(STAMP) redis-server
	$(BIN)/python tools/redispy_suite.py run --report

# Side-by-side benchmarks against redis-server: writes docs/benchmarks.md and
# bench-results.json (see bench/run.py). Under 10 minutes on a fresh clone, set-up
# included; the report keeps the sections of the last `make bench-long`.
bench: install redis-server etcd
	$(BIN)/python -m bench.run

# The long measurements (about 10 minutes more): 1M keys x 10 versions, restarts from a
# checkpoint at 1M and 10M records, and the py-spy profile under SET load; rewrites
# their sections of docs/benchmarks.md.
bench-long: install redis-server
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	$(BIN)/python -m bench.run --items L,p --json bench-results-long.json

# The long versions of the reliability tests (about 16 minutes): a million fuzzed
# frames, 20 kill -9 cycles, a 30-second object storage outage, 1,000 idle connections
# with a million commands pipelined unread, history at bounded cost at issue 11's
# sizes, 10 rounds of failover in a group on etcd, a 1 GB export and import, 100,000 keys
# through redis-py's RedisCluster and ioredis' Cluster, a slot move of 1,000 slots in a
# cluster holding 1M keys, 3 rounds of 10 s of async writes across a replicated shard's
# failover (with and without min-replicas). `make test` runs their short versions.
# Writes soak-figures.jsonl, soak-results.xml and the table of docs/reliability.md.
SOAK_TESTS := tests/test_fuzz.py tests/test_crashloop.py tests/test_storage_faults.py \
	tests/test_floods.py tests/test_corruption_inspect.py tests/test_durability.py \
	tests/test_history_bounds.py tests/test_slices.py tests/test_failover.py tests/test_export.py \
	tests/test_ioredis.py tests/test_cluster.py tests/test_cluster_clients.py \
	tests/test_cluster_move.py tests/test_cluster_shards.py
soak: install redis-server etcd node-deps
	rm -f soak-figures.jsonl soak-results.xml
	TS_SOAK=1 TS_FIGURES=soak-figures.jsonl $(BIN)/pytest -q -s --timeout 1800 \
	  --junitxml=soak-results.xml $(SOAK_TESTS); status=$$?; \
	  $(BIN)/python tools/reliability_report.py soak-figures.jsonl soak-results.xml \
	  docs/reliability.md && exit $$status

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache tests/js/node_modules build

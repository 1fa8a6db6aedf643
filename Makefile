# pubmote: every target installs what it needs first (idempotent), so a fresh clone works.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: deb setup setup-parts firmware test test-cpython test-micropython test-stress lint bench run flash deploy hil fuzz harden-report clean

# Debian packages the tests run as real peers: nanocat (the original nanomsg), and socat
# (the simulated board's REPL pty for mpremote); mosquitto, the MQTT broker make bench
# compares a board's acked publishes with.
DEB_PACKAGES := nanomsg-utils socat mosquitto
# The RP2040 firmware build (pubmote firmware build): the ARM toolchain, newlib, cmake.
DEB_PACKAGES += gcc-arm-none-eabi libnewlib-arm-none-eabi cmake build-essential
# Java for Spark (pubmote pipeline), when no java is on PATH: Spark 4.3 needs 17 or newer.
JAVA_PACKAGE := openjdk-17-jre-headless

# The mesh's real libp2p peers: js-libp2p (its own lock file) and py-libp2p in a venv of its
# own, so that its pins never collide with the project's.
LIBP2P_JS := tests/interop/libp2p/js
PYLIBP2P := build/peers/pylibp2p
PYLIBP2P_VERSION := 0.8.1

SETUP_PARTS := $(VENV)/.installed node_modules/.installed deb \
  $(LIBP2P_JS)/node_modules/.installed $(PYLIBP2P)/.installed-$(PYLIBP2P_VERSION)
# the parts are independent (two venvs, two npm trees, Debian packages): installed side by
# side, a fresh clone is ready some 15 s sooner
# then Spark's class archive (pipeline/jvm_archive.py: the pipeline's JVM starts in about
# half the time): made once, some 25 s, then a 0.2 s check
setup:
	@$(MAKE) --no-print-directory -j3 setup-parts
	@$(PY) -m pubmote.pipeline.jvm_archive
setup-parts: $(SETUP_PARTS)
	@:

deb:
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v java >/dev/null 2>&1 || missing="$$missing $(JAVA_PACKAGE)"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing Debian packages; run: sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

$(LIBP2P_JS)/node_modules/.installed: $(LIBP2P_JS)/package.json $(LIBP2P_JS)/package-lock.json
	@command -v node >/dev/null || { echo "node not found: install Node.js 20 (apt-get install nodejs)"; exit 1; }
	cd $(LIBP2P_JS) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(PYLIBP2P)/.installed-$(PYLIBP2P_VERSION):
	@test -x $(PYLIBP2P)/bin/python || $(PYTHON) -m venv $(PYLIBP2P)
	$(PYLIBP2P)/bin/python -m pip install -q libp2p==$(PYLIBP2P_VERSION)
	@touch $@

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

node_modules/.installed: package.json package-lock.json
	@command -v node >/dev/null || { echo "node not found: install Node.js 20 (apt-get install nodejs)"; exit 1; }
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

## make firmware: MicroPython's rp2 port for the Pico with pubmote frozen in, in
##   build/firmware/pico/ (cached by a hash of its inputs: seconds when nothing changed;
##   about a minute cold). The tree: ../shared/rp2040/ beside this checkout, or MICROPY_DIR.
firmware: setup
	$(BIN)/pubmote firmware build --board pico

lint: setup
	$(BIN)/ruff check shared firmware host tests bench
	$(BIN)/mypy

# the tests are independent (ports reserved per process, peers per test or module): any
# worker takes any test (tests/conftest.py)
TEST_WORKERS ?= 5
# the firmware (make firmware: cached, about 1.5 minutes the first time) builds beside the
# tests; the few that run it wait for it (pubmote firmware build takes a lock)
# (--durations: the slowest tests, so the suite's time budget stays in view)
test-cpython: setup
	@mkdir -p build
	@$(BIN)/pubmote firmware build --board pico >build/firmware-build.log 2>&1 & fw=$$!; \
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist load --durations=12; rc=$$?; \
	if ! wait $$fw; then echo "firmware build failed (build/firmware-build.log):"; \
	  tail -n 5 build/firmware-build.log; rc=1; fi; exit $$rc

test-micropython: setup firmware
	$(PY) tests/run_shared.py

## make test: lint, then every test on CPython (the HIL suite on the emulated Pico too) and,
##   beside them, the shared tests on the MicroPython unix and WebAssembly ports and the
##   emulated RP2040 (their report follows pytest's; the CPython suite waits more than it
##   computes, so the two together take about a minute less than one after the other)
test: lint
	@mkdir -p build
	@$(MAKE) --no-print-directory test-micropython >build/test-micropython.log 2>&1 & mp=$$!; \
	$(MAKE) --no-print-directory test-cpython; rc=$$?; \
	wait $$mp || rc=1; cat build/test-micropython.log; exit $$rc

## make test-stress RUNS=5 HOG=2: the CPython suite RUNS times in a row, in a new random
##   order each time, beside HOG spinning processes (default one per core); names every
##   test that failed in any run
RUNS ?= 3
HOG ?= $(shell nproc)
test-stress: setup
	$(PY) tests/stress.py --runs $(RUNS) --hog $(HOG) --workers $(TEST_WORKERS)

## make bench: codec against python-ndn; bridge against pynng; a board's acked publishes
## against umqtt.simple -> mosquitto; a gateway of 100 boards against mosquitto; firmware heap (and
## heap and UART rate on the emulated Pico against the line's limit); NDN face; mesh
## and GossipSub against js-libp2p and py-libp2p; DHT overlay; pipeline (Spark against DuckDB
## at 1M and 10M journal rows, and the --follow job's lag)
bench: setup firmware
	$(PY) bench/codec/run.py
	$(PY) bench/bridge/run.py
	$(PY) bench/board_link/run.py
	$(PY) bench/gateway/run.py
	$(PY) bench/firmware/run.py
	$(PY) bench/firmware/tls_link.py
	$(PY) bench/firmware/pico.py
	$(PY) bench/ndn/run.py
	$(PY) bench/mesh/run.py
	$(PY) bench/gossip/run.py
	$(PY) bench/dht/run.py
	$(PY) bench/pipeline/run.py
	$(PY) bench/pipeline/stream_lag.py

## make run: the bridge with two simulated boards running the demo, and the live view
## make run PIPELINE=1: the same, journaled into build/run/journal, which the streaming
##   pipeline follows in the background into build/run/tables (its log: build/run/pipeline.log)
## make run SIM_KIND=pico: the same with two emulated Picos (the real rp2 firmware in rp2040js)
SIM_KIND ?= unix
RUN_BRIDGE := $(BIN)/pubmote bridge --sim-boards 2 --sim-kind $(SIM_KIND) --sp-pub tcp://127.0.0.1:5560 --sp-sub tcp://127.0.0.1:5561
run: setup $(if $(filter pico,$(SIM_KIND)),firmware)
ifdef PIPELINE
	@mkdir -p build/run
	@echo "pipeline: following build/run/journal into build/run/tables (log: build/run/pipeline.log)"
	@$(BIN)/pubmote pipeline build/run/journal --out build/run/tables --follow \
	  --window "1 minute" --watermark "10 seconds" --trigger-seconds 5 \
	  >build/run/pipeline.log 2>&1 & pid=$$!; \
	trap 'kill $$pid 2>/dev/null; wait $$pid' EXIT INT TERM; \
	$(RUN_BRIDGE) --journal build/run/journal --journal-max-age 5
else
	$(RUN_BRIDGE)
endif

## Boards: make flash BOARD=esp32 PORT=/dev/ttyUSB0 FIRMWARE=ESP32_GENERIC.bin [ERASE=1]
##         make deploy BOARD=esp32 PORT=/dev/ttyUSB0 NAME=greenhouse1 [LINK=stdio] [KEY_FILE=keys.json]
##         make hil [PORT=/dev/ttyUSB0 BOARD=esp32]   (no PORT: the simulated board)
BOARD ?= unix
NAME ?= board1
flash: setup
	@test -n "$(PORT)$(filter rp2040,$(BOARD))" || { echo "make flash needs PORT=... (and BOARD=, FIRMWARE=)"; exit 2; }
	$(BIN)/pubmote flash --board $(BOARD) $(if $(PORT),--port $(PORT)) --firmware $(FIRMWARE) $(if $(ERASE),--erase)

deploy: setup
	@test -n "$(PORT)" || { echo "make deploy needs PORT=... (and BOARD=, NAME=)"; exit 2; }
	$(BIN)/pubmote deploy --board $(BOARD) --port $(PORT) --name $(NAME) $(if $(LINK),--link $(LINK)) $(if $(KEY_FILE),--key-file $(KEY_FILE))

hil: setup firmware
	$(PY) -m pytest -q tests/hil $(if $(PORT),--board-port $(PORT) --board $(BOARD))

## make fuzz: coverage-guided fuzzing of every parser, FUZZ_SECONDS per target (default 30)
FUZZ_SECONDS ?= 30
fuzz: setup
	$(PY) tests/fuzz/run.py --seconds $(FUZZ_SECONDS) --stats build/fuzz/stats.json $(if $(FUZZ_ONLY),--only $(FUZZ_ONLY))

## make harden-report: fuzzing, fault and authentication figures (FLOOD_SECONDS=600)
harden-report: setup
	$(PY) bench/harden/report.py

clean:
	rm -rf build .venv node_modules

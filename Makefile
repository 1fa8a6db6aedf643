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

## make lint: ruff on every Python file, and mypy (strict) on host/, bench/ and the tests'
##   helper modules (pyproject.toml's [tool.mypy] names them; incremental: seconds once its
##   cache is warm)
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

test-micropython: setup
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
##   test that failed in any run. STRESS_TESTS="tests/host/core tests/shared/test_tlv.py":
##   those tests only (any pytest arguments)
RUNS ?= 3
HOG ?= $(shell nproc)
test-stress: setup
	$(PY) tests/stress.py --runs $(RUNS) --hog $(HOG) --workers $(TEST_WORKERS) \
	  $(if $(STRESS_TESTS),-- $(STRESS_TESTS))

## make bench: codec against python-ndn; bridge against pynng; a board's acked publishes
## against umqtt.simple -> mosquitto; a gateway of 100 boards against mosquitto; a fleet update
## (10 simulated boards, canary, rollbacks, power cuts: pubmote update); a sleeping board
## (100 cycles of 10 s asleep / 300 ms awake, commands at random times); a board's readings
## through 20 s and 10-minute outages of its bridge, with the RAM outbox and with a reset
## mid-outage and the durable outbox (~25 min; QUICK: 2 s outages); firmware heap (and
## heap and UART rate on the emulated Pico against the line's limit; an update of an emulated
## Pico over its UART, its rate against the line's limit and its updater's heap); NDN face; mesh
## and GossipSub against js-libp2p and py-libp2p; DHT overlay; pipeline (Spark against DuckDB
## at 1M and 10M journal rows, and the --follow job's lag)
## make bench QUICK=1: every bench and every line of its table at small sizes (a few boards,
##   nodes and messages, half-second phases, 1,000 journal rows): a few minutes, for seeing
##   that each runs (make test runs it), not for figures
comma := ,
bench: setup firmware
	$(PY) bench/codec/run.py $(if $(QUICK),--quick)
	$(PY) bench/bridge/run.py $(if $(QUICK),--quick)
	$(PY) bench/board_link/run.py $(if $(QUICK),--seconds 0.5 --rounds 1)
	$(PY) bench/gateway/run.py $(if $(QUICK),--boards 5 --seconds 0.5 --rounds 1)
	$(PY) bench/gateway/update.py $(if $(QUICK),--boards 3 --cuts 2)
	$(PY) bench/gateway/sleep.py $(if $(QUICK),--quick)
	$(PY) bench/gateway/outage.py $(if $(QUICK),--quick)
	$(PY) bench/firmware/run.py $(if $(QUICK),--quick)
	$(PY) bench/firmware/tls_link.py
	$(PY) bench/firmware/pico.py $(if $(QUICK),--quick)
	$(PY) bench/firmware/update_pico.py $(if $(QUICK),--quick)
	$(PY) bench/ndn/run.py $(if $(QUICK),--quick)
	$(PY) bench/mesh/run.py $(if $(QUICK),--size-mb 1 --ping-seconds 0.5)
	$(PY) bench/gossip/run.py $(if $(QUICK),--nodes 3 --seconds 0.5 --rates 10$(comma)25)
	$(PY) bench/dht/run.py $(if $(QUICK),--nodes 10 --rounds 2)
	$(PY) bench/pipeline/run.py $(if $(QUICK),--rows 1000 --warm-up-runs 1)
	$(PY) bench/pipeline/stream_lag.py $(if $(QUICK),--files 2)
	$(PY) bench/pipeline/stream_bridge.py $(if $(QUICK),--seconds 20)

## make run: the bridge with two simulated boards running the demo, and the live view
##   (its log instead when the output is not a terminal); SP on SP_PUB and SP_SUB
## make run PIPELINE=1: the same, journaled into build/run/journal, which the streaming
##   pipeline follows in the background into build/run/tables (its log: build/run/pipeline.log;
##   RUN_DIR=... puts the three elsewhere), on a resident Spark (`pubmote pipeline serve` on
##   sc://127.0.0.1:PIPELINE_PORT, default 15002; its log: build/run/serve.log) that batch
##   runs and reports can use beside it: pubmote pipeline build/run/journal --out T
##   --report R --remote sc://127.0.0.1:15002. Ctrl-C stops the job, then the server (in a
##   session of its own: it outlives the job's last calls)
## make run SIM_KIND=pico: the same with two emulated Picos (the real rp2 firmware in rp2040js)
SIM_KIND ?= unix
SP_PUB ?= tcp://127.0.0.1:5560
SP_SUB ?= tcp://127.0.0.1:5561
RUN_DIR ?= build/run
PIPELINE_PORT ?= 15002
RUN_BRIDGE := $(BIN)/pubmote bridge --sim-boards 2 --sim-kind $(SIM_KIND) --sp-pub $(SP_PUB) --sp-sub $(SP_SUB)
run: setup $(if $(filter pico,$(SIM_KIND)),firmware)
ifdef PIPELINE
	@mkdir -p $(RUN_DIR)
	@echo "pipeline: Spark Connect on sc://127.0.0.1:$(PIPELINE_PORT) (log: $(RUN_DIR)/serve.log), following $(RUN_DIR)/journal into $(RUN_DIR)/tables (log: $(RUN_DIR)/pipeline.log)"
	@: >$(RUN_DIR)/serve.log; \
	setsid $(BIN)/pubmote pipeline serve --port $(PIPELINE_PORT) >$(RUN_DIR)/serve.log 2>&1 & spid=$$!; \
	{ until grep -q "listening on" $(RUN_DIR)/serve.log; do \
	    kill -0 $$spid 2>/dev/null || { echo "no Spark Connect server: see $(RUN_DIR)/serve.log"; exit 1; }; \
	    sleep 0.2; done; \
	  exec $(BIN)/pubmote pipeline $(RUN_DIR)/journal --out $(RUN_DIR)/tables --follow \
	    --window "1 minute" --watermark "10 seconds" --trigger-seconds 5 \
	    --remote sc://127.0.0.1:$(PIPELINE_PORT); \
	} >$(RUN_DIR)/pipeline.log 2>&1 & pid=$$!; \
	trap 'kill $$pid 2>/dev/null; wait $$pid; kill $$spid 2>/dev/null; wait $$spid' EXIT INT TERM; \
	$(RUN_BRIDGE) --journal $(RUN_DIR)/journal --journal-max-age 5
else
	$(RUN_BRIDGE)
endif

## Boards: make flash BOARD=esp32 PORT=/dev/ttyUSB0 FIRMWARE=ESP32_GENERIC.bin [ERASE=1]
##         make flash BOARD=pico   (make firmware's UF2 to the BOOTSEL drive: found under
##           /media, or PUBMOTE_UF2_DRIVE; BOARD=rp2040 FIRMWARE=x.uf2 for another UF2)
##         make deploy BOARD=esp32 PORT=/dev/ttyUSB0 NAME=greenhouse1 [LINK=stdio] [KEY_FILE=keys.json]
##           (the board gets a key; default KEY_FILE: ~/.config/pubmote/board-keys.json, none: no key)
##         make hil [PORT=/dev/ttyUSB0 BOARD=esp32]   (no PORT: the simulated board and the
##           emulated Pico) [HIL_ARGS="-k simulated"]   (more pytest arguments: -k selects)
BOARD ?= unix
NAME ?= board1
flash: setup $(if $(filter pico,$(BOARD)),firmware)
	@test -n "$(PORT)$(filter rp2040 pico pico_w,$(BOARD))" || { echo "make flash needs PORT=... (and BOARD=, FIRMWARE=)"; exit 2; }
	$(BIN)/pubmote flash --board $(BOARD) $(if $(PORT),--port $(PORT)) $(if $(FIRMWARE),--firmware $(FIRMWARE)) $(if $(ERASE),--erase)

deploy: setup
	@test -n "$(PORT)" || { echo "make deploy needs PORT=... (and BOARD=, NAME=)"; exit 2; }
	$(BIN)/pubmote deploy --board $(BOARD) --port $(PORT) --name $(NAME) $(if $(LINK),--link $(LINK)) $(if $(KEY_FILE),--key-file $(KEY_FILE))

hil: setup firmware
	$(PY) -m pytest -q tests/hil $(if $(PORT),--board-port $(PORT) --board $(BOARD)) $(HIL_ARGS)

## make fuzz: coverage-guided fuzzing of every parser, FUZZ_SECONDS per target (default 30);
##   FUZZ_ONLY=cbor,sp: those targets only; the figures go to FUZZ_STATS
##   (build/fuzz/stats.json). make fuzz FUZZ_SECONDS=1: every target briefly
FUZZ_SECONDS ?= 30
FUZZ_STATS ?= build/fuzz/stats.json
fuzz: setup
	$(PY) tests/fuzz/run.py --seconds $(FUZZ_SECONDS) --stats $(FUZZ_STATS) $(if $(FUZZ_ONLY),--only $(FUZZ_ONLY))

## make harden-report: fuzzing (the last make fuzz's FUZZ_STATS; without them it fuzzes
##   FUZZ_SECONDS, default 10, per target or FUZZ_ONLY's), then every attack and fault
##   scenario of tests/adversarial/scenarios at HARDEN_SCALE (default 10) times the
##   adversarial tests' sizes, HARDEN_JOBS (default 2) at a time, one row each: acked
##   messages lost, the bridge's RSS before/peak/after against the bound its limits imply,
##   the genuine board's recovery; the board flood lasts FLOOD_SECONDS (default 600). Exit
##   status 1 if anything acked was lost, a bound exceeded or a recovery over 10 s.
##   make harden-report FLOOD_SECONDS=3 HARDEN_SCALE=1 HARDEN_JOBS=3 FUZZ_SECONDS=1
##   FUZZ_ONLY=cbor: the short run (about a minute) that make test runs
FLOOD_SECONDS ?= 600
HARDEN_SCALE ?= 10
HARDEN_JOBS ?= 2
harden-report: setup
	FLOOD_SECONDS=$(FLOOD_SECONDS) HARDEN_SCALE=$(HARDEN_SCALE) HARDEN_JOBS=$(HARDEN_JOBS) \
	  FUZZ_STATS=$(FUZZ_STATS) $(if $(FUZZ_ONLY),FUZZ_ONLY=$(FUZZ_ONLY)) \
	  $(PY) bench/harden/report.py

clean:
	rm -rf build .venv node_modules

"""Every Makefile target the README names, run for real (`make TARGET`, in its short form
where the full one takes long), so that none can break unseen; and the README and the
Makefile's own `## make ...` help name no target or variable the Makefile lacks. `make
test`, `lint`, `setup` and `firmware` are what runs this file: their wiring is checked
from make's own rule database instead."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from e2e import free_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MAKEFILE = ROOT / "Makefile"


def _makefile_variables() -> set[str]:
    text = MAKEFILE.read_text()
    return (set(re.findall(r"\$\(([A-Z][A-Z0-9_]*)\)", text))
            | set(re.findall(r"^(?:ifdef|ifndef)\s+([A-Z][A-Z0-9_]*)", text, re.M))
            | set(re.findall(r"^([A-Z][A-Z0-9_]*)\s*[:?+]?=", text, re.M)))


def make_env(**extra: str) -> dict[str, str]:
    """This process's environment without what would steer the make under test: the outer
    make's MAKEFLAGS (its jobserver) and the Makefile's own variables (a PORT or BOARD in
    a developer's shell would send `make hil` to a real board)."""
    drop = _makefile_variables() - {"PATH"}
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith("MAKE") and k != "MFLAGS"}
    env.update(extra)
    return env


def make(*args: str, timeout_s: float, cwd: Path = ROOT,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "--no-print-directory", *args], cwd=cwd,
                          env=env if env is not None else make_env(),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout_s)


def shown(p: subprocess.CompletedProcess[str], limit: int = 12000) -> str:
    out = p.stdout or ""
    return "`%s` exited %d; its output%s:\n%s" % (
        " ".join(p.args), p.returncode, " (the end)" if len(out) > limit else "",
        out[-limit:])


def succeeded(p: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The output of a make that exited 0 and printed every needle."""
    assert p.returncode == 0, shown(p)
    for needle in needles:
        assert needle in p.stdout, "no %r in:\n%s" % (needle, shown(p))
    return p.stdout


def wait_for(pred: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, "timed out after %.0f s waiting for %s" % (
            timeout_s, what)
        time.sleep(0.2)


# ---- what the README and the Makefile's help name ------------------------------------------


def database() -> dict[str, tuple[list[str], str]]:
    """make's own rule database: target -> (prerequisites, recipe), with the Makefile's
    variables and conditionals resolved as for a plain `make` (nothing is run)."""
    out = subprocess.run(["make", "-pRrq", "-f", str(MAKEFILE), "--no-print-directory",
                          "__no_such_target__"], cwd=ROOT, env=make_env(),
                         capture_output=True, text=True, timeout=60).stdout
    rules: dict[str, tuple[list[str], str]] = {}
    for m in re.finditer(r"^([A-Za-z][\w.-]*):(?!=)(.*)\n((?:#.*\n)*)((?:\t.*\n)*)", out, re.M):
        recipe = "".join(line[1:] for line in m.group(4).splitlines(keepends=True))
        rules[m.group(1)] = (m.group(2).split(), recipe)
    return rules


MAKE_COMMAND = re.compile(r"\bmake\s+([a-z][\w-]*)((?:\s+\[?[A-Z][A-Z0-9_]*=\S*)*)")


def named(text: str) -> list[tuple[str, list[str]]]:
    """(target, [VAR, ...]) for every `make TARGET VAR=...` in text."""
    return [(m.group(1), re.findall(r"([A-Z][A-Z0-9_]*)=", m.group(2)))
            for m in MAKE_COMMAND.finditer(text)]


def code_of(text: str) -> str:
    """Markdown's code: fenced blocks and inline spans (which may wrap), not its prose."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S)
    rest = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.M | re.S)
    spans = [" ".join(s.split()) for s in re.findall(r"`([^`]+)`", rest)]
    return "\n".join(blocks + spans)


def readme_code() -> str:
    return code_of((ROOT / "README.md").read_text())


def makefile_help() -> str:
    return "\n".join(re.findall(r"^##(.*)$", MAKEFILE.read_text(), re.M))


def test_readme_and_help_name_only_targets_and_variables_the_makefile_has() -> None:
    rules = database()
    variables = _makefile_variables()
    for source, text in (("README.md", readme_code()), ("the Makefile's ## help",
                                                          makefile_help())):
        commands = named(text)
        assert len(commands) >= 10, "the parser found only %r in %s" % (commands, source)
        for target, names in commands:
            assert target in rules, "%s names `make %s`: no such target" % (source, target)
            for var in names:
                assert var in variables, ("%s shows `make %s %s=...`: the Makefile never "
                                          "reads %s" % (source, target, var, var))
    # and each target the README names is run by a test below
    missing = {t for t, _ in named(readme_code())} - set(COVERED)
    assert not missing, "README targets no test here runs: %s" % sorted(missing)


def test_the_parsers_see_what_they_should() -> None:
    text = ("To make sure, `make hil\n  PORT=/dev/ttyUSB0 BOARD=esp32` or\n"
            "```sh\nmake run PIPELINE=1   # and\nmake -C ports/rp2 submodules\n```\n"
            "then `make flash BOARD=pico [ERASE=1]`.")
    assert named(code_of(text)) == [("run", ["PIPELINE"]), ("hil", ["PORT", "BOARD"]),
                                    ("flash", ["BOARD", "ERASE"])]
    rules = database()
    assert "setup" in rules["bench"][0] and "bench/codec/run.py" in rules["bench"][1]


def test_make_test_runs_lint_setup_and_firmware() -> None:
    """`make test` (whose run includes this file) runs lint, setup and firmware first."""
    rules = database()
    assert "lint" in rules["test"][0]
    recipe = rules["test"][1]
    assert "test-micropython" in recipe and "test-cpython" in recipe, recipe
    for target in ("lint", "firmware", "test-cpython", "test-micropython"):
        assert "setup" in rules[target][0], (target, rules[target])
    # make firmware's command, run beside the CPython tests (the emulated Pico's shared
    # tests build it too, under the same lock, while the other runtimes run)
    build = "pubmote firmware build --board pico"
    assert build in rules["firmware"][1] and build in rules["test-cpython"][1]


# ---- make bench QUICK=1 ------------------------------------------------------------------

NUM = r"[\d.]+"
# each bench's lines, from its first to its last: every table row prints with figures
BENCH_LINES = {
    "codec/run.py": [r"pubmote_wire codec benchmark",
                     r"signed notify Interest, encode\+parse\s+%s\s+%s\s+%sx" % (NUM, NUM, NUM),
                     r"unix port 64-bit\s+hashlib.sha256_hash\s+\d+\s+\d+",
                     r"wasm 32-bit\s+hashlib.sha256_hash\s+\d+\s+\d+",
                     r"whole package, from .mpy: ", r"A signed notify Interest needs two"],
    "bridge/run.py": [r"boards -> bridge -> SP SUB\s+\d+\s+\d+\s+\d+\s+%s" % NUM,
                      r"pynng PUB -> SUB \(baseline\)\s+\d+", r"ratio bridge/pynng: %s" % NUM],
    "board_link/run.py": [r"umqtt.simple, QoS 1 -> mosquitto .*, round 1\s+\d+",
                          r"keyless board over TCP loopback .*, round 1\s+\d+",
                          r"board with a key \(signed notifies, 4 in flight\)\s+\d+",
                          r"paced at 80% of umqtt's median .*\s+\d+",
                          r"where one message's time goes on the board",
                          r"total \d+ us of \d+ us per message"],
    "gateway/run.py": [r"One gateway, 5 virtual boards",
                       r"pubmote bridge, Node boards -> SP SUB\s+as fast as acked\s+\d+",
                       r"mosquitto \(QoS 1\) -> MQTT SUB\s+5/s per board\s+\d+",
                       r"ratio pubmote/mosquitto, aggregate zero-loss acked rate: median %s"
                       % NUM],
    "gateway/update.py": [r"update of 3 boards, \d+-byte app, canary 1: 3/3 healthy in %s s" % NUM,
                          r"update_broken, --timeout 10: 3/3 boards rolled back",
                          r"update_hang, --timeout 10: 3/3 boards rolled back",
                          r"power cut at a random point of 2 updates: 2/2 boots on a whole app"],
    "gateway/sleep.py": [r"sleeping board: 3 cycles of 1.0 s asleep / 300 ms awake",
                         r"commands sent \d+ \(\d+ while asleep\), delivered \d+, lost 0, "
                         r"twice 0, out of order 0, a wake late 0",
                         r"delivery delay after wake .*: median \d+ ms, p95 \d+ ms",
                         r"bridge: sleeps \d+, wakes \d+"],
    "gateway/outage.py": [r"outages of a board publishing every 200 ms",
                          r"bridge down 2 s, RAM outbox .*: taken in the outage \d+/\d+ "
                          r"\(%s %%\), lost 0 .* delivered within %s s of the return, in "
                          r"order yes, taken-time error max %s ms" % (NUM, NUM, NUM),
                          r"bridge down 2 s, board reset mid-outage, durable outbox .*: taken in "
                          r"the outage \d+/\d+ \(%s %%\), lost 0 .* in order yes, "
                          r"taken-time error max %s ms" % (NUM, NUM)],
    "firmware/run.py": [r"publishing 100 messages", r"wasm 32-bit\s+\d+\s+\d+\s+\d+\s+\d+\s+100",
                        r"unix port 64-bit\s+\d+\s+\d+\s+\d+\s+\d+\s+100",
                        r"peak live while publishing: \d+"],
    "firmware/tls_link.py": [r"tcp, clear\s+\d+\s+\d+\s+\d+\s+\d+\s+\d+",
                             r"tcp, TLS \(tls_ca\) over the clear link: \+\d+ B MicroPython heap"],
    "firmware/pico.py": [r"after Node\(\) \(probe\)\s+\d+ B", r"20 received, handled\s+\d+ B",
                         r"and 5 s later, handled\s+\d+ B", r"growth, last 10 published",
                         r"acked publishes over the UART \(board's clock\): %s/s" % NUM,
                         r"received: 20 of 20",
                         r"demo app, readings only\s+\d+ B",
                         r"demo app, steady state\s+\d+ B\s+\(min \d+ B, max \d+ B over 20 "
                         r"samples; 20 commands echoed"],
    "firmware/update_pico.py": [r"pubmote update to one emulated Pico .*: a [\d,]+-byte app",
                                r"as with flow control:\n\s+\d+ segments, \d+ fetched again; "
                                r"healthy",
                                r"transfer on the board's clock .*: [\d,]+ B in \d+ ms",
                                r"rate / limit = %s \(target >= 0.7\)" % NUM,
                                r"updater heap peak on the Pico: \+[\d,]+ B",
                                r"no flow control: .*\n\s+\d+ segments, \d+ fetched again; "
                                r"healthy"],
    "ndn/run.py": [r"app -> bridge -> board -> app\s+\d+", r"app -> bridge -> app\s+\d+",
                   r"ratios to python-ndn's own codec rate: board %s" % NUM],
    "mesh/run.py": [r"pubmote\s+%s\s+\d+" % NUM, r"js-libp2p\s+%s\s+\d+" % NUM,
                    r"py-libp2p\s+%s\s+\d+" % NUM,
                    r"pubmote <-> js-libp2p on one connection: %s MB/s" % NUM,
                    r"pubmote <-> py-libp2p on one connection: %s MB/s" % NUM],
    "gossip/run.py": [r"gossip bench: 3 nodes", r"pubmote\s+25 msg/s: delivered",
                      r"js\s+25 msg/s: delivered", r"py\s+25 msg/s: delivered",
                      r"sustained = 100% delivered", r"\npy\s+(\d+/s|none)"],
    "dht/run.py": [r"10 nodes on 127.x", r"delivery ratio\s+\d+/\d+",
                   r"put-to-delivery\s+p50 %s ms" % NUM,
                   r"libtorrent 2.1 reading the item .* first answer p50 %s ms" % NUM],
    "pipeline/run.py": [r"\| 1,000 \| \d+ \| Spark local\[\*\], JSON lines \(compacts\) \| %s"
                        % NUM, r"\| 1,000 \| \d+ \| DuckDB, JSON lines \| %s" % NUM,
                        r"\| 1,000 \| \d+ \| Spark local\[\*\], typed columns \| %s" % NUM,
                        r"\| 1,000 \| \d+ \| DuckDB, typed columns \| %s" % NUM,
                        r"1,000 rows, typed columns .*: Spark / DuckDB %sx" % NUM,
                        r"\| 1,000 \| \d+ \| Spark Connect, warm server, typed columns \| %s"
                        % NUM,
                        r"1,000 rows, warm Spark Connect server: Spark / DuckDB %sx the rows/s"
                        r".*the jobs alone, without their processes' start: %sx" % (NUM, NUM),
                        r"1,000 rows, warm Spark Connect server: the report \(tables and the "
                        r"HTML page\) in %s s end to end" % NUM],
    "pipeline/stream_lag.py": [r"streaming lag, .*2 files\): p50 %s s" % NUM],
    "pipeline/stream_bridge.py": [
        r"streaming beside the bridge at full relay rate .*20 s.*: \d+ messages/s relayed",
        # (on a loaded machine the job may commit nothing in the 20 s after the warm-up)
        r"job lag(, journal file in place -> its batch committed .*: p50 %s s, p99 %s s|: "
        r"no batch committed after the warm-up)" % (NUM, NUM),
        r"job RSS \(driver \+ JVM\): \d+ MB at 10 s, \d+ MB at the end",
        r"(kept up|NOT KEEPING UP .*): \d+ journal files unread",
        # 20 s on a loaded machine may end before the windows query has committed a file,
        # or its line: the health table's lag at least
        r"job: health: (lag over \d+ journal files: p50 %s s|no journal file read)" % NUM],
}


def bench_recipe_commands() -> dict[str, str]:
    """bench/X.py -> its command in `make bench QUICK=1` (as make would run it)."""
    out = subprocess.run(["make", "-n", "--no-print-directory", "bench", "QUICK=1"], cwd=ROOT,
                         env=make_env(), capture_output=True, text=True, timeout=60).stdout
    return {m.group(1): line for line in out.splitlines()
            if (m := re.search(r"\bbench/(\S+\.py)", line))}


def test_bench_recipe_runs_each_bench_tested_here() -> None:
    recipe = database()["bench"][1]
    assert sorted(re.findall(r"bench/(\S+\.py)", recipe)) == sorted(BENCH_LINES), \
        "the bench recipe and this test differ"
    assert sorted(bench_recipe_commands()) == sorted(BENCH_LINES)


# each bench of `make bench QUICK=1` a test of its own (the benches are independent), so
# they run beside each other on the workers rather than one after another
@pytest.mark.parametrize("bench", [pytest.param(b, marks=[pytest.mark.early] if b in (
    "pipeline/run.py", "pipeline/stream_lag.py", "pipeline/stream_bridge.py", "gossip/run.py",
    "firmware/pico.py") else [])
    for b in sorted(BENCH_LINES)])
@pytest.mark.timeout(1500)  # the Pico bench builds its own firmware (cold: minutes)
def test_bench_quick(bench: str) -> None:
    """The bench's command from `make bench QUICK=1` runs and prints each of its lines."""
    command = bench_recipe_commands()[bench]
    p = subprocess.run(command, shell=True, cwd=ROOT, env=make_env(), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=1440)
    out = succeeded(p)
    for line in BENCH_LINES[bench]:
        assert re.search(line, out), "bench/%s printed no line matching %r:\n%s" % (
            bench, line, out[-6000:])
    assert not re.search(r"\bERROR\b|Traceback", out), "bench/%s:\n%s" % (bench, out)


# ---- make fuzz, make harden-report ---------------------------------------------------------


@pytest.mark.early
@pytest.mark.timeout(600)
def test_fuzz_short_fuzzes_every_target(tmp_path: Path) -> None:
    stats_path = tmp_path / "stats.json"
    targets = subprocess.run([sys.executable, str(ROOT / "tests" / "fuzz" / "run.py"),
                              "--list"], capture_output=True, text=True, timeout=60,
                             check=True).stdout.split()
    assert len(targets) >= 10, targets
    out = succeeded(make("fuzz", "FUZZ_SECONDS=1", "FUZZ_STATS=%s" % stats_path,
                         timeout_s=540), "fuzz: %d targets" % len(targets))
    stats = json.loads(stats_path.read_text())
    assert sorted(stats) == sorted(targets), out
    for target, st in stats.items():
        assert st["execs"] > 0 and st["crashes"] == 0, (target, st)


@pytest.mark.early
@pytest.mark.timeout(600)
def test_harden_report_short_shows_nothing_acked_lost(tmp_path: Path) -> None:
    """With no fuzz stats it fuzzes (FUZZ_ONLY's targets, FUZZ_SECONDS each) first; then a
    row per scenario of tests/adversarial/scenarios, each with its figures."""
    if str(ROOT / "tests" / "adversarial") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests" / "adversarial"))
    from scenarios import SCENARIOS

    p = make("harden-report", "FLOOD_SECONDS=3", "HARDEN_SCALE=1", "HARDEN_JOBS=3",
             "FUZZ_SECONDS=1", "FUZZ_ONLY=cbor", "FUZZ_STATS=%s" % (tmp_path / "stats.json"),
             timeout_s=540)
    out = succeeded(p, "Acknowledged messages lost, all scenarios: 0 (must be 0)",
                    "Memory bounds exceeded: 0 (must be 0)",
                    "Recoveries over 10 s: 0 (must be 0)", "Scenarios failed: 0 (must be 0)",
                    "HARDEN_SCALE=1:")
    assert re.search(r"^  cbor\s+[1-9]\d* inputs  0 crashes$", out, re.M), shown(p)
    num, rss = r"(-|\d+ of \d+)", r"(test|bridge)\s+\d+\s+\d+\s+\d+\s+\+\d+ yes"
    rows = {}
    for key, (scenario, _) in SCENARIOS.items():
        title = scenario + " (3 s)" if key == "board_flood" else scenario
        m = re.search(r"^  %s\s+(%s\s+%s\s+(-|[\d.]+ s)|skipped: .+)$" % (
            re.escape(title), num, rss), out, re.M)
        assert m, "no row for %r, or not all its figures, in:\n%s" % (title, shown(p))
        rows[key] = m.group(1)
    # the scenarios with a publishing board show what it saw acked, none lost
    for key in ("hostile_cbor", "journal_removed", "stop_sigint", "stop_sigterm",
                "kill_restart", "sp_conn_flood", "pit_flood", "topic_flood", "board_flood"):
        assert re.match(r"0 of [1-9]", rows[key]), (key, rows[key])
    assert re.search(r"^  bad_signature\s+[1-9]", out, re.M), shown(p)
    assert "Traceback" not in out, shown(p)


# ---- make test-stress, make hil -----------------------------------------------------------


@pytest.mark.timeout(600)
def test_test_stress_selected_tests() -> None:
    tests = ["tests/shared/test_tlv.py", "tests/shared/test_name.py"]
    p = make("test-stress", "RUNS=1", "HOG=1", "TEST_WORKERS=1",
             "STRESS_TESTS=%s" % " ".join(tests), timeout_s=540)
    out = succeeded(p, "run 1/1: order seed", "0 of 1 runs failed")
    m = re.search(r"^  (\d+) passed.*, \d+ s, exit 0$", out, re.M)
    assert m, shown(p)
    # those two files' tests, no more
    expected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                               *tests], cwd=ROOT, capture_output=True, text=True,
                              timeout=120).stdout
    assert int(m.group(1)) == len(re.findall(r"^tests/\S+::", expected, re.M)), shown(p)


@pytest.mark.timeout(900)
def test_hil_selected_tests() -> None:
    """make hil HIL_ARGS=...: pytest's -k picks; the real-board run, without PORT, is
    skipped with the hint (make test runs the whole HIL suite itself)."""
    p = make("hil", "HIL_ARGS=-k 'mip_package or real'", timeout_s=840)
    out = succeeded(p, "1 passed, 1 skipped", "make hil PORT=/dev/ttyUSB0 BOARD=esp32")
    assert "deselected" in out, shown(p)


# ---- make run --------------------------------------------------------------------------


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _procs_mentioning(text: str) -> list[str]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd:
                found.append("%s: %s" % (d.name, cmd))
    return found


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts, each in a session of its own; whatever is left of their
    groups at the end is ended."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        if _group_alive(p.pid):
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


RUN_FORMS = {
    "demo": [],
    "pipeline": ["PIPELINE=1"],
    "pico": ["SIM_KIND=pico"],
}


@pytest.mark.parametrize("form", list(RUN_FORMS))
@pytest.mark.timeout(600)
def test_run_until_ctrl_c(tmp_path: Path, form: str,
                          started: list[subprocess.Popen[bytes]]) -> None:
    """make run (output not a terminal: the bridge logs instead of its live view): both
    simulated boards register and their readings reach an SP subscriber; Ctrl-C (SIGINT to
    the whole process group, as a terminal sends it) ends everything, cleanly."""
    import pynng

    sp_pub = "tcp://127.0.0.1:%d" % free_port()
    sp_sub = "tcp://127.0.0.1:%d" % free_port()
    run_dir = tmp_path / "run"
    log_path = tmp_path / "make-run.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            ["make", "--no-print-directory", "run", "SP_PUB=%s" % sp_pub, "SP_SUB=%s" % sp_sub,
             "RUN_DIR=%s" % run_dir, *RUN_FORMS[form],
             *(["PIPELINE_PORT=%d" % free_port()] if form == "pipeline" else [])],
            cwd=ROOT, env=make_env(), stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
    started.append(proc)

    def log_text() -> str:
        return log_path.read_text(errors="replace")

    def registered() -> bool:
        assert proc.poll() is None, "make run ended by itself:\n" + log_text()
        return all("board sim%d registered" % i in log_text() for i in (1, 2))

    sub = pynng.Sub0(recv_timeout=1000)
    try:
        sub.subscribe(b"/pubmote/demo/")
        sub.dial(sp_pub, block=False)
        wait_for(registered, 300, "both boards to register:\n" + log_text())
        readings = set()
        deadline = time.monotonic() + 60
        while len(readings) < 2:
            assert time.monotonic() < deadline, "no readings from both boards:\n" + log_text()
            try:
                readings.add(sub.recv().split(b"/")[3])
            except pynng.Timeout:
                pass
        assert readings == {b"sim1", b"sim2"}
    finally:
        sub.close()
    if form == "pipeline":
        pipeline_log = run_dir / "pipeline.log"
        wait_for(lambda: pipeline_log.exists() and "following" in pipeline_log.read_text(),
                 300, "the pipeline to follow the journal")
        wait_for(lambda: any((run_dir / "journal").glob("journal-*")), 60, "a journal file")
        # the job runs on the resident server (a Spark Connect client: no JVM of its own)
        assert "listening on sc://127.0.0.1:" in (run_dir / "serve.log").read_text()
    sim_dir = re.search(r"simulated board sim1 on (\S+)/sim1", log_text())
    assert sim_dir, log_text()
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        raise AssertionError("make run still running 60 s after Ctrl-C:\n" + log_text()) from None
    wait_for(lambda: not _group_alive(proc.pid), 30, "make run's processes to end")
    text = log_text()
    assert "Traceback" not in text, text
    assert "summary: " in text, text  # the bridge's last words on a clean stop
    # its boards (sessions of their own) and their folder went with it
    assert not _procs_mentioning(sim_dir.group(1)), text
    assert not Path(sim_dir.group(1)).exists(), text
    if form == "pipeline":
        assert not _procs_mentioning(str(run_dir)), text


# ---- make deploy, make flash ---------------------------------------------------------------


@pytest.mark.timeout(300)
def test_deploy_to_a_simulated_board(tmp_path: Path,
                                     started: list[subprocess.Popen[bytes]]) -> None:
    """README's first board: `pubmote simdev`, `make deploy`, then a bridge on its line;
    again with KEY_FILE, and the bridge requiring the board's signature."""
    board = tmp_path / "board1"
    simdev = subprocess.Popen([str(BIN / "pubmote"), "simdev", "--dir", str(board)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    started.append(simdev)
    wait_for((board / "repl").exists, 60, "the simulated board's REPL")
    port = "PORT=%s" % (board / "repl")
    # by default the board gets a key, kept in the user's config folder (0600)
    home = tmp_path / "config"
    succeeded(make("deploy", "BOARD=unix", port, "NAME=board1", timeout_s=240,
                   env=make_env(XDG_CONFIG_HOME=str(home))),
              "verified", "deployed board1")
    config = json.loads((board / "flash" / "pubmote_config.json").read_text())
    assert config["name"] == "board1" and config["link"] == "pty"
    default_keys = home / "pubmote" / "board-keys.json"
    assert config["key"] == json.loads(default_keys.read_text())["boards"]["board1"], config
    assert default_keys.stat().st_mode & 0o077 == 0
    keys = tmp_path / "keys.json"
    succeeded(make("deploy", "BOARD=unix", port, "NAME=board1", "KEY_FILE=%s" % keys,
                   timeout_s=240), "deployed board1")
    config = json.loads((board / "flash" / "pubmote_config.json").read_text())
    assert config["key"] == json.loads(keys.read_text())["boards"]["board1"], config
    log_path = tmp_path / "bridge.log"
    with log_path.open("wb") as log:
        bridge = subprocess.Popen(
            [str(BIN / "pubmote"), "bridge", "--no-view", "--serial", str(board / "tty"),
             "--keys", str(keys), "--require-signed", "/pubmote", "--sp-pub",
             "tcp://127.0.0.1:%d" % free_port(), "--sp-sub", "none"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    started.append(bridge)
    wait_for(lambda: "board board1 registered" in log_path.read_text(), 60,
             "the deployed board to register")
    # the board's signed traffic is taken: nothing rejected; what it wrote into its line
    # before any bridge read it (notifies ahead of its registration) is refused as
    # unregistered, at INFO (core/auth.py: not an attack)
    text = log_path.read_text()
    assert "rejected" not in text, text[-3000:]
    assert all("unregistered" in x for x in text.splitlines() if "refused notify" in x), text


UF2_MAGIC = b"UF2\n\x57\x51\x5d\x9e"


# a cold firmware build on a loaded machine, after waiting for the one that holds the lock
FLASH_BUILD_WAIT_S = 900


@pytest.mark.timeout(FLASH_BUILD_WAIT_S + 300)
def test_flash_copies_the_uf2_to_the_bootsel_drive(tmp_path: Path) -> None:
    """A Pico in BOOTSEL mode is a USB drive holding INFO_UF2.TXT: make flash copies the
    firmware make firmware built (BOARD=pico), or the UF2 given (BOARD=rp2040), onto it."""
    from pubmote.boards.fwbuild import CACHE

    drive = tmp_path / "RPI-RP2"
    drive.mkdir()
    (drive / "INFO_UF2.TXT").write_text("UF2 Bootloader v3.0\nBoard-ID: RPI-RP2\n")
    env = make_env(PUBMOTE_UF2_DRIVE=str(drive))
    succeeded(make("flash", "BOARD=pico", timeout_s=FLASH_BUILD_WAIT_S, env=env),
              "done: the board reboots")
    built = CACHE / "pico" / "firmware.uf2"
    assert (drive / "firmware.uf2").read_bytes() == built.read_bytes()
    assert built.read_bytes()[:8] == UF2_MAGIC
    given = tmp_path / "RPI_PICO-v1.27.0.uf2"
    given.write_bytes(bytes(built.read_bytes()[:512 * 4]))
    succeeded(make("flash", "BOARD=rp2040", "FIRMWARE=%s" % given, timeout_s=120, env=env),
              "done: the board reboots")
    assert (drive / given.name).read_bytes() == given.read_bytes()
    # an ESP32 needs its serial port: said at once, exit status 2
    p = make("flash", "BOARD=esp32", "FIRMWARE=%s" % given, timeout_s=120, env=env)
    assert p.returncode == 2 and "make flash needs PORT=" in p.stdout, shown(p)


# ---- make clean ------------------------------------------------------------------------


def test_clean_removes_what_make_made(tmp_path: Path) -> None:
    """In a scratch copy: build/, .venv and node_modules go; the sources stay."""
    shutil.copy(MAKEFILE, tmp_path / "Makefile")
    for d in ("build/firmware/pico", ".venv/bin", "node_modules/x", "host/pubmote"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "f").write_text("x")
    succeeded(make("clean", cwd=tmp_path, timeout_s=60))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Makefile", "host"]
    assert (tmp_path / "host" / "pubmote" / "f").is_file()


# the README's targets and the tests above that run them
COVERED = {
    "run": test_run_until_ctrl_c,
    "test": test_make_test_runs_lint_setup_and_firmware,
    "lint": test_make_test_runs_lint_setup_and_firmware,
    "setup": test_make_test_runs_lint_setup_and_firmware,
    "firmware": test_make_test_runs_lint_setup_and_firmware,
    "flash": test_flash_copies_the_uf2_to_the_bootsel_drive,
    "deploy": test_deploy_to_a_simulated_board,
    "hil": test_hil_selected_tests,
    "bench": test_bench_quick,
    "fuzz": test_fuzz_short_fuzzes_every_target,
    "harden-report": test_harden_report_short_shows_nothing_acked_lost,
    "clean": test_clean_removes_what_make_made,
    "test-stress": test_test_stress_selected_tests,
}

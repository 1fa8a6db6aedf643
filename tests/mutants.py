"""Issue #20: each once-unfailable test must fail against a deliberately broken build.
Apply one break at a time, run the test that must catch it, restore the file; prints the
failure. Usage: .venv/bin/python tests/mutants.py [M1 M2 ...] (none: all; M5 runs make hil's
suite, M2/M3/M6 start bridges: minutes)."""
import subprocess
import sys
from pathlib import Path

MUTS = [
 ("M1 get_peers answers no peers", "host/pubmote/dht/node.py",
  'r[b"values"] = [krpc.compact_peer(p) for p in peers]', 'r[b"values"] = []',
  "tests/host/dht/test_dht_node.py::test_two_nodes_all_queries"),
 ("M2 bridge ignores board filters", "host/pubmote/core/hub_base.py",
  "        for b in receivers:\n            if b.filter.matches(line):", "        for b in receivers:\n            if True:",
  "tests/host/gateway/test_bridge_e2e.py::test_pynng_and_nanocat_publishers_reach_board_subscribers"),
 ("M3 board deliveries not counted", "host/pubmote/core/delivery.py",
  'b.counters["delivered"] += 1', 'pass',
  "tests/host/gateway/test_bridge_e2e.py::test_filter_semantics_end_to_end"),
 ("M4 a bridge flag without help", "host/pubmote/cli/bridge.py",
  'help="record every packet (time, face, direction) as JSON lines in FILE; "\n                        "read it with `pubmote dissect --trace FILE`")',
  'help=argparse.SUPPRESS)',
  "tests/host/cli/test_bridge_cli.py::test_help_documents_every_flag"),
 ("M5 demo echoes the command twice", "firmware/pubmote_node/demo.py",
  'await node.publish(base + "ack", payload)', 'await node.publish(base + "ack", payload + payload)',
  "tests/hil/test_hil.py"),
 ("M6 last value handed twice at registration", "host/pubmote/gateway/retained.py",
  "            if self._give(b, topic, item.seq) and self.hub.deliver(b.name, msg):",
  "            if self._give(b, topic, item.seq) and self.hub.deliver(b.name, msg):\n                self.hub.deliver(b.name, msg)",
  "tests/host/gateway/test_dht_retained.py::test_late_gateway_gets_last_value_then_pushed_updates"),
 ("M7 verify_interest accepts any signature", "shared/pubmote_wire/interest.py",
  "    i = interest\n    if i.signed_end < 0:\n        return False", "    i = interest\n    if i.signed_end < 0:\n        return True",
  "tests/shared/test_corpus.py"),
 ("M8 bencode strings decode to str", "host/pubmote/dht/bencode.py",
  "        return data[start:start + n]", "        return data[start:start + n].decode('latin-1')  # type: ignore",
  "tests/host/dht/test_dht_bencode.py::test_encode_and_decode_exact_bytes"),
 ("M9 malformed RPC stream closed, not reset", "host/pubmote/p2p/pubsub/router.py",
  'log.info("gossipsub: closing stream from %s: %s", peer, e)\n                stream.reset()',
  'log.info("gossipsub: closing stream from %s: %s", peer, e)\n                stream.close()',
  "tests/host/p2p/test_gossipsub_router.py::test_malformed_and_oversized_rpcs_close_the_stream"),
]
only = sys.argv[1:]
root = Path(__file__).resolve().parents[1]  # the repository
for label, f, old, new, test in MUTS:
    if only and label.split()[0] not in only:
        continue
    p = root / f
    src = p.read_text()
    assert src.count(old) >= 1, (label, "mutation point not found")
    p.write_text(src.replace(old, new, 1))
    try:
        r = subprocess.run([str(root / ".venv/bin/python"), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", test],
                           cwd=root, capture_output=True, text=True, timeout=900)
    finally:
        p.write_text(src)
    lines = [line for line in r.stdout.splitlines() if line.startswith("E ") or " failed" in line or " passed" in line]
    print("== %s (%s) -> exit %d" % (label, test, r.returncode))
    for line in lines[:4]:
        print("   " + line[:220])
    sys.stdout.flush()

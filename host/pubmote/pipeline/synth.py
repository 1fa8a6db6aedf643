"""Synthetic journals in the bridge's exact record format, for the pipeline's tests and
benchmarks (and for trying the pipeline without boards): boards publishing CBOR
readings once a second, each message delivered to a few subscribers, some dropped or
nacked, some boards reconnecting; with `late`, some readings held back (late within a
minute's watermark, or beyond it) and some taken without a clock. Deterministic for a
given seed."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pubmote_wire import cbor

T0_MS = 1_789_999_980_000  # 2026-09-21T14:13:00Z, on a window boundary


def records(n_messages: int, *, boards: int = 4, subscribers: int = 2, seed: int = 1,
            t0_ms: int = T0_MS, period_ms: int = 1000,
            late: bool = False) -> Iterator[dict[str, Any]]:
    """Records for n_messages relayed messages (each with its egress records), in the
    order the bridge writes them, plus board up/down events now and then. With `late`,
    of every 100 messages some 3 were taken 3-45 s before they arrived, 1 61-200 s before,
    and 3 without a taken-time (their own random stream: the rest is as without)."""
    rnd = random.Random(seed)
    held = random.Random(seed + 1_000_003)
    names = ["board%d" % (i + 1) for i in range(boards)]
    subs = ["sp:127.0.0.1:%d" % (40000 + i) for i in range(subscribers)]
    for b in names:
        yield {"t_bridge": float(t0_ms - 500), "origin": b, "ingress": "serial:/dev/pts/" + b,
               "outcome": "board_up", "reconnect": False}
    for k in range(n_messages):
        b = names[k % boards]
        t = t0_ms + (k // boards) * period_ms + rnd.randint(0, period_ms - 1)
        topic = "/pubmote/demo/%s/temperature" % b
        if rnd.random() < 0.002:
            yield {"t_bridge": float(t), "topic": topic, "origin": b,
                   "ingress": "serial:" + b, "outcome": "fetch_failed"}
            continue
        payload = cbor.dumps({"seq": k // boards, "t_ms": t % 100000,
                              "celsius": round(18 + 8 * rnd.random(), 2)})
        taken: int | None = t - 5
        if late:
            r = held.random()
            taken = (t - held.randint(3000, 45_000) if r < 0.03 else
                     t - held.randint(61_000, 200_000) if r < 0.04 else
                     None if r < 0.07 else taken)
        base = {"t_board": t - 3, "t_taken": taken, "t_bridge": float(t), "topic": topic,
                "origin": b, "ingress": "serial:" + b, "size": len(payload)}
        yield dict(base, egress=None, outcome="relayed", payload=payload.hex())
        for s in subs:
            r = rnd.random()
            outcome = "delivered" if r > 0.01 else ("dropped" if r > 0.003 else "nacked")
            yield dict(base, egress=s, outcome=outcome,
                       latency_ms=round(rnd.lognormvariate(0.5, 0.6), 3))
        if rnd.random() < 0.001:
            yield {"t_bridge": float(t + 1), "origin": b, "ingress": "serial:" + b,
                   "outcome": "board_down"}
            yield {"t_bridge": float(t + 2), "origin": b, "ingress": "serial:" + b,
                   "outcome": "board_up", "reconnect": True}


def write_journal(directory: str | Path, recs: Iterator[dict[str, Any]], *,
                  per_file: int = 50_000, start_index: int = 0) -> list[Path]:
    """Write records as finished journal files (journal-NNNNNN.jsonl), per_file each;
    return the files written. Each file appears by rename, as the bridge's do."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    batch: list[str] = []

    def flush() -> None:
        final = d / ("journal-%06d.jsonl" % (start_index + len(files)))
        part = d / (".%s.part" % final.name)
        part.write_text("".join(batch))
        part.rename(final)
        files.append(final)
        batch.clear()

    for rec in recs:
        batch.append(json.dumps(rec, separators=(",", ":")) + "\n")
        if len(batch) >= per_file:
            flush()
    if batch:
        flush()
    return files

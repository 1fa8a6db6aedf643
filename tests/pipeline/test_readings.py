"""Readings from payloads (the UDF the pipeline runs), without Spark."""

from __future__ import annotations

import cbor2

from pubmote.pipeline.readings import reading_of
from pubmote_wire import cbor


def h(obj: object) -> str:
    return cbor2.dumps(obj).hex()


def test_readings_from_cbor_payloads() -> None:
    cases = [
        (h(21.5), None, 21.5),
        (h(7), None, 7.0),
        (h({"seq": 3, "t_ms": 1234, "celsius": 20.25}), None, 20.25),  # the demo's payload
        (cbor.dumps({"seq": 3, "t_ms": 1, "celsius": 19.5}).hex(), None, 19.5),
        (h({"value": 1.5, "celsius": 9.0}), None, 1.5),  # value wins
        (h({"seq": 1, "humidity": 40}), None, 40.0),  # the only number that isn't a clock
        (h({"seq": 1, "humidity": 40, "pressure": 1013}), None, None),  # ambiguous
        (h({"seq": 1, "humidity": 40, "pressure": 1013}), "pressure", 1013.0),
        (h({"celsius": True}), None, None),  # a bool is no reading
        (h(float("nan")), None, None),
        (h("text"), None, None),
        (b"21.5".hex(), None, 21.5),  # an SP publisher's number as text
        (b"\xff\x00".hex(), None, None),  # garbage
        ("zz", None, None),  # not hex
        ("", None, None),
        (None, None, None),
    ]
    for payload, key, want in cases:
        assert reading_of(payload, key) == want, (payload, key)

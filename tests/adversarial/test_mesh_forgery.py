"""The gateway mesh in an open realm: an outsider signing envelopes that claim another
gateway's name, with any epoch and sequence number (far ahead, far behind, the same as
the real one's, the largest a CBOR integer takes), cannot make a gateway drop that
gateway's real messages: an envelope moves only the window of the key that signed it.
The scenario: tests/adversarial/scenarios/stale.py."""

from __future__ import annotations

from pathlib import Path

from attackers import run
from measure import RECOVERY_S
from scenarios import stale


def test_forged_envelopes_do_not_blind_a_gateway(tmp_path: Path) -> None:
    r = run(stale.mesh_forgery(tmp_path))
    # while the outsider was there, and after: every real message arrived, in order
    assert r["topics"] == ["/site/%d" % k for k in range(1, 44)], r["topics"]
    assert r["name_conflicts"] >= 1, r
    # A's own window saw every one of its messages once, in order
    assert r["a_window"] == [(43, 0, 0)], r
    assert r["recovery_s"] <= RECOVERY_S and r["within_bound"], r

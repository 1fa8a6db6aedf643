"""Board authentication: boards sign their notify Interests (HmacWithSha256, with
SignatureNonce and SignatureTime) and their message Data with a key given at deploy; in
realms that require it (topic prefixes), the bridge accepts only those, from known boards,
fresh and never replayed. Keys live in a 0600 JSON file and are never logged."""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
from collections import OrderedDict
from pathlib import Path

from pubmote_wire import data as ndn_data
from pubmote_wire import interest as ndn_interest
from pubmote_wire import name as ndn_name
from pubmote_wire.signature import HMAC_SHA256

log = logging.getLogger("pubmote.auth")

NODE_PREFIX = ndn_name.from_uri("/pubmote/node")
REASONS = ("unsigned", "unknown_board", "bad_signature", "replayed", "stale",
           "bad_data_signature", "register_rejected")


def load_keys(path: str) -> dict[str, bytes]:
    """Board name -> key, from a keys file ({"boards": {"name": "hex"}})."""
    with open(path) as f:
        doc = json.load(f)
    return {str(k): bytes.fromhex(v) for k, v in doc.get("boards", {}).items()}


def key_for_board(path: str, board: str) -> bytes:
    """The board's key from the keys file, made (32 random bytes) if it has none yet.
    The file is created with mode 0600 and rewritten atomically."""
    p = Path(path)
    doc: dict[str, dict[str, str]] = {"boards": {}}
    if p.exists():
        doc = json.loads(p.read_text())
        doc.setdefault("boards", {})
    if board not in doc["boards"]:
        doc["boards"][board] = secrets.token_hex(32)
        tmp = p.with_name(p.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
        os.replace(tmp, p)
    return bytes.fromhex(doc["boards"][board])


def board_of(publisher: bytes) -> str | None:
    """The board name of a publisher prefix /pubmote/node/<name>."""
    if not publisher.startswith(NODE_PREFIX):
        return None
    comps = ndn_name.components(publisher)
    if len(comps) != 3:
        return None
    return bytes(ndn_name.component_type_value(comps[2])[1]).decode(errors="replace")


class BoardAuth:
    """The bridge's policy: keys of known boards, realms (topic prefixes) requiring signing,
    a freshness window for SignatureTime and a bounded memory of SignatureNonces."""

    def __init__(self, keys: dict[str, bytes], signed_prefixes: list[bytes], *,
                 window_ms: int = 60_000, nonces_per_board: int = 1024) -> None:
        self.keys = keys
        self.signed_prefixes = signed_prefixes
        self.window_ms = window_ms
        self.nonces_per_board = nonces_per_board
        self._nonces: dict[str, OrderedDict[bytes, None]] = {}
        self.rejected = dict.fromkeys(REASONS, 0)
        self._logged: dict[tuple[str, str], int] = {}
        self.accepted = 0

    def requires(self, topic: bytes) -> bool:
        return any(ndn_name.is_prefix(p, topic) for p in self.signed_prefixes)

    def _reject(self, reason: str, board: str | None, what: str) -> str:
        self.rejected[reason] += 1
        # a misconfigured board retries for ever: log its 1st, 2nd, 4th, 8th... refusal
        key = (board or "?", reason)
        if key not in self._logged and len(self._logged) >= 1024:
            self._logged.clear()  # names come from packets: bounded, at worst said again
        n = self._logged[key] = self._logged.get(key, 0) + 1
        if n & (n - 1) == 0:
            log.warning("rejected %s from board %s: %s (%d so far)", what, board or "?",
                        reason, n)
        return reason

    def check_interest(self, board: str | None, i: ndn_interest.Interest, pkt: bytes,
                       *, what: str = "notify", check_time: bool = True) -> str | None:
        """None if the signed Interest is acceptable, else the reason (counted, logged)."""
        if i.sig_type != HMAC_SHA256:  # no signature, or one anybody can make (digest)
            return self._reject("unsigned", board, what)
        key = self.keys.get(board or "")
        if key is None:
            return self._reject("unknown_board", board, what)
        if not ndn_interest.verify_interest(i, pkt, key):
            return self._reject("bad_signature", board, what)
        assert board is not None
        if i.sig_nonce is None:
            return self._reject("unsigned", board, what)
        if check_time:
            now = int(time.time() * 1000)
            if i.sig_time_ms is None or abs(now - i.sig_time_ms) > self.window_ms:
                return self._reject("stale", board, what)
        seen = self._nonces.setdefault(board, OrderedDict())
        nonce = bytes(i.sig_nonce)
        if nonce in seen:
            return self._reject("replayed", board, what)
        seen[nonce] = None
        while len(seen) > self.nonces_per_board:
            seen.popitem(last=False)
        self.accepted += 1
        return None

    def check_data(self, board: str | None, pkt: bytes) -> str | None:
        key = self.keys.get(board or "")
        d = ndn_data.decode_data(pkt)
        if key is None:
            return self._reject("unknown_board", board, "message Data")
        if d.sig_type != HMAC_SHA256 or not ndn_data.verify_data(d, pkt, key):
            return self._reject("bad_data_signature", board, "message Data")
        return None

"""Board authentication: boards sign their notify Interests (HmacWithSha256, with
SignatureNonce and SignatureTime) and their message Data with a key given at deploy; in
realms that require it (topic prefixes), the bridge accepts only those, from known boards,
fresh and never replayed. A keyed board publishes only within its grant: topics with a
component equal to its name, plus the prefixes the keys file grants it. Keys live in a 0600
JSON file ({"boards": {NAME: HEX}, "grants": {NAME: [PREFIX, ...]}}) and are never logged."""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
from collections import OrderedDict
from pathlib import Path

from pubmote.files.private import read_private, write_private
from pubmote_wire import data as ndn_data
from pubmote_wire import interest as ndn_interest
from pubmote_wire import name as ndn_name
from pubmote_wire.signature import HMAC_SHA256

log = logging.getLogger("pubmote.auth")

NODE_PREFIX = ndn_name.from_uri("/pubmote/node")
REASONS = ("unsigned", "unknown_board", "bad_signature", "replayed", "stale",
           "bad_data_signature", "register_rejected", "anonymous", "takeover", "spoofed",
           "unsigned_ingress", "unregistered", "not_granted")
# not attacks: counted, logged at INFO (a board that published before it registered again)
ROUTINE = frozenset({"unregistered"})


class KeysFileError(ValueError):
    """A boards' keys file that is not what `pubmote deploy --key-file` writes; `why`
    says what is wrong without the file's name, str() with it."""

    def __init__(self, path: str | Path, why: str) -> None:
        super().__init__("keys file %s: %s" % (path, why))
        self.why = why


def default_keys_file() -> Path:
    """$XDG_CONFIG_HOME/pubmote/board-keys.json (~/.config/pubmote/board-keys.json): where
    `pubmote deploy` keeps the keys it makes when not given --key-file."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "pubmote" / "board-keys.json"


def _read_doc(path: str | Path) -> dict[str, object]:
    raw = read_private(path)
    try:
        doc = json.loads(raw.decode())
    except (UnicodeDecodeError, ValueError):
        raise KeysFileError(path, "not JSON (as `pubmote deploy --key-file` writes)") \
            from None
    if not isinstance(doc, dict):
        raise KeysFileError(path, 'expected {"boards": {"NAME": "HEX KEY"}}, as `pubmote '
                                  'deploy --key-file` writes')
    return doc


def _keys_doc(path: str | Path) -> dict[str, str]:
    """The boards table of a keys file ({"boards": {"name": "hex"}}), checked: private
    (files/private.py), JSON, each key 16 to 64 bytes of hex."""
    return _check_boards(path, _read_doc(path))


def _check_boards(path: str | Path, doc: dict[str, object]) -> dict[str, str]:
    boards = doc.get("boards", {})
    if not isinstance(boards, dict):
        raise KeysFileError(path, 'expected {"boards": {"NAME": "HEX KEY"}}, as `pubmote '
                                  'deploy --key-file` writes')
    for name, hexkey in boards.items():
        try:
            key = bytes.fromhex(hexkey) if isinstance(hexkey, str) else b""
        except ValueError:
            key = b""
        if not 16 <= len(key) <= 64:
            raise KeysFileError(path, "board %s: the key is not hex of 16-64 bytes (a keys "
                                      "file from `pubmote deploy --key-file` holds 64 hex "
                                      "digits per board)" % name)
    return {str(k): str(v) for k, v in boards.items()}


def _check_grants(path: str | Path, doc: dict[str, object],
                  boards: dict[str, str]) -> dict[str, list[bytes]]:
    """The "grants" table ({"NAME": ["/prefix", ...]}): each board one with a key in the
    file, each prefix an NDN name URI (the topics under it, the prefix itself included)."""
    grants = doc.get("grants", {})
    if not isinstance(grants, dict):
        raise KeysFileError(path, 'grants: expected {"NAME": ["/topic/prefix", ...]}')
    out: dict[str, list[bytes]] = {}
    for name, prefixes in grants.items():
        if name not in boards:
            raise KeysFileError(path, "grants: board %s has no key in \"boards\" (a grant "
                                      "goes with a key)" % name)
        if not isinstance(prefixes, list):
            raise KeysFileError(path, 'grants: board %s: expected a list of topic prefixes '
                                      '("/site/alerts", ...)' % name)
        out[name] = []
        for p in prefixes:
            try:
                if not isinstance(p, str) or not p.startswith("/"):
                    raise ValueError(p)
                out[name].append(ndn_name.from_uri(p))
            except ValueError:
                raise KeysFileError(path, "grants: board %s: %r is not a topic prefix (a "
                                          "name starting with /, e.g. \"/site/alerts\")"
                                    % (name, p)) from None
    return out


def load_grants(path: str | Path) -> dict[str, list[bytes]]:
    """Board name -> the topic prefixes (NDN names) the keys file grants it beyond its own
    topics; ValueError (naming the file) for a malformed table."""
    doc = _read_doc(path)
    return _check_grants(path, doc, _check_boards(path, doc))


def load_keys(path: str | Path) -> dict[str, bytes]:
    """Board name -> key, from a keys file ({"boards": {"name": "hex"}}).

    Raises:
        ValueError: readable by others (KeyFileError), not JSON, or a malformed key; the
            message names the file.
        OSError: missing or unreadable.
    """
    doc = _read_doc(path)
    boards = _check_boards(path, doc)
    _check_grants(path, doc, boards)  # a bad grant stops the start, not the first publish
    return {k: bytes.fromhex(v) for k, v in boards.items()}


def board_key(path: str | Path, board: str) -> bytes:
    """The board's key in the keys file, or a new one (32 random bytes) if the file or
    the board is not there yet; nothing is written (save_board_key does, once the board
    has it)."""
    if not Path(path).exists():
        return secrets.token_bytes(32)
    hexkey = _keys_doc(path).get(board)
    return bytes.fromhex(hexkey) if hexkey is not None else secrets.token_bytes(32)


def save_board_key(path: str | Path, board: str, key: bytes) -> None:
    """Put the board's key into the keys file (made mode 0600 when missing; its folder
    too), in one step; the file's other tables (grants) are kept."""
    doc = _read_doc(path) if Path(path).exists() else {}
    boards = _check_boards(path, doc)
    if boards.get(board) == key.hex():
        return
    boards[board] = key.hex()
    doc["boards"] = boards
    Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_private(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())


def key_for_board(path: str | Path, board: str) -> bytes:
    """The board's key from the keys file, made and saved if it has none yet."""
    key = board_key(path, board)
    save_board_key(path, board, key)
    return key


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
                 window_ms: int = 60_000, nonces_per_board: int = 1024,
                 allow_anonymous: bool = True,
                 grants: dict[str, list[bytes]] | None = None) -> None:
        self.keys = keys
        # topic prefixes a keyed board may publish under beyond its own topics
        self.grants = grants or {}
        # boards without a key in `keys` may register (by name only) when True; refused
        # when False (the bridge's --allow-anonymous-boards)
        self.allow_anonymous = allow_anonymous
        self.signed_prefixes = signed_prefixes
        self.window_ms = window_ms
        self.nonces_per_board = nonces_per_board
        self._nonces: dict[str, OrderedDict[bytes, None]] = {}
        self.rejected = dict.fromkeys(REASONS, 0)
        self._logged: dict[tuple[str, str], int] = {}
        self.accepted = 0

    def requires(self, topic: bytes) -> bool:
        return any(ndn_name.is_prefix(p, topic) for p in self.signed_prefixes)

    def granted(self, board: str, topic: bytes) -> bool:
        """Whether a keyed board may publish on topic (an NDN name): one of its components
        is the board's name (/pubmote/demo/sim1/temperature for sim1), or the keys file
        grants it a prefix of topic. Boards without a key (allowed anonymous) are not
        confined: there is no key to grant anything to."""
        if board not in self.keys:
            return True
        own = ndn_name.generic(board.encode())
        if any(bytes(c) == own for c in ndn_name.components(topic)):
            return True
        return any(ndn_name.is_prefix(p, topic) for p in self.grants.get(board, ()))

    def reject(self, reason: str, board: str | None, what: str) -> str:
        """Count and log (not flood) a refusal; returns the reason."""
        return self._reject(reason, board, what)

    def _reject(self, reason: str, board: str | None, what: str) -> str:
        self.rejected[reason] += 1
        # a misconfigured board retries for ever: log its 1st, 2nd, 4th, 8th... refusal
        key = (board or "?", reason)
        if key not in self._logged and len(self._logged) >= 1024:
            self._logged.clear()  # names come from packets: bounded, at worst said again
        n = self._logged[key] = self._logged.get(key, 0) + 1
        if n & (n - 1) == 0:
            log.log(logging.INFO if reason in ROUTINE else logging.WARNING,
                    "refused %s from board %s: %s (%d so far)" if reason in ROUTINE
                    else "rejected %s from board %s: %s (%d so far)", what, board or "?",
                    reason, n)
        return reason

    def interest_refusal(self, board: str | None, i: ndn_interest.Interest, pkt: bytes,
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

    def data_refusal(self, board: str | None, pkt: bytes) -> str | None:
        """None if the message Data is signed by the board's key, else the reason."""
        key = self.keys.get(board or "")
        d = ndn_data.decode_data(pkt)
        if key is None:
            return self._reject("unknown_board", board, "message Data")
        if d.sig_type != HMAC_SHA256 or not ndn_data.verify_data(d, pkt, key):
            return self._reject("bad_data_signature", board, "message Data")
        return None

"""TLS on the bridge's --tcp board face: each connection's first byte says what it speaks
(0x16: a TLS handshake; 0x00: pubmote's link framing in clear), TLS runs over memory BIOs
so every failure is seen and counted here, and a board that completes the handshake gets
an ordinary StreamFace over the decrypted stream. Plaintext boards are refused when the
configuration requires encryption; nothing a peer sends ends the bridge."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import Any

from pubmote.core.admission import Admission, source_of
from pubmote.core.tlscert import CertError, check_key_file

log = logging.getLogger("pubmote.faces")

TLS_RECORD_HANDSHAKE = 0x16  # the first byte of every TLS ClientHello
FRAME_DELIMITER = 0x00  # the first byte a pubmote board sends on a clear link
HANDSHAKE_TIMEOUT_S = 20.0  # a Pico W verifies an ECDSA certificate in a few seconds
MAX_PENDING_BYTES = 64 * 1024  # unread ciphertext one connection may hold
MAX_SOURCES_LOGGED = 1024  # distinct peer addresses remembered for log-once


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """The TLS server context of the --tcp face: TLS 1.2 or 1.3, the gateway's certificate
    and key (the key file refused when others can read it). CertError on any fault."""
    check_key_file(key_file)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.num_tickets = 0  # boards never resume a session: no tickets for them to hold
    try:
        ctx.load_cert_chain(cert_file, key_file)
    except FileNotFoundError as e:
        raise CertError("TLS certificate or key: %s: %s" % (e.filename, e.strerror)) from None
    except (ssl.SSLError, OSError) as e:
        raise CertError("tcp_tls_cert %s with tcp_tls_key %s: not a certificate and its key "
                        "(%s); make a pair with `pubmote tls init`"
                        % (cert_file, key_file, getattr(e, "reason", None) or e)) from None
    return ctx


class LinkGuard:
    """What the --tcp face lets in, and the counters of what it refused: shared by every
    connection of the bridge's TCP listeners."""

    def __init__(self, ctx: ssl.SSLContext | None, require_tls: bool,
                 handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S) -> None:
        self.ctx = ctx
        self.require_tls = require_tls
        self.handshake_timeout_s = handshake_timeout_s
        self.counters = {"tls_handshakes": 0, "tls_failed": 0, "plaintext_refused": 0,
                         "plaintext_accepted": 0}
        self._logged: set[tuple[str, str]] = set()

    def note(self, source: str, what: str, detail: str) -> None:
        """Count `what` and log it once per source address (a board retrying every few
        seconds must not fill the log); beyond MAX_SOURCES_LOGGED sources, count only."""
        self.counters[what] += 1
        key = (source, what)
        if key in self._logged or len(self._logged) >= MAX_SOURCES_LOGGED:
            log.debug("%s from %s: %s", what, source, detail)
            return
        self._logged.add(key)
        log.warning("board link from %s refused: %s (logged once per address; "
                    "counted in the status line)", source, detail)

    def summary(self) -> str:
        c = self.counters
        return ("TCP boards: %d TLS, %d TLS failed, %d plaintext refused, %d plaintext"
                % (c["tls_handshakes"], c["tls_failed"], c["plaintext_refused"],
                   c["plaintext_accepted"]))


class _TlsTransport(asyncio.Transport):
    """The decrypted side of one connection, as the StreamFace sees it."""

    def __init__(self, port: BoardPort) -> None:
        super().__init__()
        self._port = port

    def write(self, data: Any) -> None:
        self._port.send_plain(bytes(data))

    def get_write_buffer_size(self) -> int:
        return self._port.buffered()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        raw = self._port.raw
        if raw is not None:
            raw.set_write_buffer_limits(high, low)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self._port.tls
        raw = self._port.raw
        return raw.get_extra_info(name, default) if raw is not None else default

    def is_closing(self) -> bool:
        raw = self._port.raw
        return raw is None or raw.is_closing()

    def close(self) -> None:
        self._port.close_tls()

    def abort(self) -> None:
        if self._port.raw is not None:
            self._port.raw.abort()


class BoardPort(asyncio.Protocol):
    """One TCP connection to a --tcp face that has TLS configured: decides from the first
    byte, runs the TLS handshake (bounded in time and buffered bytes), then hands the
    stream to the face `make_face()` builds."""

    def __init__(self, guard: LinkGuard, make_face: Callable[[], asyncio.Protocol], *,
                 admission: Admission | None = None) -> None:
        self.guard = guard
        self.make_face = make_face
        # the listener's connection caps count a connection from its first byte, handshake
        # included (the face it hands over to then admits nothing again)
        self._admission = admission
        self._admitted = False
        self._counted_as: str | None = None
        self.raw: asyncio.Transport | None = None
        self.tls: ssl.SSLObject | None = None
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._face: asyncio.Protocol | None = None
        self._source = "?"
        self._timer: asyncio.TimerHandle | None = None
        self._done = False  # refused or failed: ignore whatever else arrives

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        peer = transport.get_extra_info("peername")
        if self._admission is not None:
            self._counted_as = source_of(peer)
            if not self._admission.admit(self._counted_as):
                self._done = True
                transport.abort()
                return
            self._admitted = True
        self.raw = transport
        self._source = str(peer[0]) if peer else "?"
        self._timer = asyncio.get_running_loop().call_later(
            self.guard.handshake_timeout_s, self._timed_out)

    def data_received(self, data: bytes) -> None:
        if self._done or not data:
            return
        if self.tls is None and self._face is None:
            self._first_bytes(data)
        elif self.tls is not None:
            self._feed_tls(data)
        else:
            assert self._face is not None
            self._face.data_received(data)

    def _first_bytes(self, data: bytes) -> None:
        first = data[0]
        if first == TLS_RECORD_HANDSHAKE and self.guard.ctx is not None:
            self.tls = self.guard.ctx.wrap_bio(self._in, self._out, server_side=True)
            self._feed_tls(data)
            return
        if self.guard.require_tls:
            if first == FRAME_DELIMITER:
                self._refuse("plaintext_refused", "a board speaking without TLS, and this "
                             "bridge requires encryption on board links (deploy the board "
                             "with `pubmote deploy --gateway-cert`)")
            else:
                self._refuse("tls_failed", "not a TLS handshake (first byte 0x%02x)" % first)
            return
        self._cancel_timer()
        self.guard.counters["plaintext_accepted"] += 1
        self._start_face(self.raw)
        assert self._face is not None
        self._face.data_received(data)

    def _feed_tls(self, data: bytes) -> None:
        tls = self.tls
        assert tls is not None
        self._in.write(data)
        if self._face is None:
            try:
                tls.do_handshake()
            except ssl.SSLWantReadError:
                self._flush()
                if self._in.pending > MAX_PENDING_BYTES:
                    self._refuse("tls_failed", "TLS handshake over %d bytes"
                                 % MAX_PENDING_BYTES)
                return
            except (ssl.SSLError, OSError, ValueError) as e:
                self._flush()  # the alert, so the board's log says why
                self._refuse("tls_failed", "TLS handshake failed (%s)"
                             % (getattr(e, "reason", None) or e))
                return
            self._cancel_timer()
            self.guard.counters["tls_handshakes"] += 1
            self._start_face(_TlsTransport(self))
        self._read_plain()
        self._flush()

    def _read_plain(self) -> None:
        tls = self.tls
        assert tls is not None
        while self._face is not None and not self._done:
            try:
                chunk = tls.read(65536)
            except ssl.SSLWantReadError:
                return
            except ssl.SSLZeroReturnError:  # the board closed the TLS session
                self.close_tls()
                return
            except (ssl.SSLError, OSError) as e:
                log.info("TLS board link from %s: %s", self._source,
                         getattr(e, "reason", None) or e)
                self._abort()
                return
            if not chunk:
                return
            self._face.data_received(chunk)

    def _start_face(self, transport: asyncio.BaseTransport | None) -> None:
        face = self.make_face()
        self._face = face
        face.connection_made(transport)  # type: ignore[arg-type]

    def send_plain(self, data: bytes) -> None:
        if self.tls is None or self.raw is None or self._done:
            return
        try:
            self.tls.write(data)
        except (ssl.SSLError, OSError):
            self._abort()
            return
        self._flush()

    def buffered(self) -> int:
        raw = self.raw
        return (raw.get_write_buffer_size() if raw is not None else 0) + self._out.pending

    def _flush(self) -> None:
        if self._out.pending and self.raw is not None and not self.raw.is_closing():
            self.raw.write(self._out.read())

    def close_tls(self) -> None:
        if self.tls is not None and self.raw is not None and not self._done:
            try:
                self.tls.unwrap()  # close_notify
            except (ssl.SSLError, OSError, ValueError):
                pass
            self._flush()
        self._done = True
        if self.raw is not None:
            self.raw.close()

    def _refuse(self, what: str, detail: str) -> None:
        self.guard.note(self._source, what, detail)
        self._abort()

    def _abort(self) -> None:
        self._done = True
        self._cancel_timer()
        if self.raw is not None:
            self.raw.close()

    def _timed_out(self) -> None:
        self._timer = None
        if self._face is None and not self._done:
            self._refuse("tls_failed", "no TLS handshake within %g s"
                         % self.guard.handshake_timeout_s)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._admitted and self._admission is not None:
            self._admission.release(self._counted_as)
            self._admitted = False
        self._cancel_timer()
        if self.tls is not None and self._face is None and not self._done:
            # the peer hung up mid-handshake: a board that did not trust this gateway
            self.guard.note(self._source, "tls_failed", "the peer closed the connection "
                            "during the TLS handshake (does it trust this gateway's "
                            "certificate?)")
        self._done = True
        self.raw = None
        face, self._face = self._face, None
        if face is not None:
            face.connection_lost(exc)

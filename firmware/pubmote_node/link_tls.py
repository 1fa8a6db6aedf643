# TLS on the WiFi TCP link (MicroPython's own tls module, mbedTLS): the board verifies the
# gateway before it sends anything, by the gateway's certificate installed as its one
# trusted CA (tls_ca, with the name in it: tls_name) or by the certificate's pinned SHA-256
# (tls_fingerprint). links.from_config imports this module, and this module the tls
# module, only for a config with "tls": a board without it loads none of it.
import asyncio

from pubmote_wire.compat import const

from .link_net import TcpLink

_HANDSHAKE_TIMEOUT_MS = const(20000)  # a Pico W verifies an ECDSA P-256 certificate in seconds

_said = [None]  # the last refusal printed: a board retrying every few seconds says it once


def _say(msg):
    if _said[0] != msg:
        _said[0] = msg
        print(msg)


def _why(e, timeout_ms):
    # mbedTLS says why verification failed in a ValueError's text; other faults are an
    # OSError with an errno (the network) or a (code, "MBEDTLS_ERR_...") pair
    if isinstance(e, asyncio.TimeoutError):
        return "no TLS handshake within %d ms (is the bridge's --tcp face TLS?)" % timeout_ms
    text = str(e.args[-1] if e.args else e).strip().replace("\n", " ")
    if isinstance(e, ValueError):
        return "gateway refused: its certificate did not verify (%s)" % text
    if isinstance(e, OSError) and isinstance(e.args[-1] if e.args else None, int):
        return "cannot connect (errno %s)" % text
    return "TLS failed (%s)" % text


class TlsLink(TcpLink):
    """TcpLink over TLS. open() connects, runs the handshake and checks the gateway within
    timeout_ms; any fault is an OSError (and one line on the console saying why)."""

    def __init__(self, host, port, ca=None, fingerprint=None, server_name=None,
                 timeout_ms=_HANDSHAKE_TIMEOUT_MS):
        super().__init__(host, port)
        if (ca is None) == (fingerprint is None):
            raise ValueError("tls: give the gateway's certificate (tls_ca) or its SHA-256 "
                             "(tls_fingerprint), one of the two")
        from binascii import unhexlify

        self._ca = unhexlify(ca) if ca is not None else None
        self._pin = unhexlify(fingerprint) if fingerprint is not None else None
        if self._pin is not None and len(self._pin) != 32:
            raise ValueError("tls_fingerprint: 64 hex digits (a SHA-256)")
        self._name = server_name or host
        self.timeout_ms = timeout_ms
        self._seen = None  # SHA-256 of the certificate the gateway showed (pinning)

    def _note_cert(self, cert, depth):
        # mbedTLS calls this for each certificate of the gateway's chain; depth 0 is the
        # gateway's own. The pin is checked once the handshake is over, before any data
        if depth == 0:
            from hashlib import sha256

            self._seen = sha256(cert).digest()
        return 0

    async def open(self):
        import tls

        ctx = tls.SSLContext(tls.PROTOCOL_TLS_CLIENT)
        if self._ca is not None:
            ctx.verify_mode = tls.CERT_REQUIRED
            ctx.load_verify_locations(self._ca)
        else:
            ctx.verify_mode = tls.CERT_OPTIONAL
            try:
                ctx.verify_callback = self._note_cert
            except AttributeError:
                why = "tls_fingerprint needs SSLContext.verify_callback (MicroPython 1.23+)"
                _say("pubmote: TLS link to %s:%d: %s: install tls_ca instead"
                     % (self.host, self.port, why))
                raise OSError(why) from None
        self._seen = None
        try:
            await asyncio.wait_for(self._handshake(ctx), self.timeout_ms / 1000)
        except Exception as e:  # noqa: BLE001 - a refused gateway is a link fault, not a bug
            self.close()
            why = _why(e, self.timeout_ms)
            _say("pubmote: TLS link to %s:%d: %s" % (self.host, self.port, why))
            raise OSError(why) from None
        if self._pin is not None and self._seen != self._pin:
            self.close()
            why = "gateway refused: its certificate is not the pinned one (tls_fingerprint)"
            _say("pubmote: TLS link to %s:%d: %s" % (self.host, self.port, why))
            raise OSError(why)
        _said[0] = None

    async def _handshake(self, ctx):
        self._r, self._w = await asyncio.open_connection(self.host, self.port, ssl=ctx,
                                                         server_hostname=self._name)
        # the handshake runs inside the first write; a lone frame delimiter is that write
        # (the bridge's deframer skips an empty frame): a gateway that fails tls_ca's
        # verification is sent nothing, one that fails the pin one byte of framing
        self._w.write(b"\x00")
        await self._w.drain()

    async def readinto(self, buf):
        while True:
            n = await self._r.readinto(buf)
            if n is not None:  # None: a TLS record that carried no data
                return n

# Byte links between a board and its bridge: pty (simulated board), UART, USB CDC (stdio), TCP, UDP.
# Every link has: await open(), await readinto(buf) -> n (0 = link gone), await write(mv),
# close(). Faults surface as OSError; the node owns reconnecting. Each kind is a module of
# its own (link_pty, link_uart, link_stdio, link_net): a board imports only the one it uses.


def from_config(cfg):
    """Build the link a board's config names: {"link": "pty"|"uart"|"stdio"|"tcp"|"udp", ...};
    a tcp link with "tls": 1 verifies the gateway by "tls_ca" (its certificate, DER in hex,
    and "tls_name", the name in it) or "tls_fingerprint" (its SHA-256 in hex).
    Each kind lives in its own module, imported here: a board loads only its link's code."""
    kind = cfg.get("link", "pty")
    if kind == "pty":
        from .link_pty import PtyLink

        return PtyLink(cfg["path"])
    if kind == "uart":
        from .link_uart import UartLink

        return UartLink(cfg.get("uart", 1), cfg.get("baud", 115200), cfg.get("tx"), cfg.get("rx"))
    if kind == "stdio":
        from .link_stdio import StdioLink

        return StdioLink()
    if kind == "tcp" and cfg.get("tls"):
        from .link_tls import TlsLink  # the tls module itself is imported when it opens

        return TlsLink(cfg["host"], cfg["port"], cfg.get("tls_ca"), cfg.get("tls_fingerprint"),
                       cfg.get("tls_name"), cfg.get("tls_timeout_ms", 20000))
    if kind == "tcp":
        from .link_net import TcpLink

        return TcpLink(cfg["host"], cfg["port"])
    if kind == "udp":
        if cfg.get("tls"):  # never fall back to clear text when the config asked for TLS
            raise ValueError("tls: the udp link is not encrypted (the bridge has no DTLS); "
                             "use the tcp link for TLS")
        from .link_net import UdpLink

        return UdpLink(cfg["host"], cfg["port"])
    raise ValueError("unknown link %r" % kind)

"""Helpers for the mesh unit tests: hosts on loopback and a hand-driven raw peer that can
break the rules on purpose."""

from __future__ import annotations

import asyncio
import struct

from pubmote.p2p import Host, KeyPair, Stream, multistream, noise, yamux
from pubmote.p2p.hostconfig import HostConfig
from pubmote.p2p.noise import NoiseSession
from pubmote.p2p.transport import RawConn, dial_tcp

HDR = struct.Struct(">BBHII")


def make_host(**cfg: object) -> Host:
    return Host(KeyPair.generate(), listen_addrs=["/ip4/127.0.0.1/tcp/0"],
                config=HostConfig(**cfg))  # type: ignore[arg-type]


def addr_of(h: Host) -> str:
    return str(h.listen_addrs[0].with_p2p(str(h.peer_id)))


async def echo_handler(st: Stream) -> None:
    while True:
        data = await st.read()
        if not data:
            break
        await st.write(data)
    await st.close()


async def sink_handler(st: Stream) -> None:
    """Counts what arrives until EOF, then answers the count (8 bytes, big-endian)."""
    total = 0
    while True:
        data = await st.read()
        if not data:
            break
        total += len(data)
    await st.write(total.to_bytes(8, "big"))
    await st.close()


async def raw_tcp(h: Host) -> RawConn:
    return await dial_tcp(h.listen_addrs[0])


async def raw_secured(h: Host) -> NoiseSession:
    """A Noise session to `h` with Yamux agreed, driven by hand (no Yamux session)."""
    raw = await raw_tcp(h)
    await multistream.select(raw, [noise.PROTOCOL_ID])
    sec = await noise.secure_outbound(raw, KeyPair.generate(), h.peer_id)
    await multistream.select(sec, [yamux.PROTOCOL_ID])
    return sec


def frame(typ: int, flags: int, sid: int, length: int, payload: bytes = b"") -> bytes:
    return HDR.pack(0, typ, flags, sid, length) + payload


async def read_frames_until_eof(sec: NoiseSession, timeout_s: float = 5.0) -> list[tuple[int, int, int, int]]:
    """Collect (type, flags, stream id, length) of every frame until the host hangs up."""
    frames = []
    buf = b""

    async def go() -> None:
        nonlocal buf
        while True:
            try:
                buf += await sec.read_frame()
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            while len(buf) >= 12:
                _v, t, f, sid, ln = HDR.unpack_from(buf)
                size = 12 + (ln if t == 0 else 0)
                if len(buf) < size:
                    break
                frames.append((t, f, sid, ln))
                buf = buf[size:]

    await asyncio.wait_for(go(), timeout_s)
    return frames

"""pubmote: the gateway side of pubmote (CPython, asyncio), command `pubmote`.

The folders are the layers (docs/architecture.md): `cli` assembles `gateway`, which
assembles `core` (hub, forwarder, journal), `faces`, `p2p` and `dht`; `boards` holds the
board profiles, firmware build, flash, deploy and the simulated boards."""

__version__ = "0.1.0"

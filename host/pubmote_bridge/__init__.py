"""pubmote_bridge: the gateway side of pubmote (CPython, asyncio), command `pubmote`."""

__version__ = "0.1.0"

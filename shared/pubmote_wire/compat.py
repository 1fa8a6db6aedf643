# Tiny shims so one source runs on CPython and MicroPython: const, sha256 and urandom (in
# one module: each module is heap on a board).
try:
    from micropython import const
except ImportError:  # CPython

    def const(x):
        return x


try:
    import hashlib

    sha256 = hashlib.sha256
except ImportError:  # pragma: no cover - every supported runtime has it
    sha256 = None


# Random bytes on every runtime: os.urandom where the port has it, else random.
try:
    from os import urandom
except ImportError:  # MicroPython ports without os.urandom (the WebAssembly build)
    from random import getrandbits

    def urandom(n):
        return bytes(getrandbits(8) for _ in range(n))

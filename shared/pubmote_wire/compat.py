# Tiny shims so one source runs on CPython and MicroPython.
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


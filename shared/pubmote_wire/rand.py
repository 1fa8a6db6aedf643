# Random bytes on every runtime: os.urandom where the port has it, else random.
try:
    from os import urandom
except ImportError:  # MicroPython ports without os.urandom (the WebAssembly build)
    from random import getrandbits

    def urandom(n):
        return bytes(getrandbits(8) for _ in range(n))

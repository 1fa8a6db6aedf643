# pubmote_node: the board side of pubmote (MicroPython; also runs on CPython for tests).
__version__ = "0.1.0"

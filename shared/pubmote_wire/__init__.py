# pubmote_wire: the wire codec shared by the board firmware and the host bridge.
# Runs unchanged on CPython 3.11+ and MicroPython; import the submodule you need
# (tlv, name, interest, data, lp, notify, sp, framing, cbor) so a board loads only that.
__version__ = "0.1.0"

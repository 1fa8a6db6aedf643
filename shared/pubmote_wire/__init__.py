# pubmote_wire: the wire codec shared by the board firmware and the host bridge.
# Runs unchanged on CPython 3.11+ and MicroPython; import the submodule you need
# (tlv, name, interest, data, lp, notify, sp, framing, cbor, control) so a board loads only
# that. No __version__ here (pyproject.toml has pubmote's): on a board each name in this
# package's namespace is heap, and its submodules fill it to a table size's edge.

# Error types of the codec: one hierarchy, so callers catch a single class. (The signal
# "need more bytes" of the one incremental decoder, SP-TCP's, is sp.NeedMore: on a board each
# class is ~130 B of heap, and no board decodes SP-TCP.)


class DecodeError(ValueError):
    """Malformed input: the bytes can never form a valid element."""


class EncodeError(ValueError):
    """A value cannot be encoded (too large, wrong type, buffer too small)."""

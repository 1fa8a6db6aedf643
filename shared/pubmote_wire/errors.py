# Error types of the codec: one hierarchy, so callers catch a single class.


class DecodeError(ValueError):
    """Malformed input: the bytes can never form a valid element."""


class NeedMore(Exception):
    """Incremental decoders raise this when the bytes so far are a valid but
    incomplete prefix; feed more and try again. Not a DecodeError."""


class EncodeError(ValueError):
    """A value cannot be encoded (too large, wrong type, buffer too small)."""

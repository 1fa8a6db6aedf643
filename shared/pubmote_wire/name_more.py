# The rest of name.py's API, loaded at its first use through name's module __getattr__
# (name.segment(3), `from pubmote_wire.name import segment`): what a board's node never
# calls, so that a board does not hold these functions' objects in its heap.
from .errors import DecodeError
from .namewire import component, number_component, walk


def keyword(b):
    return component(0x20, b)


def segment(n):
    return number_component(0x32, n)


def byte_offset(n):
    return number_component(0x34, n)


def version(n):
    return number_component(0x36, n)


def timestamp(n):
    return number_component(0x38, n)


def sequence(n):
    return number_component(0x3A, n)


def _digest(typ, d):
    if len(d) != 32:
        from .errors import EncodeError

        raise EncodeError("bad digest")
    return bytes((typ, 32)) + bytes(d)


def params_digest(d):
    return _digest(2, d)


def implicit_digest(d):
    return _digest(1, d)


# Raise DecodeError unless name (a bytes-like TLV-VALUE) is a well-formed Name.
def validate(name):
    try:
        walk(name, 0, len(name), False)
    except (IndexError, TypeError):
        raise DecodeError("bad name component") from None


# Bytes of the whole Name TLV.
def size(name):
    from .tlv import varnum_size

    return 1 + varnum_size(len(name)) + len(name)


# Write the Name TLV at buf[off]; return the bytes written.
def write(buf, off, name):
    from .tlv import write_varnum

    n = len(name)
    buf[off] = 7
    h = 1 + write_varnum(buf, off + 1, n)
    buf[off + h : off + h + n] = name
    return h + n

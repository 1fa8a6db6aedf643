"""NFD management, as much as NDN applications need of it: `/localhost/nfd/rib/register`
and `unregister` commands (old signed-command names and v0.3 signed Interests alike: both
carry the ControlParameters as the fifth name component), answered with a ControlResponse.
Sans-IO: the hub acts on the parsed commands."""

from __future__ import annotations

from typing import Any

from pubmote_wire import name as ndn_name
from pubmote_wire import tlv
from pubmote_wire.errors import DecodeError

RIB_REGISTER = ndn_name.from_uri("/localhost/nfd/rib/register")
RIB_UNREGISTER = ndn_name.from_uri("/localhost/nfd/rib/unregister")
LOCALHOST = ndn_name.from_uri("/localhost")

# ControlParameters (NFD management protocol)
NAME = 0x07
CONTROL_PARAMETERS = 0x68
CONTROL_RESPONSE = 0x65
STATUS_CODE = 0x66
STATUS_TEXT = 0x67
FACE_ID = 0x69
COST = 0x6A
FLAGS = 0x6C
ORIGIN = 0x6F
EXPIRATION = 0x6D
ORIGIN_APP = 0
ROUTE_FLAG_CHILD_INHERIT = 1


def parse_control_parameters(value: bytes) -> dict[str, Any]:
    """The fields of a ControlParameters TLV (the whole element) we act on."""
    typ, vs, ve = tlv.read_tlv(value)
    if typ != CONTROL_PARAMETERS:
        raise DecodeError("not ControlParameters")
    out: dict[str, Any] = {}
    r = tlv.TLVReader(value, vs, ve)
    while r.next():
        if r.typ == NAME:
            nm = bytes(r.value())
            ndn_name.validate(nm)
            out["name"] = nm
        elif r.typ in (FACE_ID, COST, FLAGS, ORIGIN, EXPIRATION):
            out[{FACE_ID: "face_id", COST: "cost", FLAGS: "flags", ORIGIN: "origin",
                 EXPIRATION: "expiration"}[r.typ]] = r.nonneg()
    if "name" not in out:
        raise DecodeError("ControlParameters without a Name")
    return out


def control_response(code: int, text: str, params: dict[str, Any] | None) -> bytes:
    """A ControlResponse with StatusCode, StatusText and the ControlParameters body."""
    body = b""
    if params is not None:
        nm = params["name"]
        inner = bytearray(len(nm) + 64)
        n = tlv.write_tl(inner, 0, NAME, len(nm))
        inner[n:n + len(nm)] = nm
        n += len(nm)
        n += tlv.write_nonneg_tlv(inner, n, FACE_ID, params.get("face_id", 0))
        n += tlv.write_nonneg_tlv(inner, n, ORIGIN, params.get("origin", ORIGIN_APP))
        n += tlv.write_nonneg_tlv(inner, n, COST, params.get("cost", 0))
        n += tlv.write_nonneg_tlv(inner, n, FLAGS, params.get("flags", ROUTE_FLAG_CHILD_INHERIT))
        body = _tlv(CONTROL_PARAMETERS, bytes(inner[:n]))
    text_b = text.encode()
    return _tlv(CONTROL_RESPONSE, _nonneg(STATUS_CODE, code) + _tlv(STATUS_TEXT, text_b) + body)


def _tlv(typ: int, value: bytes) -> bytes:
    buf = bytearray(tlv.tl_size(typ, len(value)))
    tlv.write_tlv(buf, 0, typ, value)
    return bytes(buf)


def _nonneg(typ: int, v: int) -> bytes:
    buf = bytearray(tlv.nonneg_tlv_size(typ, v))
    tlv.write_nonneg_tlv(buf, 0, typ, v)
    return bytes(buf)


def command_parameters(interest_name: bytes) -> dict[str, Any]:
    """ControlParameters of a rib command Interest: the fifth component, in both forms."""
    comps = ndn_name.components(interest_name)
    if len(comps) < 5:
        raise DecodeError("rib command without ControlParameters")
    _, value = ndn_name.component_type_value(comps[4])
    return parse_control_parameters(bytes(value))

# Types of pubmote_wire.cbor for the host's type checks: any CBOR value in, out.
from typing import Any

from pubmote_wire._types import Buf

def dumps(obj: Any) -> bytes: ...
def loads(data: Buf) -> Any: ...

"""Old import path of the bridge, kept only for tests/pipeline/test_bridge_run.py until the
pipeline moves into pubmote (then: `from pubmote.gateway.bridge import ...` and
`bridge.add_serial(...)`; this file goes)."""

from typing import Any

from pubmote.core.addresses import DEFAULT_BAUD
from pubmote.gateway.bridge import Bridge as _Bridge
from pubmote.gateway.bridge import load_config

__all__ = ["DEFAULT_BAUD", "Bridge", "load_config"]


class Bridge(_Bridge):
    def _add_serial(self, port: str, baud: int, quiet_s: float = 0.0) -> Any:
        return self.add_serial(port, baud, quiet_s)

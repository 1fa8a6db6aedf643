"""Old import path of the bridge, kept only for tests/pipeline/test_bridge_run.py until the
pipeline moves into pubmote (then: `from pubmote.gateway.bridge import ...`)."""

from pubmote.gateway.bridge import DEFAULT_BAUD, Bridge, load_config

__all__ = ["DEFAULT_BAUD", "Bridge", "load_config"]

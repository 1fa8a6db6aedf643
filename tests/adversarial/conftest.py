"""The adversarial suite (attacks and faults on a running bridge) uses the host tests'
helpers (e2e: ports, bridges with simulated boards, SP clients)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "host"))

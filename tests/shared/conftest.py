# pytest runs the shared tests on CPython; the runner module and the codec must import.
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "..", "shared"))

# Types the codec's stub files share (stubs only: the codec itself carries no annotations,
# which MicroPython could not run).
from typing import TypeAlias

Buf: TypeAlias = bytes | bytearray | memoryview
WBuf: TypeAlias = bytearray | memoryview

# The firmware's frozen main.py (`pubmote firmware build`). MicroPython runs a frozen main.py
# in preference to the filesystem's, so this one hands over: a /main.py on the filesystem
# runs as it would without pubmote frozen in; else, with a /pubmote_config.json, pubmote's
# app starts; else the board stays at its REPL (a board with an empty filesystem boots).
import os
import sys

# The rp2 port's _boot.py runs in these globals and leaves its `rp2` import behind: a Python
# module (the PIO assembler) holding ~1.4 kB of heap, for rp2.Flash alone. Let it go; an app
# that uses rp2 imports it again.
if "rp2" in globals():
    del rp2  # noqa: F821 - defined by the port's _boot.py
    sys.modules.pop("rp2", None)


def _exists(path):
    try:
        os.stat(path)
        return True
    except OSError:
        return False


if _exists("/main.py"):
    # compiled first, so that the source text is garbage before the script runs; the file
    # object goes too (its littlefs cache is ~1.1 kB of heap)
    with open("/main.py") as _f:
        _code = compile(_f.read(), "/main.py", "exec")
    del _f, _exists
    exec(_code, {"__name__": "__main__"})
elif _exists("/pubmote_config.json"):
    del _exists
    from pubmote_node import boot

    boot.run()
else:
    print("pubmote: no /pubmote_config.json; the REPL is yours (`pubmote deploy` writes one)")

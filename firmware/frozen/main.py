# The firmware's frozen main.py (`pubmote firmware build`). MicroPython runs a frozen main.py
# in preference to the filesystem's, so this one hands over: a /main.py on the filesystem
# runs as it would without pubmote frozen in; else, with a /pubmote_config.json, pubmote's
# app starts; else the board stays at its REPL (a board with an empty filesystem boots).
import os


def _exists(path):
    try:
        os.stat(path)
        return True
    except OSError:
        return False


if _exists("/main.py"):
    # compiled first, so that the source text is garbage before the script runs
    with open("/main.py") as _f:
        _code = compile(_f.read(), "/main.py", "exec")
    exec(_code, {"__name__": "__main__"})
elif _exists("/pubmote_config.json"):
    from pubmote_node import boot

    boot.run()
else:
    print("pubmote: no /pubmote_config.json; the REPL is yours (`pubmote deploy` writes one)")

# pubmote_node: the board side of pubmote (MicroPython; also runs on CPython for tests).
__version__ = "0.1.0"


def forget(module):
    """Let go of a module loaded for one job (the link's chooser, lp for a Nack): while it
    is in sys.modules and its package, its globals and classes hold heap for good (a frozen
    module's code stays in flash; importing it again makes them anew)."""
    import sys

    sys.modules.pop(module, None)
    i = module.rfind(".")
    parent = sys.modules.get(module[:i]) if i > 0 else None
    leaf = module[i + 1 :]
    if parent is not None and hasattr(parent, leaf):
        delattr(parent, leaf)

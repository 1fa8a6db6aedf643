# The runner that lets one test file run under pytest, the MicroPython unix port and the
# 32-bit MicroPython: call main(globals()) at the bottom of a test file. Prints one line
# per failure and a machine-readable summary line that tests/run_shared.py counts.
import gc
import sys


def _runtime():
    impl = sys.implementation.name
    if sys.platform == "rp2":  # the real RP2040 port (an emulated Pico in make test)
        return "rp2040"
    if impl == "micropython":
        bits = 64 if sys.maxsize > 0x7FFFFFFF else 32
        return "micropython-%dbit" % bits
    return impl


def _report(name, exc):
    print("FAIL %s: %s" % (name, type(exc).__name__))
    if hasattr(sys, "print_exception"):
        sys.print_exception(exc)
    else:  # CPython
        import traceback

        traceback.print_exception(exc)


def main(namespace, module_name="?"):
    passed = 0
    failed = 0
    names = sorted(k for k in namespace if k.startswith("test_"))
    for name in names:
        fn = namespace[name]
        if not callable(fn):
            continue
        # each test starts on a collected heap, so what an earlier test left for the
        # collector cannot decide whether this one finds room (the unix port's 64k heap)
        gc.collect()
        try:
            fn()
            passed += 1
        except Exception as e:  # noqa: BLE001 - a test runner reports every failure
            failed += 1
            _report(name, e)
    print("RESULT %s %s passed=%d failed=%d" % (_runtime(), module_name, passed, failed))
    return failed


def raises(exc_type, fn, *args):
    """Assert that fn(*args) raises exc_type (a portable pytest.raises)."""
    try:
        fn(*args)
    except exc_type:
        return True
    except Exception as e:  # noqa: BLE001
        raise AssertionError("expected %s, got %s" % (exc_type.__name__, type(e).__name__)) from None
    raise AssertionError("expected %s, nothing raised" % exc_type.__name__)


def unhex(s):
    import binascii

    return binascii.unhexlify(s.replace(" ", ""))


def hexs(b):
    import binascii

    return binascii.hexlify(bytes(b)).decode()

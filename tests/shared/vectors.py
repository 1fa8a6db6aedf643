# The captured peer bytes (tests/vectors/*.json, from ../shared/vectors) for every suite.
# Runs on CPython and MicroPython: paths are built by hand, there is no os.path there.
import json


def _dir():
    here = __file__.replace("\\", "/")
    cut = here.rfind("/")
    base = here[:cut] if cut >= 0 else "."
    return base + "/../vectors/"


def load(name):
    with open(_dir() + name) as f:
        return json.load(f)


def ndn_notify():
    """{label: bytes} of the ndn-python-repo PubSub capture."""
    import binascii

    out = {}
    for p in load("ndn_notify.json")["packets"]:
        out[p["label"]] = binascii.unhexlify(p["hex"])
    return out


def sp_tcp():
    return load("sp_tcp.json")

# The board's updater: fetch the update the bridge offers (its manifest, signed with this
# board's key, then the files as NDN Data segments, each checked), write them to the staging
# folder apps/<v>.tmp, check the whole against the manifest's SHA-256, then switch: the
# folder renamed to apps/<v>, the pointer file renamed over (appslot.py), and a reboot into
# the new app on trial. A power cut at any moment leaves the old pointer (the old app) or
# the new one naming a whole folder. Imported at the bridge's call, let go when it fails.
import asyncio
import json
import os

from pubmote_wire import name
from pubmote_wire.compat import const

from . import appslot, upreport
from .clock import ticks_diff, ticks_ms
from .face import Event

_TRIES = const(8)  # fetches of one packet before the update is given up
_WINDOW = const(4)  # segments in flight at once
_AHEAD = const(8)  # segments from the oldest one missing to the newest asked for
_SEG_TIMEOUT_MS = const(4000)
# segments between heap samples: each collects the heap first (14 ms on a Pico, while its
# link's bytes wait)
_SAMPLE_EVERY = const(8)
# segments written between commits of the file being written (what a resume keeps after a
# power cut); on littlefs the next append after a commit copies the file's last block to a
# fresh one (an erase: 45 ms on a Pico, the link waiting), so not often
_FLUSH_EVERY = const(16)
_running = []
_heap = [0, 0]  # heap allocated before the updater was loaded, and the most seen since


def start(node, trigger, base=0):
    """The bridge's trigger /pubmote/ctl/update/<v> arrived: run the update (once). base:
    the heap allocated before this module was loaded."""
    if _running:
        return
    _heap[0] = _heap[1] = base
    comp = name.components(trigger)[-1]
    ver = bytes(name.component_type_value(comp)[1]).decode()
    _running.append(asyncio.create_task(_run(node, ver)))


def _sample():
    # the heap the updater holds, live (collected first: a window of segments, the writer,
    # the hash), every few segments
    import gc

    if hasattr(gc, "mem_alloc"):
        gc.collect()
        _heap[1] = max(_heap[1], gc.mem_alloc())


async def _run(node, ver):
    try:
        await _update(node, ver)
    except Exception as e:  # noqa: BLE001 - the bridge hears why; the old app runs on
        await upreport.send(node, ver, "failed", "%s: %s" % (type(e).__name__, e), 3)
    _running.clear()
    from . import forget

    for m in ("pubmote_node.updater", "pubmote_node.upreport", "pubmote_node.appslot"):
        forget(m)


async def _update(node, ver):
    key = node._key  # noqa: SLF001 - the board's key, kept by its node
    if key is None:
        raise ValueError("board has no key: the manifest cannot be checked")
    appslot.use(node.config)
    ptr = appslot.read() or {"cur": "", "prev": ""}
    if ver in (ptr.get("cur"), ptr.get("prev")):
        # this very update, installed already: called again because its "staged" word was
        # lost (its trial reports how it went) or it was rolled back (said at that boot)
        return
    p = await upreport.fetch(node, upreport.update_name(node, ver, "m"), _TRIES)
    if p is None:
        raise OSError("manifest not fetched")
    from pubmote_wire.data import verify_data

    d, pkt = p[1], p[2]
    if not verify_data(d, pkt, key):
        raise ValueError("manifest signature does not verify")
    man = json.loads(bytes(d.content))
    if man["v"] != ver:
        raise ValueError("manifest is for another update")
    for fname, _ in man["files"]:
        if "/" in fname or fname in ("", ".", ".."):
            raise ValueError("bad file name in the manifest")
    stage = appslot.path("apps/") + ver + ".tmp"
    _clean(ptr, ver + ".tmp")
    from pubmote_wire.compat import sha256

    h = sha256()
    out = _Writer(stage, man["files"])
    # a transfer cut short (a reset, a power cut) goes on after the bytes it left
    off = out.resume(h)
    ms = await _fetch(node, ver, man, off, h, out)
    out.close()
    from binascii import hexlify

    if hexlify(h.digest()).decode() != man["sha"]:
        _rmtree(stage)  # not kept for a resume: the next try starts afresh
        raise ValueError("update does not match its manifest's SHA-256")
    with open(stage + "/config.json", "w") as f:
        json.dump(man.get("config", {}), f)
    folder = appslot.path("apps/") + ver
    _rmtree(folder)
    os.rename(stage, folder)
    appslot.write({"cur": ver, "prev": ptr.get("cur", ""),
                   "trial": {"v": ver, "timeout_s": man.get("timeout_s", 60),
                             "grace_s": man.get("grace_s", 5), "booted": 0}})
    _sample()
    # the updater's heap, above what the board held before it was loaded, and the transfer
    # on the board's clock, to the bridge
    await upreport.send(node, ver, "staged", "heap +%d B; %d B in %d ms" % (
        _heap[1] - _heap[0], man["size"] - off, ms), 2)
    appslot.reboot()


async def _fetch(node, ver, man, off, h, out):
    # A sliding window: the next segment's Interest leaves as soon as one is taken, so the
    # link stays busy while the board checks and writes (a batch of 4 left it idle for the
    # round trip and the writes: 0.43 of a UART's rate). Data come back in the order they
    # were asked for (one link, the bridge answers in turn), so a segment asked for after
    # one still missing, and come, says the missing one was lost on the line (a UART with
    # no flow control overruns while the flash erases, interrupts off): it is asked again
    # at once rather than after its 4 s. Returns the transfer's time in ms on the board's
    # clock: from the first segment's Interest to the last segment written.
    n, seg, size = man["n"], man["seg"], man["size"]
    t0 = ticks_ms()
    ev = Event()
    slots = {}  # segment -> [Data or None, done, order asked, tries, given up, task]
    order = [0]

    def ask(i):
        s = slots.get(i)
        if s is None:
            s = slots[i] = [None, False, 0, 0, False, None]
        if s[3] >= _TRIES:
            raise OSError("segment %d not fetched whole" % i)
        order[0] += 1
        s[1], s[2], s[3], s[4] = False, order[0], s[3] + 1, False
        s[5] = asyncio.create_task(_ask(node, upreport.update_name(node, ver, "s", i), s, ev))

    nxt = off // seg
    try:
        for i in range(off // seg, n):
            while True:
                # past a lost segment the window goes on (its followers held until it
                # comes), at most _AHEAD segments from the oldest one missing
                while nxt < n and nxt - i < _AHEAD and _asking(slots) < _WINDOW:
                    ask(nxt)
                    nxt += 1
                s = slots[i]
                if s[0] is not None:
                    break
                if s[1]:  # timed out, Nacked, or its digest wrong: again
                    ask(i)
                elif not s[4] and _overtaken(slots, i, nxt, s[2]):
                    s[4] = True
                    _give_up(node, upreport.update_name(node, ver, "s", i))
                ev.clear()
                await ev.wait()
            d = slots.pop(i)[0]
            want = min(seg, size - i * seg)
            if d.content is None or len(d.content) != want:
                raise OSError("segment %d not fetched whole" % i)
            c = memoryview(bytes(d.content))
            d = None
            if i * seg < off:
                c = c[off - i * seg :]
            h.update(c)
            out.write(c)
            if not (i + 1) % _SAMPLE_EVERY:
                _sample()
    finally:
        for s in slots.values():  # what a failure left in flight
            if not s[1]:
                s[5].cancel()
    return ticks_diff(ticks_ms(), t0)


def _asking(slots):
    # Interests in flight
    k = 0
    for s in slots.values():
        if not s[1]:
            k += 1
    return k


def _overtaken(slots, i, nxt, asked):
    # whether a segment asked for after segment i's last Interest has come
    for j in range(i + 1, nxt):
        s = slots.get(j)
        if s is not None and s[0] is not None and s[2] > asked:
            return True
    return False


def _give_up(node, nm):
    # end the wait of the Interest for nm now, as a Nack would (its Data was lost)
    p = node.exchange.pending.get(nm)
    if p is not None:
        p[0].set()


async def _ask(node, nm, s, ev):
    # one Interest for a segment; s[0] its Data if it came whole (its DigestSha256), s[1]
    # set when it is over either way. The window's last segment waits behind the others on
    # a slow link (4 x 0.9 kB: 0.3 s at 115200 baud, more while the board writes its flash)
    from pubmote_wire import interest_core as interest
    from pubmote_wire.data import verify_data

    ex = node.exchange
    ms = max(node.timeout_ms, _SEG_TIMEOUT_MS)
    p = await ex.express(ex.encode(interest.encode_parts, nm, nonce=-1, lifetime_ms=ms), ms,
                         keep=True)
    if p is not None and verify_data(p[1], p[2]):
        s[0] = p[1]
    elif not s[4]:
        await asyncio.sleep(0.2)  # not given up: the link down, or a Nack; not at once
    s[1] = True
    ev.set()



class _Writer:
    """The update's bytes, in order, cut into its files in the staging folder."""

    def __init__(self, folder, files):
        self._folder = folder
        self._files = files
        self._k = 0
        self._left = 0
        self._f = None
        self._writes = 0

    def resume(self, h):
        """Take the staging folder as a cut-short transfer left it: the whole files and the
        start of the next one are kept (hashed into h), what follows is removed. Returns
        the offset in the update where the transfer goes on."""
        try:
            os.mkdir(self._folder)
        except OSError:
            pass
        files = self._files
        off = k = 0
        have = 0
        while k < len(files):
            size = files[k][1]
            have = _hash_file(self._path(k), size, h)
            off += have
            if have < size:
                break
            k += 1
        for j in range(k + 1, len(files)):
            try:
                os.remove(self._path(j))
            except OSError:
                pass
        self._k = k
        self._open(have)
        return off

    def _path(self, k):
        return self._folder + "/" + self._files[k][0]

    def _open(self, have):
        # file k, appended to after its first `have` bytes; empty files made on the way
        while self._k < len(self._files):
            size = self._files[self._k][1]
            # closed by write() once the file is whole, or by close()
            self._f = open(self._path(self._k), "ab" if have else "wb")  # noqa: SIM115
            self._left = size - have
            if self._left:
                return
            self._f.close()
            self._f = None
            self._k += 1
            have = 0

    def write(self, b):
        mv = memoryview(b)
        while len(mv):
            if self._f is None:
                raise ValueError("more bytes than the manifest's files")
            k = min(self._left, len(mv))
            self._f.write(mv[:k])
            mv = mv[k:]
            self._left -= k
            if not self._left:
                self._f.close()
                self._f = None
                self._k += 1
                self._open(0)
        self._writes += 1
        if self._f is not None and not self._writes % _FLUSH_EVERY:
            self._f.flush()  # on littlefs a commit: what a resume after a power cut keeps

    def close(self):
        if self._f is not None:
            self._f.close()
            raise ValueError("fewer bytes than the manifest's files")


def _hash_file(path, size, h):
    # the bytes of a file a cut-short transfer left (at most size; a longer file goes)
    try:
        have = os.stat(path)[6]
    except OSError:
        return 0
    if have > size:
        os.remove(path)
        return 0
    buf = bytearray(256)
    mv = memoryview(buf)
    with open(path, "rb") as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            h.update(mv[:n])
    return have


def _clean(ptr, stage):
    # what earlier updates left: every app folder but the current and the previous one,
    # and this update's staging folder (a transfer cut short goes on from it)
    try:
        names = os.listdir(appslot.path("apps"))
    except OSError:
        os.mkdir(appslot.path("apps"))
        names = []
    keep = (ptr.get("cur"), ptr.get("prev"), stage)
    for n in names:
        if n not in keep:
            _rmtree(appslot.path("apps/") + n)


def _rmtree(folder):
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for n in names:
        os.remove(folder + "/" + n)
    os.rmdir(folder)

# Start the configured app: read the board's config and run it. firmware/main.py (deployed)
# and the firmware's frozen main.py both end here.
import asyncio
import json
import os


def load_config():
    """The board's config: PUBMOTE_CONFIG (unix port), /pubmote_config.json, or
    ./pubmote_config.json. OSError when there is none."""
    path = None
    try:
        path = os.getenv("PUBMOTE_CONFIG")
    except AttributeError:  # boards have no environment
        pass
    for p in (path, "/pubmote_config.json", "pubmote_config.json"):
        if not p:
            continue
        try:
            with open(p) as f:
                return json.load(f)
        except OSError:
            continue
    raise OSError("no pubmote_config.json: deploy the board with `pubmote deploy`")


def run(cfg=None):
    """Run the app the config names (demo by default) until it ends; on a board that has
    been updated, the app its pointer file names (appslot.py), on trial after an update."""
    from pubmote_node.node import Node

    if cfg is None:
        cfg = load_config()
    _small_fs_caches(cfg)
    ptr = None
    root = cfg.get("flash_dir", "")
    if _exists(root + ("/" if root and root[-1] != "/" else "") + "app.ptr"):
        from pubmote_node import appslot

        appslot.use(cfg)
        ptr = appslot.choose()
        cfg = appslot.apply(ptr, cfg)
    if cfg.get("link") == "stdio":
        # USB CDC is both the REPL and the link: a moment for mpremote's Ctrl-C first
        import time

        print("pubmote: starting on the USB link in 2 s (Ctrl-C for the REPL)")
        time.sleep(2)
    node = Node(cfg)
    trial = ptr is not None and "trial" in ptr
    try:
        asyncio.run(_main(node, cfg, ptr))
    except Exception as e:
        if trial:  # noted for the rollback's report, then the board restarts (rolls back)
            from pubmote_node import appslot

            _print_exception(e)
            appslot.note_error("%s: %s" % (type(e).__name__, e))
            appslot.reboot()
        raise


async def _main(node, cfg, ptr):
    tasks = []  # held while the app runs
    if ptr is not None:
        from pubmote_node import trial

        if "trial" in ptr:
            tasks.append(trial.start(node, ptr))
        elif ptr.get("report"):
            tasks.append(asyncio.create_task(trial.send_pending(node)))
    app = cfg.get("app", "demo")
    if app == "demo":
        from pubmote_node import demo

        await demo.main(node, cfg.get("period_ms", 1000))
    else:
        mod = __import__(app)
        await mod.main(node)


def _small_fs_caches(cfg):
    # rp2: the filesystem remounted with littlefs's small caches (-1.3 kB of heap), unless
    # the durable outbox keeps its log there (flashfs.py says why)
    import sys

    if sys.platform != "rp2" or cfg.get("outbox_dir"):
        return
    from pubmote_node import flashfs, forget

    flashfs.remount()
    forget("pubmote_node.flashfs")  # its class lives on in the mount's block device


def _exists(path):
    try:
        os.stat(path)
        return True
    except OSError:
        return False


def _print_exception(e):
    import sys

    if hasattr(sys, "print_exception"):
        sys.print_exception(e)
    else:  # CPython
        import traceback

        traceback.print_exception(e)

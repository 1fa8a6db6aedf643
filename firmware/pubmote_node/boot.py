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
    """Run the app the config names (demo by default) until it ends."""
    from pubmote_node.node import Node

    if cfg is None:
        cfg = load_config()
    if cfg.get("link") == "stdio":
        # USB CDC is both the REPL and the link: a moment for mpremote's Ctrl-C first
        import time

        print("pubmote: starting on the USB link in 2 s (Ctrl-C for the REPL)")
        time.sleep(2)
    node = Node(cfg)
    app = cfg.get("app", "demo")
    if app == "demo":
        from pubmote_node import demo

        asyncio.run(demo.main(node, cfg.get("period_ms", 1000)))
    else:
        mod = __import__(app)
        asyncio.run(mod.main(node))

# Board entry point: read the board's config and start the configured app.
# The config is /pubmote_config.json on a board (written by `pubmote deploy`), or the file
# named by PUBMOTE_CONFIG; on the unix port a deployed board's files sit in its cwd.
import asyncio
import json
import os
import sys

# deployed modules live in /lib on a board and in ./lib on the simulated board
if "lib" not in sys.path:
    sys.path.append("lib")


def load_config():
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


def run():
    from pubmote_node.node import Node

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


run()

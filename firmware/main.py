# Board entry point: read the board's config and start the configured app.
# On a board the config is /pubmote_config.json (written by `pubmote deploy`); the
# simulated board passes its path in PUBMOTE_CONFIG.
import asyncio
import json
import os


def load_config():
    path = None
    try:
        path = os.getenv("PUBMOTE_CONFIG")
    except AttributeError:
        pass
    with open(path or "/pubmote_config.json") as f:
        return json.load(f)


def run():
    from pubmote_node.node import Node

    cfg = load_config()
    node = Node(cfg)
    app = cfg.get("app", "demo")
    if app == "demo":
        from pubmote_node import demo

        asyncio.run(demo.main(node, cfg.get("period_ms", 1000)))
    else:
        mod = __import__(app)
        asyncio.run(mod.main(node))


run()

"""The BitTorrent DHT for pubmote: bencode, KRPC, BEP 5 routing, BEP 44 mutable items,
an asyncio UDP node and BEP 50 topic overlays. How pubmote uses them for retained
topics: docs/protocols/dht-retained.md."""

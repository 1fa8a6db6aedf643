# An app for the update tests that hangs: it imports and runs, but never brings the node up
# (never registers), so the board must roll back when --timeout passes.
import asyncio


async def main(node):
    while True:
        await asyncio.sleep(1)

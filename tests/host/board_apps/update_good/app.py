# An app for the update tests (pubmote update --app): registers, and publishes its version
# (config "version", default "good") on /test/<board>/version every second.
import asyncio


async def main(node):
    tasks = [asyncio.create_task(node.run())]  # held for the app's life
    version = node.config.get("version", "good")
    while tasks:
        await node.publish("/test/%s/version" % node.name, version, wait=False)
        await asyncio.sleep(1)

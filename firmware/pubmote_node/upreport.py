# Tell the bridge how an update went: an Interest /pubmote/update/<board>/<v>/r/<state>/<why>
# that the bridge answers with a Data (state: staged, healthy, rolledback, failed; why: the
# board's last error line). Loaded only to send one.
import asyncio

from pubmote_wire import interest_core as interest
from pubmote_wire import name


def update_name(node, ver, *parts):
    """/pubmote/update/<board>/<ver>/<parts...> as a Name's TLV-VALUE: an int part is a
    segment number component, a str or bytes part a generic one."""
    nm = name.from_uri("/pubmote/update") + name.generic(node.name) + name.generic(ver)
    for p in parts:
        nm += name.segment(p) if isinstance(p, int) else name.generic(p)
    return nm


async def fetch(node, nm, tries, timeout_ms=0):
    """Express an Interest for nm until its Data comes, at most tries times, each waited
    for timeout_ms (default: the node's): [Event, Data, packet], or None."""
    ex = node.exchange
    timeout_ms = timeout_ms or node.timeout_ms
    for _ in range(tries):
        n = ex.encode(interest.encode_parts, nm, nonce=-1, lifetime_ms=timeout_ms)
        p = await ex.express(n, timeout_ms, keep=True)
        if p is not None:
            return p
        await asyncio.sleep(0.2)
    return None


async def send(node, ver, state, why="", tries=30):
    """Send a report once the board is registered; True once the bridge has it."""
    for _ in range(tries * 5):
        if node.connected:
            break
        await asyncio.sleep(0.2)
    why = why.encode()[:200] if isinstance(why, str) else why[:200]
    nm = update_name(node, ver, "r", state, why or b"-")
    return await fetch(node, nm, tries) is not None

"""python-ndn express_interest: fetch NAME through the bridge; print the content."""

from __future__ import annotations

import sys

from ndn.app import NDNApp
from ndn.encoding import Name
from ndn.types import InterestNack

from common import run


async def main(app: NDNApp) -> int:
    for name in sys.argv[1:]:
        try:
            data_name, _, content = await app.express_interest(
                Name.from_str(name), must_be_fresh=True, can_be_prefix=False, lifetime=4000)
            print("DATA %s %s" % (Name.to_str(data_name), bytes(content or b"").decode()),
                  flush=True)
        except InterestNack as e:
            print("NACK %s %s" % (name, e.reason), flush=True)
    return 0


run(main)

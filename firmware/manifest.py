# Frozen-module manifest for `pubmote firmware build`: the port's own modules (asyncio,
# _boot.py that mounts the filesystem) plus pubmote, compiled into the firmware so a board
# boots with pubmote and nothing on its filesystem. Relative paths are to this file.
include("$(PORT_DIR)/boards/manifest.py")
package("pubmote_wire", base_path="../shared")
package("pubmote_node", base_path=".")
# main.py: a /main.py on the board's filesystem still wins (frozen/main.py runs it)
module("main.py", base_path="frozen")

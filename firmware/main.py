# Board entry point: read the board's config and start the configured app.
# The config is /pubmote_config.json on a board (written by `pubmote deploy`), or the file
# named by PUBMOTE_CONFIG; on the unix port a deployed board's files sit in its cwd.
import sys

# deployed modules live in /lib on a board and in ./lib on the simulated board
if "lib" not in sys.path:
    sys.path.append("lib")

from pubmote_node import boot  # after the path is set

boot.run()

"""`python -m pubmote`: the `pubmote` command, for tests and checkouts without the script."""

import sys

from pubmote.cli.main import main

sys.exit(main())

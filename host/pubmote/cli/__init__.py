"""The `pubmote` command: one module per command group; the only place argparse lives."""

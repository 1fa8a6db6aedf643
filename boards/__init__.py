"""pubmote_boards: the board profiles (one TOML file per target), shipped as package data
and read through importlib.resources (pubmote/boards/files.py)."""

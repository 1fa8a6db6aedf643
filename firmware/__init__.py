# pubmote_firmware: this folder's own files (main.py, the freeze manifest, frozen/main.py)
# shipped as package data for `pubmote deploy` and `pubmote firmware build` in an installed
# pubmote (pubmote/boards/files.py). Never imported on a board.

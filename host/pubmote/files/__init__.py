"""Files pubmote writes and the private files it reads: the lowest layer, open to all."""

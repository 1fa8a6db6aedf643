"""Boards: profiles, the firmware build, flash, deploy, and the simulated and emulated
boards (the MicroPython unix port, rp2040js)."""

# An app for the update tests that blocks the board: a busy loop at import, so the event
# loop never runs again (only the trial's watchdog thread can end it).
while True:
    pass

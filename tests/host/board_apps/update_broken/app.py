# An app for the update tests that cannot start: it raises at import (the board must roll
# back to its previous app).
raise ValueError("broken app: raises at import")

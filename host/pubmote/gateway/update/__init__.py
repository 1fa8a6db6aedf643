"""Updating boards over their links (`pubmote update`): the app package, the producer of
its manifest and segments, the roll-out and the bridge's local control endpoint."""

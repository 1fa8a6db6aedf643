"""The run-time core: the pub/sub hub, the NDN forwarder (FIB, PIT), the journal, board
authentication and packet traces. Depends on pubmote_wire only."""

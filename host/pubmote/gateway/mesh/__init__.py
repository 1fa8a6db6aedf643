"""The bridge in the GossipSub mesh: the CBOR envelope, realms and validators, directed
addresses, and the relay between the hub and the mesh. The wire format and addressing:
docs/protocols/mesh.md."""

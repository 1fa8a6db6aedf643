"""The gateway: the bridge that assembles hub, faces, mesh and DHT from a config, and its
integrations (the mesh relay and directed routing, retained topics on the DHT, the view)."""

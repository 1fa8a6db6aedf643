"""GossipSub (/meshsub/1.1.0) on the libp2p host: the RPC protobufs and the router."""

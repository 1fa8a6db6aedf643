"""Faces: the links the hub talks through (serial, TCP and UDP board links, the
NFD-compatible face for NDN apps, SP PUB/SUB endpoints for nanomsg/nng clients)."""

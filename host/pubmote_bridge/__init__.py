"""pubmote_bridge: what is left of the old host package, the Spark pipeline (`pipeline`,
`pipeline_cli`), until it moves into `pubmote`; the rest of the host is in `pubmote`."""

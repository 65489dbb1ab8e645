"""The HTTP layer: thin routers over the engine."""

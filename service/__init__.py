"""Wander's service: the FastAPI application, episode engine, stores and environments."""

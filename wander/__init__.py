"""The ``wander`` command line."""

"""Verifiers 0.4 tasksets written only against ``verifiers.v1``'s public API, as their
authors would write them: what ``WANDER_VERIFIERS`` hosts in the tests. Each module is a
taskset package in Verifiers' sense (its id is the module's name, with ``-`` for ``_``),
found on ``PYTHONPATH`` (this folder); imported only in the venv that has verifiers
(``tests/interop.py``)."""

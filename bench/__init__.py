"""Benchmarks: numbers, not assertions (see bench/README.md)."""

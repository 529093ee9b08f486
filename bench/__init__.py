"""Benchmarks (see bench/README.md); not part of the installed distribution."""

"""Local stand-ins for services tests and benchmarks cannot reach (they speak the real protocol)."""

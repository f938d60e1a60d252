"""Probes of the e5 engine alone, outside the stack: `python -m ops.probes.e5_engine`
(memoryd's build against the wheel's) and `python -m ops.probes.e5_callers` (how concurrent
callers share it)."""

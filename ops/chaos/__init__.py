"""Fault drills: each scenario is a function here (`embedded`, `server`, `llm`, `erasure`,
`hostile`); `python -m ops.chaos` runs them at full size, `tests/faults/` at a small one."""

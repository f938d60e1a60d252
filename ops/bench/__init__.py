"""Benchmarks of memoryd on this machine. `python -m ops.bench` is the main one (enqueue,
ingest, search, extraction; `run.py`); the others are commands of their own:
`python -m ops.bench.ab`, `.candidates`, `.fairness`, `.hostile`, `.waits`, and
`python -m ops.bench.docs`, which writes docs/benchmarks.md from the JSON reports they save."""

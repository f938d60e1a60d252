"""Retrieval quality on public benchmarks (LoCoMo, MADial-Bench, LongMemEval) through the
real stack.

`datasets` and `metrics` are pure; `ingest` writes over HTTP through the write path;
`runner` starts the embedded stack and searches through the gateway; `chat` posts turns as
a chat server does and asks `/v1/context`; `report` prints the tables and writes the JSON.
"""


class EvalError(Exception):
    """The run cannot produce honest numbers (a failed job, a lost memory, a bad option)."""

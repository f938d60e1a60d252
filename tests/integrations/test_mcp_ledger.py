"""The per-conversation record of write jobs that `search_memories` hands to
`freshness_options` (read-your-writes): bounded, and a job leaves it once seen ending."""

from __future__ import annotations

from memoryd.integrations.mcp_tools import JobLedger


def test_ledger_keeps_each_conversations_pending_jobs_within_bounds() -> None:
    ledger = JobLedger(conversations=2, jobs=3)
    for job in ("j1", "j2", "j3", "j4", "j4"):
        ledger.add("a", job)
    assert ledger.pending("a") == ["j2", "j3", "j4"]  # oldest dropped, no duplicates
    ledger.done("a", "j3")
    assert ledger.pending("a") == ["j2", "j4"]
    ledger.add("b", "k1")
    ledger.add("a", "j5")  # "a" is now the most recently used
    ledger.add("c", "m1")  # so "b" goes
    assert (ledger.pending("a"), ledger.pending("b"), ledger.pending("c")) == (
        ["j2", "j4", "j5"], [], ["m1"])


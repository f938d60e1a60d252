"""The memory domain: writes, reads, conflicts, versions and history, retention, forgetting
and erasure, transfer, the per-user lock."""

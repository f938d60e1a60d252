"""Value types the services exchange: the stored memory record, the wire schemas, task
commands, extraction candidates and deterministic identities."""

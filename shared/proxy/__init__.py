"""The OpenAI-compatible memory proxy (issue 21 §2): a chat-completions request gets the
user's memory context as a system message, goes to the configured upstream unchanged
otherwise, and the finished turn is enqueued as an interaction. Thin over
`memoryd.memories.context` (reads) and `memoryd.jobs.enqueue` (writes)."""

"""Index generations: the active (collection, embedder) view, re-embedding into a new
generation, and the write fence that keeps writes out during a switch."""

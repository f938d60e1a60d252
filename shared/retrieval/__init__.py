"""Ranking pieces of the read path: scoring and fusion, keyword vectors, query text, the
external reranker, the context block and its token budget, access counts."""

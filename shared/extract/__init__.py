"""Turning interactions into memory candidates: raw, rules, (later) LLM."""

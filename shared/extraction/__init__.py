"""Turning interactions into memory candidates: raw, rules and LLM, with redaction first."""

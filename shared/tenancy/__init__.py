"""Tenants and their keys: API keys and scopes, authentication, request limits, rate limits."""

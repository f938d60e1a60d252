"""The fake LLM server lives in `shared/testing/fake_llm.py` so `ops/` can use it too."""

from memoryd.testing.fake_llm import (
    Behaviour,
    FakeLLM,
    Received,
    http_error,
    json_reply,
    slow,
    text_reply,
    users_said,
)

__all__ = ["Behaviour", "FakeLLM", "Received", "http_error", "json_reply", "slow", "text_reply",
           "users_said"]

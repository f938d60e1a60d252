"""Python client for memoryd (sync and asyncio, httpx), typed with the API's own models.

    from memoryd.client import MemorydClient
    with MemorydClient("http://127.0.0.1:8420", api_key) as memory:
        job = memory.add_interaction("u1", [{"role": "user", "content": "我喜欢火锅"}])
        memory.wait(job.job_id)
        hits = memory.search("u1", "what food do I like?").results
"""

from memoryd.client.async_ import AsyncMemorydClient
from memoryd.client.calls import RetryPolicy
from memoryd.client.errors import (
    ApiError,
    BadRequest,
    ConnectionFailed,
    InvalidArgument,
    JobTimeout,
    MemorydError,
    NotFound,
    ServerError,
    Unauthorized,
    Unavailable,
)
from memoryd.client.sync import MemorydClient

__all__ = [
    "ApiError", "AsyncMemorydClient", "BadRequest", "ConnectionFailed", "InvalidArgument",
    "JobTimeout",
    "MemorydClient", "MemorydError", "NotFound", "RetryPolicy", "ServerError", "Unauthorized",
    "Unavailable",
]

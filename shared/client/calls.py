"""The one place requests are built, responses parsed and retries decided, for both the
sync and the async client: each of their methods is one line around a `Call` from here.

Request bodies are built with the API's own pydantic models (`shared/records/schemas.py`), so
bad input fails here, before a request is sent, with the same messages the gateway uses.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from memoryd.client.errors import InvalidArgument, api_error
from memoryd.platform.retry_after import retry_after
from memoryd.records.schemas import (
    Consistency,
    ContextRequest,
    ContextResponse,
    InteractionRequest,
    JobAccepted,
    JobView,
    MemoryHistory,
    MemoryPage,
    MemoryView,
    Message,
    SaveRequest,
    SaveResult,
    SearchRequest,
    SearchResponse,
    UpdateRequest,
    UserPage,
)

T = TypeVar("T")
RETRY_STATUSES = frozenset({429, 503})
FINAL_JOB_STATES = frozenset({"succeeded", "failed"})


@dataclass(frozen=True)
class RetryPolicy:
    """Retries on 503 and 429 only: both say "try later" and mean nothing was done.

    The delay is the server's `Retry-After` when it sends one (capped), else exponential
    backoff with full jitter, so many clients do not retry in step.
    """

    attempts: int = 4
    base_s: float = 0.25
    max_s: float = 8.0
    max_retry_after_s: float = 30.0

    def delay(self, attempt: int, response: httpx.Response) -> float:
        after = retry_after(response.headers.get("retry-after"))
        if after is not None:
            return min(after, self.max_retry_after_s)
        return random.uniform(0, min(self.max_s, self.base_s * 2 ** attempt))


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: dict[str, Any] | None = None
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    retry: bool = True

    def request(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        return client.build_request(self.method, self.path, params=self.params, json=self.json,
                                    content=self.content, headers=self.headers or None)


# What memoryd's ids look like (UUIDs, `wh_<hex>`, `key_<hex>`): an id is checked as one
# before it goes into a path, so `..` or `/` in it can never reach another route.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def checked_id(value: object, field: str) -> str:
    """`value` if it is an id, else `InvalidArgument` naming `field` (no request is sent)."""
    if not isinstance(value, str) or _ID.fullmatch(value) is None:
        raise InvalidArgument(f"{field}: not an id (1 to 128 letters, digits, '_' or '-', "
                              "as memoryd returns them)", field=field)
    return value


def path(template: str, **ids: str) -> str:
    """A route with each id checked (`checked_id`) and percent-encoded into its segment."""
    return template.format(**{name: quote(checked_id(value, name), safe="")
                              for name, value in ids.items()})


def check(response: httpx.Response) -> httpx.Response:
    if response.status_code < 400:
        return response
    try:
        body = response.json()
    except ValueError:
        body = None
    raise api_error(response.status_code, body, response.headers.get("x-request-id"))


def _model(cls: type[BaseModel]) -> Callable[[httpx.Response], Any]:
    def parse(response: httpx.Response) -> Any:
        return cls.model_validate(check(response).json())
    return parse


def _json(response: httpx.Response) -> Any:
    return check(response).json()


def _params(**values: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None or value is False:
            continue
        if isinstance(value, datetime):
            value = value.isoformat()
        out[key] = "true" if value is True else value
    return out


def _body(model: BaseModel) -> Any:
    return model.model_dump(mode="json", exclude_unset=True)


def add_interaction(
    user_id: str, messages: Sequence[Message | dict[str, Any]], **fields: Any
) -> Call[JobAccepted]:
    req = InteractionRequest.model_validate({"user_id": user_id, "messages": [
        m.model_dump(mode="json", exclude_unset=True) if isinstance(m, Message) else m
        for m in messages
    ], **fields})
    return Call("POST", "/v1/interactions", _model(JobAccepted), json=_body(req))


def _save_result(response: httpx.Response) -> SaveResult | JobAccepted:
    body = check(response).json()
    if response.status_code == 202:
        return JobAccepted.model_validate(body)
    return SaveResult.model_validate(body)


def save(user_id: str, content: str, wait: float | None = None,
         **fields: Any) -> Call[SaveResult | JobAccepted]:
    req = SaveRequest.model_validate({"user_id": user_id, "content": content, **fields})
    return Call("POST", "/v1/memories", _save_result, params=_params(wait=wait), json=_body(req))


def _fresh(after_jobs: Sequence[str] | None, consistency: Consistency | None) -> dict[str, Any]:
    """Read-your-writes options, sent only when given (the gateway's defaults otherwise)."""
    given: dict[str, Any] = {}
    if after_jobs:
        given["after_jobs"] = list(after_jobs)
    if consistency is not None:
        given["consistency"] = consistency
    return given


def search(
    user_id: str, query: str, *, after_jobs: Sequence[str] | None = None,
    consistency: Consistency | None = None, **options: Any,
) -> Call[SearchResponse]:
    req = SearchRequest.model_validate({"user_id": user_id, "query": query,
                                        **_fresh(after_jobs, consistency), **options})
    return Call("POST", "/v1/search", _model(SearchResponse), json=_body(req))


def context(
    user_id: str, query: str, *, after_jobs: Sequence[str] | None = None,
    consistency: Consistency | None = None, **options: Any,
) -> Call[ContextResponse]:
    req = ContextRequest.model_validate({"user_id": user_id, "query": query,
                                         **_fresh(after_jobs, consistency), **options})
    return Call("POST", "/v1/context", _model(ContextResponse), json=_body(req))


def list_memories(user_id: str, **filters: Any) -> Call[MemoryPage]:
    return Call("GET", "/v1/memories", _model(MemoryPage), params=_params(user_id=user_id,
                                                                         **filters))


def get(user_id: str, memory_id: str) -> Call[MemoryView]:
    return Call("GET", path("/v1/memories/{memory_id}", memory_id=memory_id), _model(MemoryView),
                params=_params(user_id=user_id))


def _job_or_result(response: httpx.Response) -> JobAccepted | dict[str, Any]:
    body = check(response).json()
    if response.status_code == 202:
        return JobAccepted.model_validate(body)
    result: dict[str, Any] = body
    return result


def update(user_id: str, memory_id: str, wait: float | None = None,
           **changes: Any) -> Call[JobAccepted | dict[str, Any]]:
    where = path("/v1/memories/{memory_id}", memory_id=memory_id)  # the id first
    req = UpdateRequest.model_validate(changes)
    return Call("PATCH", where, _job_or_result, params=_params(user_id=user_id, wait=wait),
                json=_body(req))


def forget(
    user_id: str, memory_id: str | None = None, *, thread_id: str | None = None,
    before: datetime | None = None, after: datetime | None = None, all: bool = False,
    wait: float | None = None,
) -> Call[JobAccepted | dict[str, Any]]:
    if memory_id is not None:
        if thread_id or before or after or all:
            raise ValueError("forget one memory by id, or many by thread/time range, not both")
        return Call("DELETE", path("/v1/memories/{memory_id}", memory_id=memory_id),
                    _job_or_result,
                    params=_params(user_id=user_id, wait=wait))
    return Call("DELETE", "/v1/memories", _job_or_result, params=_params(
        user_id=user_id, thread_id=thread_id, before=before, after=after, all=all, wait=wait))


def users(limit: int | None = None, cursor: str | None = None,
          prefix: str | None = None) -> Call[UserPage]:
    return Call("GET", "/v1/users", _model(UserPage),
                params=_params(limit=limit, cursor=cursor, prefix=prefix))


def history(user_id: str, memory_id: str) -> Call[MemoryHistory]:
    return Call("GET", path("/v1/memories/{memory_id}/history", memory_id=memory_id),
                _model(MemoryHistory),
                params=_params(user_id=user_id))


def job(job_id: str, operator: bool = False, user_id: str | None = None) -> Call[JobView]:
    """`operator`: a store-wide job (a re-embedding), read with an operator key. `user_id`:
    only that user's job (another user's answers 404)."""
    where = path("/v1/admin/jobs/{job_id}" if operator else "/v1/jobs/{job_id}", job_id=job_id)
    return Call("GET", where, _model(JobView), params=_params(user_id=user_id))


def export(user_id: str) -> Call[httpx.Response]:
    return Call("GET", "/v1/export", check, params=_params(user_id=user_id))


def import_records(
    user_id: str, records: bytes | Iterable[dict[str, Any]], idempotency_key: str | None = None
) -> Call[JobAccepted]:
    if isinstance(records, bytes):
        content, kind = records, "application/x-ndjson"
    else:
        content = json.dumps(list(records), ensure_ascii=False).encode()
        kind = "application/json"
    return Call("POST", "/v1/import", _model(JobAccepted), content=content,
                params=_params(user_id=user_id, idempotency_key=idempotency_key),
                headers={"content-type": kind})


def reindex(**body: Any) -> Call[Any]:
    return Call("POST", "/v1/admin/reindex", _json, json=body)


def ready() -> Call[Any]:
    def parse(response: httpx.Response) -> Any:
        # 503 from /readyz is an answer (which part is down), not a failure to retry.
        return response.json() if response.status_code in (200, 503) else _json(response)
    return Call("GET", "/readyz", parse, retry=False)


def metrics(token: str | None = None) -> Call[str]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return Call("GET", "/metrics", lambda r: check(r).text, headers=headers)


def job_done(view: JobView) -> bool:
    return view.status.value in FINAL_JOB_STATES

"""`MemorydStore`: LangGraph's `BaseStore` over memoryd, so a LangGraph graph or LangMem's
memory tools keep their long-term memory in memoryd.

    store = MemorydStore.from_url("http://127.0.0.1:8420", api_key)
    graph = builder.compile(store=store)

A thin adapter over the Python client (`memoryd.client`): every operation is one or a few
client calls, so reads and writes go through memoryd's own write path (dedup, user lock,
audit) and read path (calibrated hybrid search). Needs the `langgraph` extra
(`pip install 'memoryd[langgraph]'`).

**Namespaces.** A namespace is `(root, user_id)`, the user's global memories, or
`(root, user_id, project)`, the memories of one project of that user (memoryd's `scope` =
`project`). `root` is "memories" unless the store is built with another; any other first
element, and any other length, is refused with `NamespaceError`. The tenant is the API key's,
never a namespace element, so no namespace reaches another tenant. Each user or project element
follows memoryd's identifier rules (1 to 128 characters, one line, no control characters) and
may not be or contain `*` (LangGraph's wildcard), `.` (LangGraph's label separator), `/` or
`\\`, nor start or end with a space: every element is matched exactly, never as a pattern.

**Items.** An item's `key` is memoryd's named slot (`key` on `POST /v1/memories`): the memory
id is derived from (tenant, user, scope, project, key), so `put` under a key replaces that
memory and `get` finds it with `GET /v1/memories?key=`. The memory's content is
`value["content"]` when the value is only a non-blank `content` string (what LangMem writes),
else the value as canonical JSON, so it is searchable either way; the value itself is kept in
the memory's metadata (`metadata["langgraph"]["value"]`), and `get` returns it exactly.
Memories not written through the store (extracted from chat turns, saved by the API) show in
`search` too, with the memory id as key (the named slot when they have one) and
`{"content": <content>, "kind": …, "sources": […]}` (and a fact's `episodes`) as value;
`get`, `put` and `delete` under such an id address that memory, and `put` replaces it by a
named slot with the same key.

**Writes are jobs.** memoryd applies writes asynchronously; `put` (and delete, a `put` of
`None`) waits for its job, at most `write_timeout_s` (`JobTimeout` after that), so a following
`get` or `search` sees it. The same value put twice is one memory (the second is memoryd's
`duplicate`). `index` is ignored: memoryd indexes every memory's content. TTLs are not
supported (`supports_ttl` is False).

**Search.** With a `query`: memoryd's search (`POST /v1/search`) within the namespace's
scope, `SearchItem.score` the calibrated score in [0, 1]; `filter` keys map to its filters:
`type` / `types`, `tags`, `categories`, `min_importance`, `occurred_after`,
`occurred_before`. Without a query: the listing, newest first, filtered by `type` and one
tag. Any other filter key is refused with `StoreInputError`. A prefix must name the user:
`(root, user_id)` searches the user's global memories, `(root, user_id, project)` that
project's. `offset + limit` is at most 100 with a query (memoryd's `top_k` bound).

**Namespaces listed** are `(root, user)` for each user of the tenant with a memory, and
`(root, user, project)` for each project they have memories in (found by listing the user's
project memories, so only when `max_depth` is unset or at least 3). Match conditions,
`max_depth`, `limit` and `offset` follow LangGraph's in-memory store.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "memoryd.integrations.langgraph_store needs LangGraph: pip install 'memoryd[langgraph]'"
    ) from exc

from pydantic import TypeAdapter, ValidationError

from memoryd.client.async_ import AsyncMemorydClient
from memoryd.client.errors import ApiError, MemorydError, NotFound
from memoryd.client.sync import MemorydClient
from memoryd.records.schemas import (
    Identifier,
    JobAccepted,
    JobView,
    MemoryPage,
    MemoryView,
    SaveResult,
    SearchResponse,
    UserPage,
)

T = TypeVar("T")

DEFAULT_ROOT = "memories"
META_KEY = "langgraph"
# memoryd's bounds: `?wait=` on a write (seconds), `top_k` of a search, a page of a listing,
# a page of users.
_MAX_REQUEST_WAIT_S = 30.0
_MAX_TOP_K = 100
_PAGE = 200
_USER_PAGE = 500
_REFUSED_CHARS = ("*", ".", "/", "\\")
_IDENTIFIER: TypeAdapter[str] = TypeAdapter(Identifier)
_SEARCH_FILTERS = {
    "type": "types", "types": "types", "tags": "tags", "categories": "categories",
    "min_importance": "min_importance", "occurred_after": "occurred_after",
    "occurred_before": "occurred_before",
}
_LISTS = frozenset({"types", "tags", "categories"})


class StoreInputError(MemorydError, ValueError):
    """An operation memoryd cannot carry out as asked; nothing was read or written."""

    def __init__(self, message: str, *, field: str, code: str = "invalid_input") -> None:
        super().__init__(message, code=code, field=field)


class NamespaceError(StoreInputError, InvalidNamespaceError):
    """A namespace that does not map to one memoryd user (and project)."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message, field=field, code="invalid_namespace")


# A plan is one operation written once for both clients: it yields the client calls it
# needs, (method name, args, kwargs), and is sent each call's result (or thrown its error).
Request = tuple[str, tuple[Any, ...], dict[str, Any]]
Plan = Generator[Request, Any, T]


@dataclass(frozen=True)
class Place:
    """Where a namespace lives in memoryd: a user, and a project or the global scope."""

    root: str
    user: str
    project: str | None

    @property
    def scope(self) -> dict[str, Any]:
        if self.project is None:
            return {"scope": "global"}
        return {"scope": "project", "project": self.project}

    @property
    def namespace(self) -> tuple[str, ...]:
        if self.project is None:
            return (self.root, self.user)
        return (self.root, self.user, self.project)

    def holds(self, memory: MemoryView) -> bool:
        if self.project is None:
            return memory.scope.value == "global"
        return memory.scope.value == "project" and memory.project == self.project


class MemorydStore(BaseStore):
    """LangGraph's `BaseStore` over memoryd (see the module docstring for the mapping).

    Built with the clients it uses, `client` for `batch` and `aclient` for `abatch` (without
    `aclient`, `abatch` runs `batch` in a thread), or by `from_url`, which builds and owns both.
    """

    supports_ttl = False

    def __init__(self, client: MemorydClient | None = None,
                 aclient: AsyncMemorydClient | None = None, *, root: str = DEFAULT_ROOT,
                 write_timeout_s: float = 30.0) -> None:
        if client is None and aclient is None:
            raise ValueError("MemorydStore needs a MemorydClient, an AsyncMemorydClient or both")
        if write_timeout_s <= 0:
            raise ValueError("write_timeout_s must be positive")
        self.client = client
        self.aclient = aclient
        self.root = _element(root, "root")
        self.write_timeout_s = write_timeout_s
        self._owned = False

    @classmethod
    def from_url(cls, base_url: str, api_key: str, *, root: str = DEFAULT_ROOT,
                 write_timeout_s: float = 30.0, timeout: float = 60.0) -> MemorydStore:
        """A store with its own sync and async clients; `close()` / `aclose()` closes them."""
        store = cls(MemorydClient(base_url, api_key, timeout=timeout),
                    AsyncMemorydClient(base_url, api_key, timeout=timeout), root=root,
                    write_timeout_s=write_timeout_s)
        store._owned = True
        return store

    def close(self) -> None:
        if self._owned and self.client is not None:
            self.client.close()

    async def aclose(self) -> None:
        self.close()
        if self._owned and self.aclient is not None:
            await self.aclient.aclose()

    def __enter__(self) -> MemorydStore:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ---- BaseStore ------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """The operations in order, each seeing the writes before it."""
        if self.client is None:
            raise RuntimeError("this MemorydStore has only an AsyncMemorydClient: use abatch, "
                               "or build it with a MemorydClient")
        plans = [self._plan(op) for op in ops]
        return [self._drive(self.client, plan) for plan in plans]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """The operations in order, each seeing the writes before it."""
        if self.aclient is None:
            return await asyncio.to_thread(self.batch, list(ops))
        plans = [self._plan(op) for op in ops]
        return [await self._adrive(self.aclient, plan) for plan in plans]

    # ---- drivers: run a plan's calls on one client ---------------------------------------

    @staticmethod
    def _drive(client: MemorydClient, plan: Plan[T]) -> T:
        try:
            request = next(plan)
            while True:
                name, args, kwargs = request
                try:
                    result = getattr(client, name)(*args, **kwargs)
                except MemorydError as exc:
                    request = plan.throw(exc)
                else:
                    request = plan.send(result)
        except StopIteration as stop:
            value: T = stop.value
            return value

    @staticmethod
    async def _adrive(client: AsyncMemorydClient, plan: Plan[T]) -> T:
        try:
            request = next(plan)
            while True:
                name, args, kwargs = request
                try:
                    result = await getattr(client, name)(*args, **kwargs)
                except MemorydError as exc:
                    request = plan.throw(exc)
                else:
                    request = plan.send(result)
        except StopIteration as stop:
            value: T = stop.value
            return value

    # ---- plans --------------------------------------------------------------------------

    def _plan(self, op: Op) -> Plan[Result]:
        """The operation, checked now: a batch sends nothing unless all its ops are valid."""
        if isinstance(op, GetOp):
            return self._get(self._place(op.namespace, "namespace"), _key(op.key))
        if isinstance(op, PutOp):
            place, key = self._place(op.namespace, "namespace"), _key(op.key)
            if op.ttl is not None:
                raise StoreInputError("MemorydStore does not support TTLs: pass ttl=None",
                                      field="ttl")
            return self._put(place, key, None if op.value is None else _value(op.value))
        if isinstance(op, SearchOp):
            place = self._place(op.namespace_prefix, "namespace_prefix")
            _page_bounds(op.limit, op.offset)
            end = op.offset + op.limit
            if not op.query:
                return self._list(place, _list_filters(op.filter), op.offset, end)
            if end > _MAX_TOP_K:
                raise StoreInputError(f"offset + limit is {end}; a search returns at most "
                                      f"{_MAX_TOP_K}", field="limit")
            return self._search(place, op.query, _search_filters(op.filter), op.offset, end)
        if isinstance(op, ListNamespacesOp):
            _page_bounds(op.limit, op.offset)
            for condition in op.match_conditions or ():
                if condition.match_type not in ("prefix", "suffix"):
                    raise StoreInputError(f"match type {condition.match_type!r} is neither "
                                          "prefix nor suffix", field="match_conditions")
            return self._list_namespaces(op)
        raise StoreInputError(f"unknown operation {type(op).__name__}", field="op")

    def _get(self, place: Place, key: str) -> Plan[Result]:
        memory = yield from self._find(place, key)
        return None if memory is None else self._item(place, memory)

    def _put(self, place: Place, key: str, value: dict[str, Any] | None) -> Plan[Result]:
        if value is None:
            found = yield from self._find(place, key)
            if found is not None:
                yield from self._forget(place, found.id)
            return None
        if _is_uuid(key):
            # A memory not written through the store, addressed by its id: replaced by the
            # named slot, so the key keeps naming one memory.
            other = yield from self._by_id(place, key)
            if other is not None:
                yield from self._forget(place, other.id)
        saved = yield from self._save(place, key, value)
        if saved.outcome.value == "duplicate" and saved.duplicate_of is not None:
            # Same content up to memoryd's normalisation (case, spaces, end marks) under the
            # same key: the slot is kept as it was, so a different value is written anew.
            stored: MemoryView = yield ("get", (place.user, saved.duplicate_of), {})
            if _value_of(stored) != value:
                yield from self._forget(place, stored.id)
                yield from self._save(place, key, value)
        return None

    def _search(self, place: Place, query: str, options: dict[str, Any], offset: int,
                end: int) -> Plan[Result]:
        found: SearchResponse = yield ("search", (place.user, query),
                                       {"top_k": end, **place.scope, **options})
        return [self._search_item(place, hit.memory, hit.score)
                for hit in found.results[offset:end]]

    def _list(self, place: Place, filters: dict[str, Any], offset: int,
              end: int) -> Plan[Result]:
        items: list[MemoryView] = []
        cursor: str | None = None
        while len(items) < end:
            page: MemoryPage = yield ("list", (place.user,), {
                **place.scope, **filters, "limit": min(_PAGE, end - len(items)),
                "cursor": cursor})
            items.extend(page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
        return [self._search_item(place, memory, None) for memory in items[offset:end]]

    def _list_namespaces(self, op: ListNamespacesOp) -> Plan[Result]:
        conditions = op.match_conditions or ()
        if any(c.match_type == "prefix" and c.path and c.path[0] not in ("*", self.root)
               for c in conditions):
            return []
        wanted = _named_user(conditions)
        users: list[str] = []
        cursor: str | None = None
        while True:
            page: UserPage = yield ("users", (), {"limit": _USER_PAGE, "cursor": cursor,
                                                 "prefix": wanted})
            # Only users a namespace can name: an id such as `a/../b` (stored before ids
            # were checked) would be refused as a namespace element, so it is not listed.
            users.extend(u.user_id for u in page.items
                         if (wanted is None or u.user_id == wanted) and _is_element(u.user_id))
            cursor = page.next_cursor
            if cursor is None:
                break
        spaces: set[tuple[str, ...]] = {(self.root, user) for user in users}
        if op.max_depth is None or op.max_depth >= 3:
            for user in users:
                projects = yield from self._projects(user)
                spaces.update((self.root, user, project) for project in projects
                              if _is_element(project))
        matched = [ns for ns in spaces if all(_matches(c, ns) for c in conditions)]
        if op.max_depth is not None:
            matched = list({ns[:op.max_depth] for ns in matched})
        return sorted(matched)[op.offset:op.offset + op.limit]

    # ---- steps ----------------------------------------------------------------------------

    def _find(self, place: Place, key: str) -> Plan[MemoryView | None]:
        """The memory `key` names in `place`: its named slot, else the memory of that id."""
        page: MemoryPage = yield ("list", (place.user,), {**place.scope, "key": key,
                                                           "limit": 1})
        if page.items:
            return page.items[0]
        if _is_uuid(key):
            return (yield from self._by_id(place, key))
        return None

    def _by_id(self, place: Place, memory_id: str) -> Plan[MemoryView | None]:
        """The memory of that id when it lies in `place` and is no named slot."""
        try:
            memory: MemoryView = yield ("get", (place.user, memory_id), {})
        except NotFound:
            return None
        return memory if memory.key is None and place.holds(memory) else None

    def _save(self, place: Place, key: str, value: dict[str, Any]) -> Plan[SaveResult]:
        answer = yield ("save", (place.user, _text(value)), {
            **place.scope, "key": key, "metadata": {META_KEY: {"value": value}},
            "wait": min(self.write_timeout_s, _MAX_REQUEST_WAIT_S)})
        if isinstance(answer, SaveResult):
            return answer
        result = yield from self._job_result(answer)
        return SaveResult.model_validate(result)

    def _forget(self, place: Place, memory_id: str) -> Plan[None]:
        answer = yield ("forget", (place.user, memory_id),
                        {"wait": min(self.write_timeout_s, _MAX_REQUEST_WAIT_S)})
        if isinstance(answer, JobAccepted):
            yield from self._job_result(answer)

    def _job_result(self, accepted: JobAccepted) -> Plan[dict[str, Any]]:
        view: JobView = yield ("wait", (accepted.job_id,), {"timeout": self.write_timeout_s})
        if view.status.value != "succeeded":
            error = view.error or {}
            raise ApiError(str(error.get("message", f"job {view.job_id} failed")),
                           code=str(error.get("code", "job_failed")), field=error.get("field"))
        return view.result or {}

    def _projects(self, user: str) -> Plan[set[str]]:
        projects: set[str] = set()
        cursor: str | None = None
        while True:
            page: MemoryPage = yield ("list", (user,), {"scope": "project", "limit": _PAGE,
                                                         "cursor": cursor})
            projects.update(m.project for m in page.items if m.project)
            cursor = page.next_cursor
            if cursor is None:
                return projects

    # ---- mapping --------------------------------------------------------------------------

    def _place(self, namespace: tuple[str, ...], field: str) -> Place:
        namespace = tuple(namespace)
        if len(namespace) not in (2, 3):
            raise NamespaceError(
                f"{field} must be ({self.root!r}, user_id) or ({self.root!r}, user_id, "
                f"project); got {len(namespace)} elements", field=field)
        if namespace[0] != self.root:
            raise NamespaceError(f"{field}[0] must be {self.root!r}, got {namespace[0]!r}",
                                 field=f"{field}[0]")
        user = _element(namespace[1], f"{field}[1]")
        project = _element(namespace[2], f"{field}[2]") if len(namespace) == 3 else None
        return Place(self.root, user, project)

    def _namespace(self, place: Place, memory: MemoryView) -> tuple[str, ...]:
        """The namespace of a memory of `place.user`: that of its own scope."""
        project = memory.project if memory.scope.value == "project" else None
        return Place(self.root, place.user, project).namespace

    def _item(self, place: Place, memory: MemoryView) -> Item:
        return Item(value=_value_of(memory), key=memory.key or memory.id,
                    namespace=self._namespace(place, memory), created_at=memory.created_at,
                    updated_at=memory.updated_at)

    def _search_item(self, place: Place, memory: MemoryView, score: float | None) -> SearchItem:
        return SearchItem(self._namespace(place, memory), memory.key or memory.id,
                          _value_of(memory), memory.created_at, memory.updated_at, score=score)


def _element(value: Any, field: str) -> str:
    """A namespace element as memoryd's identifier rules and this mapping take it."""
    if not isinstance(value, str):
        raise NamespaceError(f"{field} must be a string", field=field)
    try:
        _IDENTIFIER.validate_python(value)
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"]
        raise NamespaceError(f"{field} {value!r}: {reason}", field=field) from None
    bad = [c for c in _REFUSED_CHARS if c in value]
    if bad:
        raise NamespaceError(f"{field} {value!r} contains {bad[0]!r}; namespace elements "
                             f"are exact ids and may not contain * . / or \\", field=field)
    if value != value.strip():
        raise NamespaceError(f"{field} {value!r} starts or ends with a space", field=field)
    return value


def _is_element(value: str) -> bool:
    try:
        _element(value, "namespace")
    except NamespaceError:
        return False
    return True


def _key(value: Any) -> str:
    if not isinstance(value, str):
        raise StoreInputError("key must be a string", field="key")
    try:
        return _IDENTIFIER.validate_python(value)
    except ValidationError as exc:
        raise StoreInputError(f"key {value!r}: {exc.errors()[0]['msg']}", field="key") from None


def _value(value: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise StoreInputError("value must be a dict (or None to delete)", field="value")
    try:
        # The JSON round trip is what memoryd will store and return.
        out: dict[str, Any] = json.loads(json.dumps(dict(value), ensure_ascii=False))
    except (TypeError, ValueError) as exc:
        raise StoreInputError(f"value must be JSON-serialisable: {exc}", field="value") from None
    return out


def _text(value: dict[str, Any]) -> str:
    """The memory's content: LangMem's `{"content": text}` as the text, else canonical JSON."""
    content = value.get("content")
    if len(value) == 1 and isinstance(content, str) and content.strip():
        return content
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _value_of(memory: MemoryView) -> dict[str, Any]:
    """A value the store put, exactly; else the memory's content with its provenance:
    `kind`, `sources` (the messages it came from) and, for a fact, `episodes`."""
    meta = memory.metadata.get(META_KEY)
    if isinstance(meta, dict) and isinstance(meta.get("value"), dict):
        value: dict[str, Any] = meta["value"]
        return value
    found: dict[str, Any] = {"content": memory.content, "kind": memory.kind.value,
                             "sources": [s.model_dump(mode="json") for s in memory.sources]}
    if memory.episodes:
        found["episodes"] = list(memory.episodes)
    return found


def _page_bounds(limit: int, offset: int) -> None:
    if limit < 1:
        raise StoreInputError(f"limit must be at least 1, got {limit}", field="limit")
    if offset < 0:
        raise StoreInputError(f"offset must be at least 0, got {offset}", field="offset")


def _is_uuid(value: str) -> bool:
    try:
        return str(uuid.UUID(value)) == value.lower()
    except ValueError:
        return False


def _search_filters(given: dict[str, Any] | None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for name, value in (given or {}).items():
        target = _SEARCH_FILTERS.get(name)
        if target is None:
            raise StoreInputError(
                f"filter key {name!r} is not supported; memoryd filters a search by "
                f"{', '.join(sorted(_SEARCH_FILTERS))}", field=f"filter.{name}")
        if target in _LISTS and isinstance(value, str):
            value = [value]
        options[target] = value
    return options


def _list_filters(given: dict[str, Any] | None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for name, value in (given or {}).items():
        if name not in ("type", "tags"):
            raise StoreInputError(
                f"filter key {name!r} needs a query; without one memoryd filters by type and "
                "one tag", field=f"filter.{name}")
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if not isinstance(value, str):
            raise StoreInputError(f"filter {name!r} without a query takes one value",
                                  field=f"filter.{name}")
        options["type" if name == "type" else "tag"] = value
    return options


def _named_user(conditions: Iterable[MatchCondition]) -> str | None:
    """The one user a prefix condition names, so only that user is read."""
    for condition in conditions:
        path = condition.path
        if condition.match_type == "prefix" and len(path) >= 2 and path[1] != "*":
            return str(path[1])
    return None


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """LangGraph's match: a prefix or suffix of the namespace, `*` matching any element."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    else:
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    return all(p == "*" or n == p for n, p in pairs)

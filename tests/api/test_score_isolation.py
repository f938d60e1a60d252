"""A user's rankings and scores are a function of that user's memories and the query alone
(issue 30, docs/decisions/0029-keyword-statistics-no-one-else-moves.md).

One user stores 20 memories (English and Chinese) and asks 10 queries through /v1/search
(hybrid and keyword) and /v1/context; every id, in order, and every score is recorded.
Then another tenant holds 6,000 memories that share the user's words, and every answer
must be exactly what it was; then another user of the same tenant holds 6,000, again.
With Qdrant's collection-wide IDF the keyword scores moved (and with them rankings).

How the crowd gets into the store: the import API embeds every memory, at ~20 a second
on this 2-core host under load, so 12,000 took ten minutes and more (~2 a second with the
host's other benchmarks running). The crowd is instead written the way the bench fill
writes (ops/bench/fill.py): straight into the stack's Qdrant Edge shard while the stack is
stopped, as the points the write path makes (`MemoryRecord` payloads, deterministic ids,
`keyword_vector`, and e5 vectors from `embed_memories`, the write path's own call). The
crowd's sentences are `POOL` distinct ones, each embedded once; a crowd user holds
`CROWD_USER` of them, so 6,000 memories are 30 users, and a sentence recurs across users as
everyday sentences do. The stack is then started again on the same data directory. Every
answer set is taken from a freshly started stack (an empty query-vector cache), so that the
only difference between two of them is what the store holds.

The stack is a `memoryd up` of its own (its own Redis, on a free port): recency and
access boosts move with the clock and with the user's own searches, not with anyone
else's data, so they are held still (`as_of` on search; recency weight 0, access not
counted) to let the comparison be exact.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from conftest import KEY_A, KEY_B
from helpers import save, search
from up_process import start_up, stop_up, wait_ready

from memoryd.embeddings.e5.engine import default_cache_dir
from memoryd.embeddings.factory import make_embedder
from memoryd.embeddings.parts import MemoryVector, embed_memories
from memoryd.platform.redis_runtime import free_port
from memoryd.platform.settings import Settings
from memoryd.records.identity import content_hash, memory_id
from memoryd.records.models import MemoryRecord, MemoryType, Owner, Scope, Source
from memoryd.retrieval.keywords import keyword_vector
from memoryd.store import PointData
from memoryd.store.edge import EdgeStore

MEMORIES = [
    "I adopted a grey cat named Pepper from the shelter in March",
    "My sister Melanie paints sunsets with watercolours every weekend",
    "I work as a nurse on the night shift at the city hospital",
    "We went camping by the lake and saw a family of otters",
    "I am allergic to peanuts and carry an epinephrine pen",
    "My favourite band is Radiohead; I saw them live in Berlin",
    "I started learning the cello last autumn with a teacher called Ruth",
    "Our garden grows tomatoes, basil and far too many courgettes",
    "I ran my first half marathon in 2 hours and 4 minutes",
    "My son Leo starts primary school in September",
    "The car broke down on the motorway and the tow truck took hours",
    "I prefer green tea in the morning and never drink coffee after noon",
    "我每天早上在公园里跑步，然后喝一杯豆浆",
    "我的女儿在学钢琴，她最喜欢肖邦的夜曲",
    "上个月我们全家去杭州西湖旅游，坐了游船",
    "我对猫毛过敏，所以家里养了一条小狗叫旺财",
    "我在一家软件公司做产品经理，经常加班",
    "周末我喜欢去图书馆看历史书",
    "我奶奶做的红烧肉是全世界最好吃的",
    "我打算明年春天去日本看樱花",
]
QUERIES = [
    "What pet do I have?",
    "Who paints sunsets?",
    "Where did I see Radiohead play?",
    "What do I drink in the morning?",
    "What instrument am I learning and who teaches me?",
    "How long did my half marathon take?",
    "我早上做什么运动？",
    "我女儿在学什么乐器？",
    "我们去哪里旅游了？",
    "我为什么不能养猫？",
]
AS_OF = "2026-01-01T00:00:00Z"
CROWD = 6000  # memories of the other tenant, then of the other users of the same tenant
CROWD_USER = 200  # memories of one crowd user
POOL = 250  # distinct crowd sentences, each embedded once (at least CROWD_USER)
CROWD_EPOCH = datetime(2025, 6, 1, tzinfo=UTC)
TENANT_A, TENANT_B = "tenant-a", "tenant-b"  # what KEY_A and KEY_B map to
# The crowd's words: the user's own (so that collection-wide statistics of those words
# move) and filler, in sentences of 6-14 words.
_SHARED = ("cat sister paints sunsets nurse hospital camping lake peanuts band Berlin cello "
           "teacher garden tomatoes marathon school car coffee tea morning pet drink "
           "跑步 公园 女儿 钢琴 旅游 西湖 过敏 小狗 公司 图书馆 日本 樱花 早上 喜欢").split()
_FILLER = ("project meeting invoice weather train station dinner recipe holiday budget "
           "phone laptop movie weekend friend office river mountain bakery museum "
           "会议 天气 晚饭 电影 朋友 办公室 山 河 面包 博物馆").split()


def crowd_sentences(seed: int, n: int) -> list[str]:
    """`n` distinct sentences of the crowd's words, from `seed`."""
    rng = random.Random(seed)
    texts: dict[str, None] = {}
    while len(texts) < n:
        words = [rng.choice(_SHARED if rng.random() < 0.5 else _FILLER)
                 for _ in range(rng.randint(6, 14))]
        texts[" ".join(words)] = None
    return list(texts)


def settings_of(data_dir: Path) -> Settings:
    return Settings(data_dir=data_dir, engine_cache_dir=default_cache_dir())


class Stack:
    """A `memoryd up` on `data_dir`; stopped and started again on the same directory."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.base = f"http://127.0.0.1:{free_port()}"
        self.proc = start_up(data_dir, int(self.base.rsplit(":", 1)[1]), {
            # Unreachable until `memoryd up` starts a Redis of its own there.
            "MEMORYD_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
            "MEMORYD_LOG_LEVEL": "WARNING", "MEMORYD_LOG_JSON": "true",
            "MEMORYD_API_KEYS": f"{KEY_A}={TENANT_A},{KEY_B}={TENANT_B}",
            "MEMORYD_ENGINE_CACHE_DIR": str(default_cache_dir()),
            "MEMORYD_SEARCH_RECENCY_WEIGHT": "0",
            "MEMORYD_SEARCH_RECORD_ACCESS": "false",
        })
        try:
            wait_ready(self.proc, self.base)
        except AssertionError:
            self.stop()
            raise

    def client(self, key: str) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=120,
                            headers={"Authorization": f"Bearer {key}"})

    def stop(self) -> None:
        stop_up(self.proc)


def answers_of(data_dir: Path, user: str,
               crowd: tuple[str, str, list[str]] | None = None) -> list[Any]:
    """Every ranking and score the user sees for the queries, from a stack started afresh;
    `crowd` (API key, user, pool) is a crowd user whose memories (pool sentences) the stack
    must find, so that a crowd the stack did not see cannot pass for one that moved nothing."""
    stack = Stack(data_dir)
    try:
        if crowd is not None:
            key, other, pool = crowd
            with stack.client(key) as client:
                found = search(client, other, "coffee morning cat 喜欢 早上", top_k=50)
            assert len(found) == 50 and {r["memory"]["content"] for r in found} <= set(pool)
        with stack.client(KEY_A) as client:
            return answers(client, user)
    finally:
        stack.stop()


def answers(client: httpx.Client, user: str) -> list[Any]:
    """Every ranking and score the user sees for the queries."""
    seen: list[Any] = []
    for query in QUERIES:
        for mode in ("hybrid", "keyword"):
            response = client.post("/v1/search", json={
                "user_id": user, "query": query, "top_k": 20, "mode": mode, "as_of": AS_OF,
                "explain": True})
            assert response.status_code == 200, response.text
            seen.append([(query, mode, r["memory"]["id"], r["score"], r["explanation"])
                         for r in response.json()["results"]])
        response = client.post("/v1/context", json={"user_id": user, "query": query,
                                                    "min_score": 0.0})
        assert response.status_code == 200, response.text
        body = response.json()
        seen.append([(query, "context", i["memory"]["id"], i["score"], i["label"])
                     for i in body["items"]])
        seen.append(body["block"])
    return seen


def store_crowd(data_dir: Path, tenant: str, users: list[str], pool: list[str],
                vectors: list[MemoryVector], embedder: str, seed: int) -> int:
    """`CROWD_USER` pool sentences for each user, written into the stopped stack's shard as
    the write path writes an imported memory (ops/bench/fill.py does the same for the
    bench); the number of points written."""
    settings = settings_of(data_dir)
    rng = np.random.default_rng(seed)
    store = EdgeStore(settings.edge_path, settings.collection)
    written = 0
    try:
        # The stack made the shard; this opens it (and checks it was made with this model).
        store.ensure_schema(embedder, int(vectors[0].dense.shape[0]))
        for user in users:
            owner = Owner(tenant_id=tenant, user_id=user)
            points = []
            for pick in rng.choice(len(pool), CROWD_USER, replace=False).tolist():
                content, vector = pool[pick], vectors[pick]
                chash = content_hash(content)
                when = CROWD_EPOCH + timedelta(minutes=pick)
                record = MemoryRecord(
                    id=memory_id(tenant, user, Scope.GLOBAL.value, None, chash),
                    tenant_id=tenant, user_id=user, content=content, content_hash=chash,
                    type=MemoryType.SEMANTIC, scope=Scope.GLOBAL, source=Source.IMPORT,
                    occurred_at=when, created_at=when, updated_at=when,
                    embedding_model=embedder)
                points.append(PointData(record.id, record.to_payload(), vector.dense.tolist(),
                                        keyword_vector(content), vector.parts_list()))
            store.upsert(owner, points)
            written += len(points)
    finally:
        store.close()  # flushes, and frees the shard's lock for the stack
    return written


@pytest.fixture(scope="module")
def crowd_pool() -> tuple[list[str], list[MemoryVector], str]:
    """The crowd's sentences and their vectors, embedded as the write path embeds them."""
    settings = settings_of(Path("unused"))
    embedder = make_embedder(settings.embedder, settings)
    pool = crowd_sentences(30, POOL)
    return pool, embed_memories(embedder, pool, settings.long_memory_parts), embedder.name


@pytest.mark.timeout(900)
def test_rankings_and_scores_ignore_other_users_data(
    tmp_path: Path, crowd_pool: tuple[list[str], list[MemoryVector], str]
) -> None:
    pool, vectors, embedder = crowd_pool
    user = "isolated-user"
    stack = Stack(tmp_path)
    try:
        with stack.client(KEY_A) as a:
            for content in MEMORIES:
                assert save(a, user, content).status_code in (200, 201)
    finally:
        stack.stop()
    before = answers_of(tmp_path, user)
    assert sum(1 for block in before if isinstance(block, list) and block) >= len(QUERIES)

    others = [f"crowd-b{i}" for i in range(CROWD // CROWD_USER)]
    assert store_crowd(tmp_path, TENANT_B, others, pool, vectors, embedder, seed=1) == CROWD
    seen = answers_of(tmp_path, user, crowd=(KEY_B, others[-1], pool))
    assert seen == before, "another tenant's memories moved this user's"

    neighbours = [f"neighbour-a{i}" for i in range(CROWD // CROWD_USER)]
    assert store_crowd(tmp_path, TENANT_A, neighbours, pool, vectors, embedder,
                       seed=2) == CROWD
    seen = answers_of(tmp_path, user, crowd=(KEY_A, neighbours[-1], pool))
    assert seen == before, "another user's memories moved this user's"

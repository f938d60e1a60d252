"""A user's rankings and scores are a function of that user's memories and the query alone
(issue 30, docs/decisions/0029-keyword-statistics-no-one-else-moves.md).

One user stores 20 memories (English and Chinese) and asks 10 queries through /v1/search
(hybrid and keyword) and /v1/context; every id, in order, and every score is recorded.
Then another tenant stores 6,000 memories that share the user's words, and every answer
must be exactly what it was; then another user of the same tenant stores 6,000, again.
With Qdrant's collection-wide IDF the keyword scores moved (and with them rankings).

The stack is a `memoryd up` of its own (its own Redis, on a free port): recency and
access boosts move with the clock and with the user's own searches, not with anyone
else's data, so they are held still (`as_of` on search; recency weight 0, access not
counted) to let the comparison be exact.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import KEY_A, KEY_B
from helpers import save, wait_job
from up_process import start_up, stop_up, wait_ready

from memoryd.embeddings.e5.engine import default_cache_dir
from memoryd.platform.redis_runtime import free_port

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
CROWD = 6000
# The crowd's words: the user's own (so that collection-wide statistics of those words
# move) and filler, in sentences of 6-14 words.
_SHARED = ("cat sister paints sunsets nurse hospital camping lake peanuts band Berlin cello "
           "teacher garden tomatoes marathon school car coffee tea morning pet drink "
           "跑步 公园 女儿 钢琴 旅游 西湖 过敏 小狗 公司 图书馆 日本 樱花 早上 喜欢").split()
_FILLER = ("project meeting invoice weather train station dinner recipe holiday budget "
           "phone laptop movie weekend friend office river mountain bakery museum "
           "会议 天气 晚饭 电影 朋友 办公室 山 河 面包 博物馆").split()


def crowd_texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for i in range(n):
        words = [rng.choice(_SHARED if rng.random() < 0.5 else _FILLER)
                 for _ in range(rng.randint(6, 14))]
        texts.append(f"{' '.join(words)} #{seed}-{i}")
    return texts


class Stack:
    def __init__(self, data_dir: Path) -> None:
        self.base = f"http://127.0.0.1:{free_port()}"
        self.proc = start_up(data_dir, int(self.base.rsplit(":", 1)[1]), {
            # Unreachable until `memoryd up` starts a Redis of its own there.
            "MEMORYD_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
            "MEMORYD_LOG_LEVEL": "WARNING", "MEMORYD_LOG_JSON": "true",
            "MEMORYD_API_KEYS": f"{KEY_A}=tenant-a,{KEY_B}=tenant-b",
            "MEMORYD_ENGINE_CACHE_DIR": str(default_cache_dir()),
            "MEMORYD_SEARCH_RECENCY_WEIGHT": "0",
            "MEMORYD_SEARCH_RECORD_ACCESS": "false",
            # 6,000 imports on a busy 2-core host: no job may hit the 150 s default.
            "MEMORYD_JOB_SOFT_TIME_LIMIT_S": "400", "MEMORYD_JOB_TIME_LIMIT_S": "450",
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


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = Stack(tmp_path_factory.mktemp("isolation"))
    try:
        yield running
    finally:
        running.stop()


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


def store_crowd(client: httpx.Client, users: list[str], seed: int) -> None:
    """`CROWD` memories over `users`, through the import API (200 a request)."""
    texts = crowd_texts(seed, CROWD)
    jobs = []
    for n, start in enumerate(range(0, CROWD, 200)):
        response = client.post("/v1/import", params={"user_id": users[n % len(users)]},
                               json=[{"content": t} for t in texts[start:start + 200]])
        assert response.status_code == 202, response.text
        jobs.append(response.json()["job_id"])
    for job in jobs:
        done = wait_job(client, job, timeout_s=900)
        assert done["status"] == "succeeded", done


@pytest.mark.timeout(1800)  # 12,000 imports embedded on a shared 2-core host
def test_rankings_and_scores_ignore_other_users_data(stack: Stack) -> None:
    with stack.client(KEY_A) as a, stack.client(KEY_B) as b:
        user = "isolated-user"
        for content in MEMORIES:
            assert save(a, user, content).status_code in (200, 201)
        before = answers(a, user)
        assert sum(1 for block in before if isinstance(block, list) and block) >= len(QUERIES)

        store_crowd(b, ["crowd-b1", "crowd-b2", "crowd-b3"], seed=1)
        assert answers(a, user) == before, "another tenant's memories moved this user's"

        store_crowd(a, ["neighbour-a1", "neighbour-a2"], seed=2)
        assert answers(a, user) == before, "another user's memories moved this user's"

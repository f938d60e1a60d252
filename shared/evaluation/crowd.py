"""`memoryd eval --crowd N`: memories of unrelated users stored before the set.

A production store holds many users; `memoryd eval` on an empty store measured ranking
that no shared store would see if anything in scoring read across users (issue 30). The
crowd is N generated memories (English and Chinese everyday sentences, a fixed seed, so
every run stores the same) of `CROWD_USER_MEMORIES` each per user, stored through the
import API (the fastest real write path: one job per user, embedded by the workers).
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from memoryd.evaluation import EvalError
from memoryd.evaluation.ingest import api_client, check, wait_job

CROWD_USER_MEMORIES = 200
CROWD_SEED = 30  # issue 30
CROWD_USER_PREFIX = "crowd-"

_EN_SUBJECTS = ("I", "My brother", "My wife", "Our neighbour", "My boss", "My friend Sam",
                "My daughter", "The team", "My grandmother", "We")
_EN_VERBS = ("visited", "bought", "cooked", "talked about", "fixed", "painted", "lost",
             "found", "booked", "watched", "read about", "planned")
_EN_OBJECTS = ("a new bike", "the old car", "a trip to Lisbon", "a birthday cake",
               "the garden fence", "a documentary about whales", "concert tickets",
               "the kitchen sink", "a yoga class", "a second-hand piano", "the tax forms",
               "a puppy from the shelter", "a hiking trail", "the wedding photos")
_EN_TIMES = ("last weekend", "yesterday", "in March", "after work", "on holiday",
             "two years ago", "this morning", "before Christmas", "every Sunday")
_ZH_SUBJECTS = ("我", "我哥哥", "我妻子", "邻居", "老板", "我朋友小李", "我女儿", "我们团队",
                "我奶奶", "我们")
_ZH_VERBS = ("去了", "买了", "做了", "聊到", "修好了", "画了", "弄丢了", "找到了", "预订了",
             "看了", "计划了")
_ZH_OBJECTS = ("一辆新自行车", "旧汽车", "去成都的旅行", "生日蛋糕", "花园的篱笆",
               "关于鲸鱼的纪录片",
               "演唱会门票", "厨房水槽", "瑜伽课", "一架二手钢琴", "报税表", "一只小狗",
               "爬山路线", "婚礼照片")
_ZH_TIMES = ("上周末", "昨天", "三月份", "下班后", "放假时", "两年前", "今天早上", "春节前",
             "每个星期天")


def crowd_texts(n: int, seed: int = CROWD_SEED) -> list[str]:
    """N distinct everyday sentences, half English and half Chinese, from `seed`."""
    rng = random.Random(seed)
    texts = []
    for i in range(n):
        if rng.random() < 0.5:
            text = (f"{rng.choice(_EN_SUBJECTS)} {rng.choice(_EN_VERBS)} "
                    f"{rng.choice(_EN_OBJECTS)} {rng.choice(_EN_TIMES)} (note {i})")
        else:
            text = (f"{rng.choice(_ZH_SUBJECTS)}{rng.choice(_ZH_TIMES)}{rng.choice(_ZH_VERBS)}"
                    f"{rng.choice(_ZH_OBJECTS)}（第{i}条）")
        texts.append(text)
    return texts


@dataclass
class CrowdOutcome:
    users: int
    memories: int
    seconds: float


def _import_user(base_url: str, user: str, texts: list[str]) -> int:
    with api_client(base_url) as client:
        accepted = check(client.post("/v1/import", params={"user_id": user},
                                     json=[{"content": t} for t in texts]), "crowd import")
        result = wait_job(client, accepted["job_id"])
    return int(result.get("imported", 0))


def store_crowd(base_url: str, n: int, concurrency: int) -> CrowdOutcome:
    """Store `n` crowd memories; users `crowd-0`, `crowd-1`, … (no set uses that prefix)."""
    started = time.perf_counter()
    texts = crowd_texts(n)
    chunks = [texts[i:i + CROWD_USER_MEMORIES] for i in range(0, n, CROWD_USER_MEMORIES)]
    with ThreadPoolExecutor(max_workers=max(concurrency, 1)) as pool:
        stored = sum(pool.map(
            lambda item: _import_user(base_url, f"{CROWD_USER_PREFIX}{item[0]}", item[1]),
            enumerate(chunks)))
    if stored != n:
        raise EvalError(f"crowd: {n} memories sent, {stored} imported")
    return CrowdOutcome(len(chunks), stored, time.perf_counter() - started)

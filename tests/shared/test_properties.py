"""Property tests: tokenization and request validation never crash, whatever the text."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from memoryd.records.schemas import (
    ContextRequest,
    InteractionRequest,
    SaveRequest,
    SearchRequest,
    UpdateRequest,
)
from memoryd.retrieval.keywords import (
    STOPWORDS,
    keyword_vector,
    query_keyword_vector,
    surface_tokens,
    token_id,
    tokenize,
)
from memoryd.retrieval.reference_idf import RARE_IDF

PROFILE = settings(max_examples=200, derandomize=True, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.too_slow])

chinese = st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
                  min_size=1, max_size=12)
english = st.from_regex(r"[A-Za-z][a-z']{0,9}", fullmatch=True)
mixed = st.lists(st.one_of(chinese, english, st.sampled_from([" ", ",", "。", "!", "123", "’s"])),
                 max_size=20).map("".join)
any_text = st.one_of(mixed, st.text(max_size=200))


@PROFILE
@given(any_text)
def test_tokenize_never_crashes_and_tokens_are_words(text: str) -> None:
    tokens = tokenize(text)
    assert all(isinstance(t, str) and t.strip() == t and t for t in tokens)
    # The sparse vectors are well formed and agree with the tokens.
    doc = keyword_vector(text)
    query = query_keyword_vector(text)
    assert (doc is None) == (query is None) == (not tokens)
    if doc is not None and query is not None:
        indices, values = doc
        assert indices == sorted(set(indices)) == query[0]
        assert set(indices) == {token_id(t) for t in tokens}
        assert all(0 < v for v in values)
        # Query weights are reference IDFs (docs/decisions/0029): positive, bounded.
        assert all(0 < w <= RARE_IDF for w in query[1])
        assert [t for _, t in surface_tokens(text)] == tokens


@PROFILE
@given(any_text)
def test_tokenize_is_deterministic(text: str) -> None:
    assert tokenize(text) == tokenize(text)
    assert keyword_vector(text) == keyword_vector(text)


@PROFILE
@given(chinese, english)
def test_mixed_text_is_both_scripts_tokenized(zh: str, en: str) -> None:
    # Mixed text is cut where the script changes: each part is tokenized as on its own.
    assert tokenize(f"{zh}{en}") == tokenize(zh) + tokenize(en)
    assert all(not t.isascii() for t in tokenize(zh))
    assert all(t.isascii() for t in tokenize(en))
    assert not set(tokenize(zh)) & STOPWORDS


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=20,
)
MODELS: list[type[BaseModel]] = [InteractionRequest, SaveRequest, SearchRequest, ContextRequest,
                                 UpdateRequest]
FIELDS = st.sampled_from(sorted({f for m in MODELS for f in m.model_fields} | {"extra"}))


@PROFILE
@given(st.sampled_from(MODELS), st.dictionaries(FIELDS, json_values, max_size=8))
def test_validation_raises_only_validation_errors(model: type[BaseModel],
                                                  body: dict[str, Any]) -> None:
    try:
        model.model_validate(body)
    except ValidationError as exc:
        # The gateway names the field from these: each error has a location and a message.
        assert all("loc" in e and e["msg"] for e in exc.errors())
    try:
        model.model_validate_json(json.dumps(body))
    except ValidationError:
        pass


@PROFILE
@given(st.sampled_from(MODELS), json_values)
def test_any_json_document_is_refused_cleanly(model: type[BaseModel], doc: Any) -> None:
    try:
        model.model_validate_json(json.dumps(doc))
    except ValidationError:
        pass

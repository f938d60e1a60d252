"""`MemorydStore` driven by the real `langgraph` (and LangMem's tools) against the live
embedded stack: items round trip exactly, searches are scored, namespaces stay within their
user and tenant, and hostile namespace elements are refused before anything is sent."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from conftest import KEY_A, KEY_B
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)

from memoryd.client import AsyncMemorydClient, MemorydClient
from memoryd.integrations.langgraph_store import MemorydStore, NamespaceError, StoreInputError


@pytest.fixture(scope="module")
def store(base_url: str) -> Iterator[MemorydStore]:
    with MemorydStore.from_url(base_url, KEY_A) as s:
        yield s


@pytest.fixture(scope="module")
def client(base_url: str) -> Iterator[MemorydClient]:
    with MemorydClient(base_url, KEY_A) as c:
        yield c


def _user() -> str:
    return f"lg-{uuid.uuid4().hex[:12]}"


def test_put_get_delete_round_trip(store: MemorydStore, client: MemorydClient) -> None:
    user = _user()
    ns = ("memories", user)
    value = {"content": "I drink oolong tea every morning", "source": "chat", "n": 3,
             "nested": {"ok": True, "list": [1, "two"]}}
    store.put(ns, "drink", value)
    item = store.get(ns, "drink")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (ns, "drink", value)
    stored = client.list(user).items
    assert [m.key for m in stored] == ["drink"] and stored[0].scope.value == "global"

    # The same value again is the same memory; a new value replaces it under the key.
    store.put(ns, "drink", value)
    assert len(client.list(user).items) == 1
    store.put(ns, "drink", {"content": "I switched to green tea"})
    item = store.get(ns, "drink")
    assert item is not None and item.value == {"content": "I switched to green tea"}
    assert [m.content for m in client.list(user).items] == ["I switched to green tea"]
    # Equal to the stored content up to memoryd's normalisation: the value is still exact.
    store.put(ns, "drink", {"content": "i switched to green tea."})
    item = store.get(ns, "drink")
    assert item is not None and item.value == {"content": "i switched to green tea."}

    store.delete(ns, "drink")
    assert store.get(ns, "drink") is None
    assert client.list(user).items == []
    store.delete(ns, "drink")  # deleting what is not there is a no-op
    assert store.get(ns, "never-written") is None


def test_search_scores_offset_and_listing(store: MemorydStore) -> None:
    user = _user()
    ns = ("memories", user)
    facts = {"city": "I live in Lisbon near the river",
             "pet": "My dog is a golden retriever called Miso",
             "job": "I work as a radiologist at the city hospital"}
    for key, text in facts.items():
        store.put(ns, key, {"content": text})

    hits = store.search(ns, query="what kind of dog do I have?", limit=3)
    assert hits and hits[0].key == "pet"
    assert all(isinstance(h, SearchItem) and h.score is not None and 0 <= h.score <= 1
               for h in hits)
    assert [h.key for h in store.search(ns, query="what kind of dog do I have?", limit=2,
                                        offset=1)] == [h.key for h in hits[1:3]]

    listed = store.search(ns, limit=10)
    assert {i.key for i in listed} == set(facts) and all(i.score is None for i in listed)
    assert [i.key for i in store.search(ns, limit=1, offset=1)] == [listed[1].key]

    with pytest.raises(StoreInputError) as bad:
        store.search(ns, query="dog", filter={"colour": "brown"})
    assert bad.value.field == "filter.colour"
    with pytest.raises(StoreInputError) as bad:
        store.search(ns, filter={"min_importance": 3})
    assert bad.value.field == "filter.min_importance"


def test_projects_users_and_tenants_stay_apart(store: MemorydStore, base_url: str) -> None:
    alice, bob = _user(), _user()
    store.put(("memories", alice), "home", {"content": "Alice lives in Oslo"})
    store.put(("memories", alice, "garden"), "plan", {"content": "Plant tulips in October"})
    store.put(("memories", bob), "home", {"content": "Bob lives in Quito"})

    assert store.get(("memories", bob), "plan") is None
    assert store.get(("memories", alice), "plan") is None  # the project is its own namespace
    plan = store.get(("memories", alice, "garden"), "plan")
    assert plan is not None and plan.namespace == ("memories", alice, "garden")
    bob_hits = store.search(("memories", bob), query="where does Alice live? Oslo")
    assert all(h.namespace == ("memories", bob) for h in bob_hits)
    assert "Oslo" not in str([h.value for h in bob_hits])
    assert [h.key for h in store.search(("memories", alice, "garden"), query="tulips")] == [
        "plan"]

    assert store.list_namespaces(prefix=("memories", alice)) == [
        ("memories", alice), ("memories", alice, "garden")]
    assert store.list_namespaces(prefix=("memories", alice), max_depth=2) == [
        ("memories", alice)]
    assert store.list_namespaces(suffix=("garden",), prefix=("memories", "*")) == [
        ("memories", alice, "garden")]
    everyone = store.list_namespaces(limit=1000)
    assert {("memories", alice), ("memories", bob)} <= set(everyone)
    assert store.list_namespaces(prefix=("other",)) == []

    with MemorydStore.from_url(base_url, KEY_B) as other:
        assert other.get(("memories", alice), "home") is None
        assert other.search(("memories", alice), query="where does Alice live?") == []
        assert other.search(("memories", alice)) == []
        assert ("memories", alice) not in other.list_namespaces(limit=1000)


@pytest.mark.parametrize("namespace", [
    ("memories", "*"), ("memories", ""), ("memories", "a/b"), ("memories", "a.b"),
    ("memories", " alice"), ("memories", "x" * 129), ("memories", "line\nbreak"),
    ("memories", "alice", "*"), ("memories", "alice", "p\\q"), ("notes", "alice"),
    ("memories",), ("memories", "alice", "p", "deeper"),
])
def test_hostile_namespaces_are_refused(store: MemorydStore, client: MemorydClient,
                                        namespace: tuple[str, ...]) -> None:
    # Straight to batch, past BaseStore's own label checks: the store's mapping refuses.
    for op in (PutOp(namespace, "k", {"content": "should never be stored"}),
               GetOp(namespace, "k"), SearchOp(namespace, query="anything"),
               SearchOp(namespace)):
        with pytest.raises(InvalidNamespaceError) as refused:
            store.batch([op])
        assert isinstance(refused.value, NamespaceError)
        assert refused.value.code == "invalid_namespace"
        assert refused.value.field is not None and refused.value.field.startswith("namespace")
    # Nothing of this namespace became a user (other tests may store odd ids on purpose).
    hostile = set(namespace[1:2])
    assert not any(u.user_id in hostile for u in client.users(limit=500).items)


def test_bad_keys_values_and_ttl_are_refused(store: MemorydStore) -> None:
    ns = ("memories", _user())
    for op, field in ((PutOp(ns, "", {"content": "x"}), "key"),
                      (PutOp(ns, "k" * 129, {"content": "x"}), "key"),
                      (PutOp(ns, "k", {"content": object()}), "value"),
                      (PutOp(ns, "k", {"content": "x"}, ttl=5.0), "ttl")):
        with pytest.raises(StoreInputError) as refused:
            store.batch([op])
        assert refused.value.field == field
    # One bad op refuses its whole batch before anything is sent.
    with pytest.raises(NamespaceError):
        store.batch([PutOp(ns, "ok", {"content": "kept out"}),
                     PutOp(("memories", "*"), "k", {"content": "x"})])
    with pytest.raises(StoreInputError) as refused:
        store.batch([PutOp(ns, "ok", {"content": "kept out"}), ListNamespacesOp(limit=0)])
    assert refused.value.field == "limit"
    assert store.search(ns) == []


def test_abatch_in_order(base_url: str) -> None:
    user = _user()
    ns = ("memories", user)

    async def scenario() -> list[Any]:
        async with AsyncMemorydClient(base_url, KEY_A) as aclient:
            store = MemorydStore(aclient=aclient)
            return await store.abatch([
                PutOp(ns, "lang", {"content": "I am learning Portuguese", "level": "A2"}),
                GetOp(ns, "lang"),
                SearchOp(ns, query="which language am I learning?", limit=1),
                ListNamespacesOp(match_conditions=(MatchCondition("prefix", ns),)),
                PutOp(ns, "lang", None),
                GetOp(ns, "lang"),
            ])

    put, got, hits, spaces, deleted, gone = asyncio.run(scenario())
    assert put is None and deleted is None and gone is None
    assert got.value == {"content": "I am learning Portuguese", "level": "A2"}
    assert [h.key for h in hits] == ["lang"] and 0 <= hits[0].score <= 1
    assert spaces == [ns]


class _State(TypedDict):
    user: str
    fact: str
    recalled: list[str]


def test_graph_node_writes_and_reads_through_injected_store(store: MemorydStore) -> None:
    def remember(state: _State, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        runtime.store.put(("memories", state["user"]), "fact", {"content": state["fact"]})
        return {}

    def recall(state: _State, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        hits = runtime.store.search(("memories", state["user"]), query="what do I collect?")
        return {"recalled": [h.value["content"] for h in hits]}

    builder = StateGraph(_State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    graph = builder.compile(store=store)

    user = _user()
    out = graph.invoke({"user": user, "fact": "I collect vintage fountain pens",
                        "recalled": []})
    assert out["recalled"][0] == "I collect vintage fountain pens"


def test_langmem_tools_manage_and_search(store: MemorydStore, client: MemorydClient) -> None:
    from langmem import create_manage_memory_tool, create_search_memory_tool

    manage = create_manage_memory_tool(namespace=("memories", "{user_id}"))
    search = create_search_memory_tool(namespace=("memories", "{user_id}"))

    class State(TypedDict):
        log: list[str]

    def agent(state: State) -> dict[str, Any]:
        log = [manage.invoke({"content": "I am allergic to peanuts", "action": "create"})]
        memory_id = log[0].split()[-1]
        found = search.invoke({"query": "what food allergy do I have?"})
        log += [memory_id, found]
        log.append(manage.invoke({"content": "I am allergic to peanuts and cashews",
                                  "action": "update", "id": memory_id}))
        log.append(search.invoke({"query": "allergy", "limit": 5}))
        log.append(manage.invoke({"action": "delete", "id": memory_id}))
        return {"log": log}

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    graph = builder.compile(store=store)
    user = _user()
    created, memory_id, found, updated, found_after, deleted = graph.invoke(
        {"log": []}, {"configurable": {"user_id": user}})["log"]

    assert created == f"created memory {memory_id}"
    assert memory_id in found and "allergic to peanuts" in found
    assert updated == f"updated memory {memory_id}"
    assert "peanuts and cashews" in found_after and found_after.count(memory_id) == 1
    assert deleted == f"Deleted memory {memory_id}"
    assert client.list(user).items == []


def test_memories_from_chat_are_items_keyed_by_id(store: MemorydStore,
                                                  client: MemorydClient) -> None:
    user = _user()
    job = client.add_interaction(user, [{"role": "user", "content": "I play the cello"}],
                                 extract="raw")
    client.wait(job.job_id)
    [memory] = client.list(user).items
    ns = ("memories", user)
    [hit] = store.search(ns, query="which instrument do I play?", limit=1)
    # Its value is its content with where it came from: the message and its job.
    assert (hit.key, hit.value["content"], hit.value["kind"]) == (
        memory.id, "I play the cello", "episode")
    [source] = hit.value["sources"]
    assert (source["role"], source["message_index"], source["job_id"]) == (
        "user", 0, job.job_id)
    item = store.get(ns, memory.id)
    assert item is not None and item.value == hit.value
    # A put under its id replaces it with a named slot of that key.
    store.put(ns, memory.id, {"content": "I play the cello and the piano"})
    [now] = client.list(user).items
    assert (now.key, now.content) == (memory.id, "I play the cello and the piano")
    store.delete(ns, memory.id)
    assert client.list(user).items == []


def test_the_documented_snippet_runs(base_url: str, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """docs/integrations.md's LangGraph block, run as written but for a user of its own."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    section = text.split("## LangGraph / LangMem", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    user = _user()
    monkeypatch.setenv("MEMORYD_URL", base_url)
    monkeypatch.setenv("MEMORYD_API_KEY", KEY_A)
    exec(compile(code.replace('"alice"', repr(user)), "integrations.md", "exec"), {})
    out = capsys.readouterr().out
    assert "{'content': 'Alice is vegetarian'}" in out and "Porto" in out
    with MemorydClient(base_url, KEY_A) as client:
        assert len(client.list(user).items) == 2


def test_without_langgraph_the_import_names_the_extra() -> None:
    blocked = ("import sys\n"
               "for name in ('langgraph', 'langgraph.store', 'langgraph.store.base'):\n"
               "    sys.modules[name] = None\n"
               "import memoryd.integrations.langgraph_store\n")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True,
                          cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)
    assert done.returncode != 0
    assert "ImportError" in done.stderr and "pip install 'memoryd[langgraph]'" in done.stderr


def test_path_like_ids_are_never_namespaces(store: MemorydStore, api: Any) -> None:
    """`a/../b` was a user id the REST API stored and `list_namespaces` then listed; ids now
    refuse dot segments and invisible characters, and the store lists only the users and
    projects it can address again."""
    base = _user()
    for bad in (f"{base}/../b", "..", f"{base}\u202e\u200b"):
        response = api.post("/v1/memories", json={"user_id": bad, "content": "I like tea"})
        assert response.status_code == 422, response.text
        assert response.json()["error"]["field"] == "user_id"
    # Still a valid REST id, but not one a namespace element may spell: not listed.
    dotted = f"{base}.v2"
    saved = api.post("/v1/memories", params={"wait": 20},
                     json={"user_id": dotted, "content": "I like tea", "project": "p.1"})
    assert saved.status_code == 201, saved.text
    listed = store.list_namespaces(limit=1000)
    assert all(".." not in element and "\u202e" not in element
               for namespace in listed for element in namespace)
    assert not [ns for ns in listed if any(base in element for element in ns)], listed

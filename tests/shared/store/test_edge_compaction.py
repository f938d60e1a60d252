"""Compacting the embedded shard: deleted points and erased audit text leave every file, the
live points stay whole, and a compaction a crash cut short is finished or undone on open."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from memoryd.records.models import AuditEvent, Owner
from memoryd.store import DENSE, VectorQuery
from memoryd.store.edge import EdgeStore
from tests.support.points import DIM, point
from tests.support.points import unit_vector as vec

ALICE = Owner(tenant_id="t1", user_id="alice")
BOB = Owner(tenant_id="t1", user_id="bob")


def files_with(root: Path, needle: str) -> list[str]:
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if needle.encode() in path.read_bytes():
                found.append(str(path.relative_to(root)))
    return found


def filled(root: Path) -> tuple[EdgeStore, list[str]]:
    store = EdgeStore(root, "memories")
    store.ensure_schema("test-model", DIM)
    gone = [point(ALICE, f"qxgone secret number {i}", i) for i in range(6)]
    kept = [point(BOB, f"qxkept fact number {i}", 10 + i) for i in range(4)]
    store.upsert(ALICE, gone)
    store.upsert(BOB, kept)
    store.append_audit([AuditEvent(memory_id=p.id, tenant_id="t1", user_id="alice",
                                   event="ADD", after=str(p.payload["content"]))
                        for p in gone])
    store.delete(ALICE, [p.id for p in gone])
    store.erase_audit_content(ALICE, [p.id for p in gone])
    store.flush()
    return store, [p.id for p in kept]


def test_compaction_leaves_no_deleted_byte_and_keeps_the_live_points(tmp_path: Path) -> None:
    store, kept = filled(tmp_path)
    try:
        assert files_with(tmp_path, "qxgone")  # the WAL and segments still hold them
        report = store.compact()
        assert report["points"] == {"memories": 4, "memories_audit": 6 + 1}  # + the meta record
        assert files_with(tmp_path, "qxgone") == []
        assert files_with(tmp_path, "qxkept")
        assert sorted(p.id for p in store.get(BOB, kept)) == sorted(kept)
        [hits] = store.search_many(BOB, [], [VectorQuery(DENSE, vec(10))], 1)
        assert hits[0].payload["content"] == "qxkept fact number 0"
        # The compacted shard takes writes and survives a reopen.
        store.upsert(BOB, [point(BOB, "qxkept later", 20)])
    finally:
        store.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [
        "memories", "memories_audit"]

    # A compaction cut short after its copy was complete: `.ready` replaces the shard and
    # `.old` goes; one cut short during its copy: the partial copy is dropped.
    shard = tmp_path / "memories"
    shutil.copytree(shard, tmp_path / "memories.ready")
    shutil.move(shard, tmp_path / "memories.old")
    shutil.copytree(tmp_path / "memories.ready", tmp_path / "memories_audit.compacting")
    again = EdgeStore(tmp_path, "memories")
    again.ensure_schema("test-model", DIM)
    try:
        assert again.count(BOB) == 5 and again.count(ALICE) == 0
    finally:
        again.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [
        "memories", "memories_audit"]


def nested(depth: int) -> dict[str, object]:
    """A JSON object `depth` levels deep: past the engine's decoder limit (128)."""
    inner: dict[str, object] = {"leaf": "qxpoison"}
    for _ in range(depth):
        inner = {"a": inner}
    return inner


def test_compaction_skips_and_reports_a_point_it_cannot_read(tmp_path: Path) -> None:
    """A point whose payload cannot be decoded (metadata nested 127 deep, written before
    metadata was bounded) used to stop every compaction, so everyone's forgotten text
    stayed on disk. Now it is left out, reported, and the rest is compacted."""
    store, kept = filled(tmp_path)
    mallory = Owner(tenant_id="t2", user_id="mallory")
    poisoned = point(mallory, "qxpoisoned content", 30)
    poisoned.payload["metadata"] = nested(127)
    try:
        store.upsert(mallory, [poisoned])
        store.flush()
        report = store.compact()
        assert report["unreadable"] == {"memories": [poisoned.id]}
        assert report["points"]["memories"] == 4
        assert files_with(tmp_path, "qxgone") == []
        assert sorted(p.id for p in store.get(BOB, kept)) == sorted(kept)
        # A second compaction finds nothing left to skip.
        assert "unreadable" not in store.compact()
    finally:
        store.close()

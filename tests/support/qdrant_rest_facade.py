"""A stand-in for a Qdrant server: Qdrant's REST protocol on 127.0.0.1, answered by the
real Qdrant engine of qdrant-client's local mode.

No Qdrant server can run here (no container runtime), yet the store-unreachable scenario
needs one that can go away and come back on the same address while the real qdrant-client
talks HTTP to it. Only the calls `shared/store/client.py` makes are served. stop() closes
the port (connection refused); start() reopens it with the data intact.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from qdrant_client import QdrantClient
from qdrant_client import models as qm

from tests.support.local_http import ReopenableServer

VERSION = "1.19.0"
_ROUTES: list[tuple[str, str, str]] = [
    ("GET", r"/", "root"),
    ("GET", r"/collections", "collections"),
    ("GET", r"/aliases", "aliases"),
    ("POST", r"/collections/aliases", "update_aliases"),
    ("DELETE", r"/collections/(?P<c>[^/]+)", "drop"),
    ("POST", r"/collections/(?P<c>[^/]+)/facet", "facet"),
    ("GET", r"/collections/(?P<c>[^/]+)/exists", "exists"),
    ("GET", r"/collections/(?P<c>[^/]+)", "info"),
    ("PUT", r"/collections/(?P<c>[^/]+)", "create"),
    ("PUT", r"/collections/(?P<c>[^/]+)/index", "index"),
    ("POST", r"/collections/(?P<c>[^/]+)/points", "retrieve"),
    ("PUT", r"/collections/(?P<c>[^/]+)/points", "upsert"),
    ("POST", r"/collections/(?P<c>[^/]+)/points/scroll", "scroll"),
    ("POST", r"/collections/(?P<c>[^/]+)/points/query/batch", "query_batch"),
    ("POST", r"/collections/(?P<c>[^/]+)/points/count", "count"),
    ("POST", r"/collections/(?P<c>[^/]+)/points/payload", "set_payload"),
    ("POST", r"/collections/(?P<c>[^/]+)/points/delete", "delete"),
]
_DONE = {"operation_id": 0, "status": "completed"}


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_dump(v) for v in value]
    return value


class QdrantRestFacade(ReopenableServer):
    def __init__(self, path: Path, version: str = VERSION) -> None:
        super().__init__()
        self.version = version  # what the root answers as the server's version
        self.local = QdrantClient(path=str(path))
        self._lock = threading.Lock()  # local mode is not thread-safe
        # What the engine did, so a bench can tell whether this stand-in was its bottleneck:
        # API calls answered, seconds spent in the engine (one at a time, under the lock),
        # and seconds calls waited for the lock (summed over calls).
        self.requests = 0
        self.busy_s = 0.0
        self.waited_s = 0.0

    def load(self) -> dict[str, float]:
        """The counters above, as they stand."""
        with self._lock:
            return {"requests": self.requests, "busy_s": self.busy_s,
                    "waited_s": self.waited_s}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def handle(self, op: str, c: str, body: Any) -> Any:
        db = self.local
        if op == "root":
            return {"title": "qdrant - vector search engine", "version": self.version}
        if op == "collections":
            return _dump(db.get_collections())
        if op == "aliases":
            return _dump(db.get_aliases())
        if op == "update_aliases":
            db.update_collection_aliases(
                qm.ChangeAliasesOperation.model_validate(body).actions)
            return True
        if op == "drop":
            return db.delete_collection(c)
        if op == "facet":
            facet = qm.FacetRequest.model_validate(body)
            return _dump(db.facet(c, key=facet.key, facet_filter=facet.filter,
                                  limit=facet.limit or 10, exact=bool(facet.exact)))
        if op == "exists":
            return {"exists": db.collection_exists(c)}
        if op == "info":
            return _dump(db.get_collection(c))
        if op == "create":
            spec = qm.CreateCollection.model_validate(body)
            db.create_collection(c, vectors_config=spec.vectors,
                                 sparse_vectors_config=spec.sparse_vectors)
            return True
        if op == "index":
            return _DONE  # local mode has no payload indexes
        if op == "retrieve":
            req = qm.PointRequest.model_validate(body)
            return _dump(db.retrieve(c, req.ids, with_payload=req.with_payload or False,
                                     with_vectors=req.with_vector or False))
        if op == "upsert":
            db.upsert(c, qm.PointsList.model_validate(body).points, wait=True)
            return _DONE
        if op == "scroll":
            scroll = qm.ScrollRequest.model_validate(body)
            records, offset = db.scroll(
                c, scroll_filter=scroll.filter, limit=scroll.limit or 10, offset=scroll.offset,
                with_payload=scroll.with_payload or False,
                with_vectors=scroll.with_vector or False, order_by=scroll.order_by,
            )
            return {"points": _dump(records), "next_page_offset": offset}
        if op == "query_batch":
            batch = qm.QueryRequestBatch.model_validate(body)
            return _dump(db.query_batch_points(c, batch.searches))
        if op == "count":
            count = qm.CountRequest.model_validate(body)
            return _dump(db.count(c, count_filter=count.filter, exact=True))
        if op == "set_payload":
            sp = qm.SetPayload.model_validate(body)
            db.set_payload(c, payload=sp.payload, points=sp.filter or sp.points or [], wait=True)
            return _DONE
        if op == "delete":
            selector: Any = (qm.FilterSelector.model_validate(body) if "filter" in body
                             else qm.PointIdsList.model_validate(body))
            db.delete(c, points_selector=selector, wait=True)
            return _DONE
        raise LookupError(op)

    def start(self) -> QdrantRestFacade:
        facade = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                path = self.path.split("?", 1)[0].rstrip("/") or "/"
                status = 404
                payload: Any = {"status": {"error": f"no route {method} {path}"}}
                for verb, pattern, op in _ROUTES:
                    match = re.fullmatch(pattern, path)
                    if verb == method and match:
                        try:
                            asked = time.monotonic()
                            with facade._lock:
                                began = time.monotonic()
                                try:
                                    result = facade.handle(op, match.groupdict().get("c", ""),
                                                           json.loads(raw) if raw else None)
                                finally:
                                    facade.requests += 1
                                    facade.busy_s += time.monotonic() - began
                                    facade.waited_s += began - asked
                            # The root answers bare version info; every API call wraps.
                            status, payload = 200, (result if op == "root" else {
                                "result": result, "status": "ok", "time": 0.0})
                        except Exception as exc:  # the engine's refusal, as Qdrant reports it
                            status, payload = 400, {"status": {"error": str(exc)}}
                        break
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")  # stop() leaves no live socket
                self.close_connection = True
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_PUT(self) -> None:
                self._serve("PUT")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.open(Handler)
        return self

    def close(self) -> None:
        self.stop()
        self.local.close()

"""Stand-ins for services that cannot run here, shared by the tests and by `ops/` drills and
benches: an HTTP server that can close and reopen its port (`local_http`), and Qdrant's REST
API answered by qdrant-client's local-mode engine (`qdrant_rest_facade`, and
`qdrant_facade_serve` to run it as a process of its own)."""

"""The process's long-lived resources, built once from `Settings`.

In embedded mode the gateway and the in-process worker share one `Runtime`,
which is what lets them share the one Qdrant Edge shard a process may open.
"""

from __future__ import annotations

import gc
import threading
from functools import cached_property

import redis
from celery import Celery

from memoryd.embeddings import make_embedder
from memoryd.embeddings.e5.threads import limit_blas_threads
from memoryd.index.generations import IndexRouter, View
from memoryd.index.reindex import Reindexing
from memoryd.index.write_fence import WriteFence
from memoryd.jobs.celery_app import configure as configure_celery
from memoryd.jobs.celery_app import create_app as create_celery_app
from memoryd.jobs.job_store import JobStore
from memoryd.jobs.lanes import Lanes, Shares
from memoryd.llm import ChatClient, make_chat_client, make_judge_client
from memoryd.memories.erasure import Erasure
from memoryd.memories.reads import ReadPath
from memoryd.memories.writes import MemoryWriter
from memoryd.platform import failpoints
from memoryd.platform.settings import Settings
from memoryd.platform.text_pace import TextPacer
from memoryd.proxy.upstream import Upstream
from memoryd.retrieval.access import AccessCounter
from memoryd.retrieval.bridge import lexicon
from memoryd.retrieval.keywords import BRIDGE_WEIGHT
from memoryd.retrieval.rerank import HttpReranker
from memoryd.retrieval.scoring import Weights
from memoryd.store import make_store
from memoryd.webhooks.service import Webhooks


class Runtime:
    def __init__(self, settings: Settings, celery: Celery | None = None) -> None:
        """`celery`: the process's app when tasks are registered on it (a worker's, the
        embedded stack's); without one, a gateway gets an app of its own to publish with."""
        self.settings = settings
        self._celery_app = celery
        failpoints.arm(settings)
        limit_blas_threads()  # every gateway and worker process builds one; idempotent
        self._index_lock = threading.Lock()
        self._index: IndexRouter | None = None

    @cached_property
    def redis(self) -> redis.Redis:
        return redis.Redis.from_url(
            self.settings.redis_url,
            socket_timeout=self.settings.redis_timeout_s,
            socket_connect_timeout=self.settings.redis_timeout_s,
            health_check_interval=30,
        )

    @cached_property
    def jobs(self) -> JobStore:
        return JobStore(self.redis, self.settings.job_ttl_s, self.settings.pending_job_ttl_s)

    @cached_property
    def lanes(self) -> Lanes:
        s = self.settings
        return Lanes(self.redis, Shares(s.tenant_write_share, s.user_write_share,
                                        s.pending_job_ttl_s))

    @cached_property
    def fence(self) -> WriteFence:
        s = self.settings
        return WriteFence(self.redis, s.job_time_limit_s + 30.0, s.user_lock_wait_s)

    @cached_property
    def access(self) -> AccessCounter:
        return AccessCounter(self.redis, self.celery, self.settings.search_access_flush_s)

    @cached_property
    def reindexing(self) -> Reindexing:
        return Reindexing(self.index, self.fence, self.jobs, self.redis, self.celery,
                          self.settings)

    @cached_property
    def erasure(self) -> Erasure:
        return Erasure(self.redis, lambda: self.index.compact(), self.settings.erasure_compaction_s)

    def read_path(self) -> ReadPath:
        """The read path of one request, on the index view active (or pinned) now."""
        view = self.index.view()
        return ReadPath(view.store, view.query_embedder, view.embedder.name,
                        self.search_weights, self.settings, lambda: self.reranker)

    def writer(self, view: View) -> MemoryWriter:
        """The writes of one task, on the index view it resolved (inside a write region)."""
        return MemoryWriter(view, self.redis, self.settings, self.erasure, self.text_pacer)

    @cached_property
    def text_pacer(self) -> TextPacer:
        """The process's one pacer of per-text passes: every job's writer takes turns on it
        (shared/platform/text_pace.py)."""
        return TextPacer(self.settings.text_pace_share, self.settings.text_pace_burst_s)

    @cached_property
    def webhooks(self) -> Webhooks:
        return Webhooks(self.redis, self.celery, self.settings)

    @cached_property
    def reranker(self) -> HttpReranker:
        return HttpReranker(self.settings)

    @cached_property
    def upstream(self) -> Upstream:
        """The chat-completions proxy's upstream client; the gateway builds it and closes it
        on shutdown (`api/app.py`), on its event loop."""
        return Upstream(self.settings)

    @cached_property
    def llm(self) -> ChatClient | None:
        return make_chat_client(self.settings)

    @cached_property
    def judge_llm(self) -> ChatClient | None:
        return make_judge_client(self.settings)

    @cached_property
    def search_weights(self) -> Weights:
        s = self.settings
        return Weights(
            dense=s.search_dense_weight,
            keyword_half=s.search_keyword_half,
            recency=s.search_recency_weight, importance=s.search_importance_weight,
            access=s.search_access_weight, time=s.search_time_weight,
            half_life_days=s.search_half_life_days,
            rrf_k=s.search_rrf_k, fusion=s.search_fusion,
            neighbour=s.search_neighbour_weight, context_hits=s.search_context_hits,
            bridge=BRIDGE_WEIGHT if s.search_bridge else 1.0,
            assistant=s.search_assistant_weight,
        )

    @property
    def index_if_open(self) -> IndexRouter | None:
        return self._index

    @property
    def index(self) -> IndexRouter:
        """The store's generations: each request and task resolves its view from here
        (shared/index/generations.py)."""
        if self._index is None:
            with self._index_lock:
                if self._index is None:
                    index = IndexRouter(
                        make_store(self.settings),
                        lambda spec: make_embedder(spec, self.settings),
                        lambda: self.fence,
                        self.settings.query_cache_size,
                    )
                    index.open(make_embedder(self.settings.embedder, self.settings))
                    self._index = index
        return self._index

    @cached_property
    def celery(self) -> Celery:
        if self._celery_app is None:
            return create_celery_app(self.settings)
        configure_celery(self._celery_app, self.settings)
        return self._celery_app

    def close(self) -> None:
        if "access" in self.__dict__:
            self.access.close()  # before Redis closes: it pushes the last window's counts
        if self._index is not None:
            self._index.close()
            self._index = None
        if "redis" in self.__dict__:
            self.redis.close()
        if "reranker" in self.__dict__:
            self.reranker.close()
        if "webhooks" in self.__dict__:
            self.webhooks.close()


def settle_for_serving(rt: Runtime) -> None:
    """Last step before a gateway takes requests."""
    # The configured model, not the index's: opening the index here would take a
    # local-mode store's lock before the workers that write to it start. In-process models
    # are one per process, so this warms the one searches use.
    embedder = make_embedder(rt.settings.embedder, rt.settings)
    try:
        embedder.warm_up()
    finally:
        embedder.close()  # a remote model's client; an in-process model stays loaded
    if rt.settings.search_bridge:
        lexicon()  # the keyword bridge's index (loaded or built), else the first search waits
    # Everything built so far lives as long as the process: frozen, it is out of the cyclic
    # collector's sight, whose full passes over it would pause searches (docs/decisions/).
    gc.freeze()



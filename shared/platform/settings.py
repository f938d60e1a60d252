"""One typed settings object for every process (gateway, workers, CLI).

Values come from, first to last: arguments (the CLI's options), `MEMORYD_*` environment
variables, then a dotenv file (`env_file_path`), then the defaults here. `describe` says
which of them gave each value (`memoryd config`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from dotenv import dotenv_values
from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from memoryd.platform.logs import mask_url_passwords

PLACEHOLDER_SECRETS = {"changeme", "change-me", "secret", "placeholder", "xxx"}


ENV_PREFIX = "MEMORYD_"
# Names the dotenv file to read instead of `./.env` (`memoryd --env-file` sets it, so the
# processes the CLI starts read the same file). Not a setting: it says where settings are.
ENV_FILE_VARIABLE = "MEMORYD_ENV_FILE"


def default_data_dir() -> Path:
    return Path.home() / ".memoryd"


def env_file_path() -> Path | None:
    """The dotenv file settings are read from: `$MEMORYD_ENV_FILE` when set (a file that
    does not exist raises `FileNotFoundError`, since the user named it; `/dev/null` names
    none), else `.env` in the working directory when there is one, else None. Read at
    every `Settings()`, so a process that changes directory or the variable sees the
    change."""
    named = os.environ.get(ENV_FILE_VARIABLE, "").strip()
    if named == os.devnull:  # `--env-file /dev/null`: no file, not even ./.env
        return None
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"{ENV_FILE_VARIABLE} names {path}, which is not a file")
        return path.resolve()
    try:
        local = Path.cwd() / ".env"
    except OSError:  # the working directory was removed: there is no ./.env
        return None
    return local if local.is_file() else None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore",
                                      env_file_encoding="utf-8")

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The dotenv file is chosen when the settings are built (env_file_path), not when the
        # class is defined; the environment comes before it, so a variable always wins.
        dotenv = DotEnvSettingsSource(settings_cls, env_file=env_file_path())
        return init_settings, env_settings, dotenv, file_secret_settings

    env: Literal["development", "production"] = "development"
    data_dir: Path = Field(default_factory=default_data_dir)
    host: str = "127.0.0.1"
    port: int = Field(8420, ge=1, le=65535)

    # Auth: "key=tenant,key2=tenant2". Unset in embedded mode: a key is generated.
    api_keys: SecretStr | None = None

    # Broker and job state.
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_timeout_s: float = Field(5.0, gt=0)
    start_redis: bool = True  # embedded mode only: spawn one when redis_url is unreachable

    # Store: Qdrant Edge under data_dir unless a Qdrant server (or a qdrant-client
    # local path, used by tests) is configured.
    qdrant_url: str | None = None
    qdrant_api_key: SecretStr | None = None
    qdrant_local_path: Path | None = None
    qdrant_timeout_s: float = Field(10.0, gt=0)
    collection: str = "memories"
    edge_search_threads: int = Field(1, ge=1, le=64)  # the embedded shard's search pool
    # Points whose scoring fields the embedded store keeps in memory (shared/store/
    # scoring_table.py; about 0.2 KB each); 0 turns it off.
    edge_field_cache_points: int = Field(200_000, ge=0)

    # Embeddings.
    embedder: str = "e5-small"
    # e5-small's engine (docs/e5-engine.md): "native" compiles the wheel's own C source with
    # memoryd's kernels for this CPU once, "prebuilt" uses the wheel's binary. "host" is
    # the former name of "native" and still accepted.
    e5_engine: Literal["native", "prebuilt"] = "native"
    engine_cache_dir: Path | None = None  # default: $XDG_CACHE_HOME/memoryd/engines
    # How much lower than the request threads the in-process model's lanes run (a nice
    # increment; shared/embeddings/e5/lanes.py); 0 keeps them equal. Unset: 10 where the
    # kernel groups processes by session (autogroup), else 0.
    model_lane_nice: int | None = Field(None, ge=0, le=19)
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: SecretStr | None = None
    ollama_base_url: str = "http://127.0.0.1:11434"
    embed_timeout_s: float = Field(30.0, gt=0)
    embed_batch_size: int = Field(32, ge=1, le=2048)
    query_cache_size: int = Field(1024, ge=0)

    # Retrieval: fusion of dense and keyword relevance, then boosts
    # (see shared/retrieval/scoring.py).
    search_fusion: Literal["evidence", "linear", "rrf"] = "evidence"
    search_dense_weight: float = Field(0.3, ge=0, le=1)  # the fixed share of "linear"
    search_keyword_half: float = Field(11.0, gt=0)  # docs/decisions/0029
    search_rrf_k: int = Field(60, ge=1)
    search_recency_weight: float = Field(0.1, ge=0)
    search_importance_weight: float = Field(0.1, ge=0)
    search_access_weight: float = Field(0.05, ge=0)
    search_time_weight: float = Field(0.3, ge=0)  # a query's time cues ("last week", "now")
    search_half_life_days: float = Field(30.0, gt=0)
    search_record_access: bool = True  # count hits after each search (shared/retrieval/access.py)
    search_access_flush_s: float = Field(30.0, gt=0, le=300)
    search_neighbour_weight: float = Field(0.2, ge=0, le=1)
    search_context_hits: int = Field(2, ge=0, le=10)
    # The share of its relevance an assistant's turn keeps when a query asks about the
    # user's own words ("where did I meet Sophia?"); 1 weighs both sides alike
    # (shared/retrieval/speaker_cues.py, docs/decisions/0034).
    search_assistant_weight: float = Field(0.7, ge=0, le=1)
    # Keyword search across Chinese and English: a query's words in the other script from
    # the CC-CEDICT dictionary (shared/retrieval/bridge.py), weighted below exact words.
    search_bridge: bool = True
    # How deep each ranked list (dense, keyword) goes at top_k 10, in proportion beyond: fewer
    # candidates are faster and recall less (docs/retrieval.md).
    search_depth: int = Field(100, ge=10, le=1000)
    # Optional rerank (`rerank: true`): a reranking server speaking the Cohere/Jina
    # `POST {url}/rerank` protocol (vLLM, llama.cpp --reranking, Infinity, Xinference).
    rerank_url: str | None = None
    rerank_model: str = "reranker"
    rerank_api_key: SecretStr | None = None
    rerank_depth: int = Field(20, ge=1, le=100)
    rerank_timeout_s: float = Field(5.0, gt=0)

    # Write policy.
    # Cosine at or above which a new memory is a semantic duplicate. Unset: the embedder's
    # own default (e5-small's cosines run high, so it needs a higher bar; see writes.py).
    dedup_threshold: float | None = Field(None, gt=0, le=1)
    # A long memory is embedded in passages and searched by its best one (MaxSim), and a
    # fact by its topic reading too; off, each is embedded whole into one vector
    # (shared/embeddings/parts.py, shared/extraction/topics.py).
    long_memory_parts: bool = True
    user_lock_timeout_s: float = Field(30.0, gt=0)
    user_lock_wait_s: float = Field(20.0, gt=0)

    # Input limits.
    max_body_bytes: int = Field(1024 * 1024, ge=1024)
    max_message_bytes: int = Field(8192, ge=16)
    max_messages: int = Field(64, ge=1)
    max_content_chars: int = Field(8192, ge=16)
    max_tags: int = Field(32, ge=0)
    max_top_k: int = Field(100, ge=1)
    max_page_size: int = Field(200, ge=1)
    max_wait_s: float = Field(30.0, ge=0)
    # Read-your-writes (`after_jobs`, `consistency: fresh` on /v1/search and /v1/context):
    # the default wait for the awaited writes (capped by max_wait_s), and how long a write
    # stays on its user's pending list if its end is never recorded (a lost worker), so a
    # "fresh" read never waits on it for longer than that.
    fresh_wait_s: float = Field(5.0, ge=0)
    pending_job_ttl_s: int = Field(900, ge=1)

    # Task policy.
    worker_concurrency: int = Field(4, ge=1, le=64)
    task_max_retries: int = Field(6, ge=0)
    task_retry_backoff_max_s: int = Field(60, ge=1)
    # Retries while a dependency is unreachable (`*_unavailable`): with the backoff above,
    # 40 rides out an outage of about a quarter of an hour before the job fails.
    task_unavailable_max_retries: int = Field(40, ge=0)
    broker_visibility_timeout_s: int = Field(600, ge=30)
    job_ttl_s: int = Field(7 * 24 * 3600, ge=60)

    # LLM extraction (shared/llm, shared/memories/llm_extraction.py). Unset provider or
    # model: no LLM, and interactions default to rules extraction. The judge falls back to
    # the extractor.
    llm_provider: Literal["openai", "ollama"] | None = None
    llm_base_url: str | None = None  # default: OpenAI's API, or ollama_base_url
    llm_api_key: SecretStr | None = None
    llm_model: str | None = None
    llm_judge_provider: Literal["openai", "ollama"] | None = None
    llm_judge_base_url: str | None = None
    llm_judge_api_key: SecretStr | None = None
    llm_judge_model: str | None = None
    llm_json_mode: bool = True  # response_format / format: "json" where the provider has it
    llm_timeout_s: float = Field(60.0, gt=0)
    llm_connect_timeout_s: float = Field(5.0, gt=0)
    llm_parse_retries: int = Field(2, ge=0, le=5)  # re-asks after a reply that does not parse
    llm_min_confidence: float = Field(0.85, ge=0, le=1)
    llm_max_existing: int = Field(100, ge=0, le=500)  # similar memories shown to the model
    llm_rate_limit: str | None = None  # Celery rate limit per worker, e.g. "60/m"
    llm_worker_concurrency: int = Field(2, ge=1, le=64)  # embedded mode: threads on the llm queue
    # Conflict band on the cosine to the nearest memory: [low, high) goes to the judge. Unset:
    # per embedder (low 0.80, or 0.85 for e5-small, whose cosines run high; high = dedup bar).
    conflict_low: float | None = Field(None, gt=0, le=1)
    conflict_high: float | None = Field(None, gt=0, le=1)
    # Fault drills (shared/platform/failpoints.py): off unless named.
    failpoints: str = ""
    failpoint_dir: Path | None = None
    failpoint_pause_s: float = Field(120.0, ge=0)

    log_level: str = "INFO"
    # Log lines on stderr: "json" (one object a line, for collectors), "console" (readable
    # lines, structlog's console renderer), "auto": console when stderr is a terminal, else
    # JSON. `log_json` is the former switch; when set it decides (true: json, false: console).
    log_format: Literal["auto", "json", "console"] = "auto"
    log_json: bool | None = None

    # Operations: /metrics (open unless a token is set; see metrics_open for server mode),
    # import limits.
    metrics_token: SecretStr | None = None
    metrics_count_ttl_s: float = Field(30.0, ge=0)  # stored-memory count is cached this long
    import_max_records: int = Field(1000, ge=1, le=100_000)  # records per POST /v1/import
    # Per-API-key rate limit (a token bucket in Redis): refill per second, bucket size.
    # 0 turns it off.
    rate_limit_per_s: float = Field(500.0, ge=0)
    rate_limit_burst: int = Field(1000, ge=1)
    # Celery task events (what Flower shows). None: on for server-mode workers
    # (`memoryd worker`), off for the embedded worker.
    task_events: bool | None = None
    # Retention: memories older than this (by created_at) are hidden, then purged.
    # None: kept until deleted. Per-tenant overrides: "t1=30,t2=365".
    retention_days: float | None = Field(None, gt=0)
    tenant_retention_days: str | None = None
    retention_purge_interval_s: float = Field(3600.0, ge=1)
    # Text passes (issue 19, hostile text): the share of wall time a process's redaction and
    # rules may take, sustained, beyond a burst of text_pace_burst_s (1: unpaced).
    text_pace_share: float = Field(0.25, gt=0, le=1)
    text_pace_burst_s: float = Field(0.05, ge=0)

    # Forget and erasure (shared/jobs/forgetting.py, shared/memories/erasure.py): forgotten
    # text is gone from every file under data_dir within this many seconds of the forget (plus the
    # compaction's own run); 0 compacts at the end of every forget. Capped at half the
    # broker visibility timeout (the compaction waits in the queue as a delayed task).
    erasure_compaction_s: float = Field(300.0, ge=0)

    # Issue 19 "ops" slice: operator credential, reindex allow-list, /metrics in server mode.
    # Operator keys (comma-separated) reach only the store-wide routes (/v1/admin/*); tenant
    # keys never do. Unset in embedded mode: one is generated into <data_dir>/operator-key.
    operator_keys: SecretStr | None = None
    # The embedders POST /v1/admin/reindex may switch to besides the configured `embedder`
    # (comma-separated specs, as for `embedder`). The default lists the bundled models,
    # which name no URL and no path; an empty value allows only the configured one.
    reindex_embedders: str | None = "e5-small,use"
    # Server mode (`memoryd serve`): /metrics needs MEMORYD_METRICS_TOKEN unless this is true.
    metrics_open: bool = False

    # api (issue 19): `?wait=` and job reads wait on the event loop (api/waits.py).
    max_waits_per_key: int = Field(64, ge=0)  # at once per API key; beyond: the state now (202)
    wait_poll_s: float = Field(2.0, gt=0, le=10)  # a wait's re-read between end notifications
    # MCP tools (issue 21): how long a write tool waits for its job before answering with
    # the job alone (`job_status` reads it later); at most the API's `?wait=` bound.
    mcp_wait_s: float = Field(5.0, ge=0, le=30)

    # Workers (issue 19: time limits, durable accept, quick restarts, bulk queue).
    # Every job's soft limit raises in it; at the hard limit it fails with `time_limit`
    # and its worker capacity is replaced (every pool kind, shared/jobs/time_limits.py).
    job_soft_time_limit_s: float = Field(120.0, gt=0)
    job_time_limit_s: float = Field(150.0, gt=0)
    # A running job holds a lease this long, renewed while it runs: a second delivery of
    # it waits instead of running beside it, and a dead holder frees it within this time.
    job_lease_s: float = Field(15.0, ge=1)
    # Graceful stop of the embedded worker: running jobs get this long to finish; then
    # every message it took and did not finish goes back to its queue at once.
    worker_stop_grace_s: float = Field(10.0, ge=0)
    # The embedded Redis's AOF fsync: "everysec" may lose about a second of accepted jobs
    # on a host crash, "always" none (each write waits for the disk).
    redis_appendfsync: Literal["everysec", "always"] = "everysec"
    # Embedded mode: threads on the bulk queue (imports, backfill interactions, re-embedding,
    # and a tenant's writes beyond its share), apart from the threads that run saves, edits,
    # forgets and ordinary interactions. Two, one per background model lane (shared/
    # embeddings/e5/lanes.py), as compose's `bulk` service runs: with one, a chat server's
    # burst (one tenant, its writes past the share) embedded on one lane, half the cores
    # (docs/decisions/0037-two-bulk-threads.md).
    bulk_worker_concurrency: int = Field(2, ge=1, le=64)
    # Fair shares of the memory queue (shared/jobs/lanes.py): the writes (saves, edits,
    # deletions, interactions) one tenant, and one user, may hold there at once, queued or
    # running; beyond that they run on the bulk queue's workers, unmarked. Keep the tenant
    # share below the memory queue's threads (`worker_concurrency` times the workers on
    # it), so another tenant's write always finds one free.
    tenant_write_share: int = Field(2, ge=1, le=10_000)
    user_write_share: int = Field(1, ge=1, le=10_000)

    # Webhooks (shared/webhooks/): deliveries run on the `webhooks` queue, each attempt
    # within a short connect and read timeout, retried with exponential backoff
    # (base * 2^(attempt-1), capped) up to `webhook_max_attempts` attempts.
    webhook_connect_timeout_s: float = Field(3.0, gt=0, le=30)
    webhook_timeout_s: float = Field(10.0, gt=0, le=60)  # the whole attempt, read included
    webhook_max_attempts: int = Field(8, ge=1, le=20)
    webhook_backoff_base_s: float = Field(5.0, gt=0)
    webhook_backoff_max_s: float = Field(300.0, gt=0)
    webhook_max_endpoints: int = Field(20, ge=1, le=1000)  # per tenant
    webhook_deliveries_kept: int = Field(100, ge=1, le=10_000)  # per endpoint, newest kept
    webhook_delivery_ttl_s: int = Field(7 * 24 * 3600, ge=60)
    # Endpoint hosts: loopback, link-local, unspecified, multicast and reserved addresses
    # are refused, and private ranges (RFC 1918, fc00::/7, 100.64/10) unless
    # `webhook_allow_private`; `webhook_allow_hosts` (comma-separated host names, addresses
    # or CIDR networks) allows any of them. Checked at registration and at every delivery.
    webhook_allow_private: bool = False
    webhook_allow_hosts: str = ""
    # Embedded mode: threads on the webhooks queue, apart from every other queue's.
    webhook_worker_concurrency: int = Field(2, ge=1, le=64)

    # OpenAI-compatible memory proxy (shared/proxy/): POST /v1/chat/completions
    # forwards to this base URL (ending in /v1, e.g. https://api.openai.com/v1 or
    # http://127.0.0.1:11434/v1); unset, the route answers 404 proxy_not_configured.
    proxy_upstream_url: str | None = None
    proxy_upstream_api_key: SecretStr | None = None  # sent upstream as Authorization: Bearer
    proxy_connect_timeout_s: float = Field(5.0, gt=0)
    proxy_timeout_s: float = Field(300.0, gt=0)  # between two bytes of the upstream's answer
    # Tokens the memory context may take in the prompt (per request: X-Memoryd-Token-Budget).
    proxy_token_budget: int = Field(512, ge=16, le=8000)
    # Read-your-writes: before its lookup the proxy waits up to this long for the user's
    # pending writes (an earlier turn still being stored); 0 reads at once.
    proxy_fresh_wait_s: float = Field(2.0, ge=0, le=60)

    @field_validator("proxy_upstream_url")
    @classmethod
    def _proxy_upstream_scheme(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// base URL, e.g. "
                             "https://api.openai.com/v1")
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, value: str) -> str:
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must be a redis:// or rediss:// URL")
        return value

    @field_validator("e5_engine", mode="before")
    @classmethod
    def _e5_engine_alias(cls, value: object) -> object:
        # Environments written for the former name keep working.
        return "native" if value == "host" else value

    @field_validator("tenant_retention_days")
    @classmethod
    def _tenant_retention(cls, value: str | None) -> str | None:
        if value is not None:
            parse_tenant_days(value)
        return value

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.job_soft_time_limit_s >= self.job_time_limit_s:
            raise ValueError("job_soft_time_limit_s must be below job_time_limit_s")
        # A message unacked past the visibility timeout is delivered again: every run and
        # every retry delay must end well before that.
        for name in ("task_retry_backoff_max_s", "job_time_limit_s", "webhook_backoff_max_s"):
            if getattr(self, name) >= self.broker_visibility_timeout_s:
                raise ValueError(f"{name} must be below broker_visibility_timeout_s")
        if self.env == "production":
            for name in ("api_keys", "openai_api_key", "qdrant_api_key", "llm_api_key",
                         "llm_judge_api_key", "operator_keys", "proxy_upstream_api_key"):
                secret = getattr(self, name)
                if secret is not None and _is_placeholder(secret.get_secret_value()):
                    raise ValueError(f"{name} holds a placeholder secret")
        return self

    @property
    def log_json_choice(self) -> bool | None:
        """What `configure_logging` takes: True JSON, False console, None decide by TTY."""
        if self.log_json is not None:
            return self.log_json
        return {"json": True, "console": False, "auto": None}[self.log_format]

    @property
    def store_backend(self) -> Literal["edge", "qdrant"]:
        return "qdrant" if (self.qdrant_url or self.qdrant_local_path) else "edge"

    @property
    def llm_configured(self) -> bool:
        return self.llm_provider is not None and bool(self.llm_model)

    @property
    def edge_path(self) -> Path:
        return self.data_dir / "qdrant-edge"

    @property
    def api_key_file(self) -> Path:
        return self.data_dir / "api-key"

    @property
    def operator_key_file(self) -> Path:
        return self.data_dir / "operator-key"


def parse_tenant_days(spec: str) -> dict[str, float]:
    """`t1=30,t2=365` → {tenant: days}; a bad pair raises ValueError naming it."""
    days: dict[str, float] = {}
    for pair in spec.split(","):
        if not pair.strip():
            continue
        tenant, sep, value = pair.strip().partition("=")
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not sep or not tenant.strip() or not number > 0:
            raise ValueError(f"{pair.strip()!r} is not tenant=days with days > 0")
        days[tenant.strip()] = number
    return days


def _is_placeholder(secret: str) -> bool:
    for pair in secret.split(","):
        key = pair.split("=", 1)[0].strip().lower()
        if key in PLACEHOLDER_SECRETS:
            return True
    return secret.strip().lower() in PLACEHOLDER_SECRETS


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


@dataclass(frozen=True)
class SettingShown:
    """One line of `memoryd config`: the variable, its value as shown, where it came from."""

    name: str  # the field, e.g. redis_url
    variable: str  # MEMORYD_REDIS_URL
    value: Any  # secrets "***", URL passwords masked; JSON-able
    source: str  # "env", the dotenv file's path, "option" (a CLI option), or "default"


def describe(settings: Settings, options: set[str] | frozenset[str] = frozenset(),
             environ: dict[str, str] | None = None) -> list[SettingShown]:
    """Every setting of `settings` with its source, secrets masked. `options`: the fields a
    CLI option set. The sources are found the way `Settings()` reads them: a variable is
    matched regardless of case, as pydantic-settings matches it."""
    env = {k.upper(): v for k, v in (os.environ if environ is None else environ).items()}
    path = env_file_path()
    dotenv: dict[str, str | None] = {}
    if path is not None:
        dotenv = {k.upper(): v for k, v in dotenv_values(path, encoding="utf-8").items()}
    shown: list[SettingShown] = []
    for name in type(settings).model_fields:
        variable = ENV_PREFIX + name.upper()
        if name in options:
            source = "option"
        elif variable in env:
            source = "env"
        elif path is not None and variable in dotenv:
            source = str(path)
        else:
            source = "default"
        shown.append(SettingShown(name, variable, _shown(getattr(settings, name)), source))
    return shown


def _shown(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return "***" if value.get_secret_value() else ""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, str):
        return mask_url_passwords(value)
    return value

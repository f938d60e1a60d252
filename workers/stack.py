"""The embedded stack: Redis (found or started), the store, a Celery worker and the gateway,
all in one process, because an embedded Qdrant Edge shard opens in one process only."""

from __future__ import annotations

import faulthandler
import signal
import socket
import threading
import time
from dataclasses import dataclass
from types import FrameType

import redis
import uvicorn
from redis.exceptions import RedisError

from memoryd.api.app import create_app
from memoryd.jobs.celery_app import create_app as create_celery_app
from memoryd.jobs.names import QueueName, TaskName
from memoryd.jobs.recovery import RunRecord, requeue_unacked
from memoryd.platform.errors import ConfigurationError
from memoryd.platform.logs import configure_logging, get_logger
from memoryd.platform.metrics import scheduled_by_task
from memoryd.platform.private_dirs import make_private_dir
from memoryd.platform.redis_runtime import RedisHandle, ensure_redis
from memoryd.platform.settings import Settings
from memoryd.runtime import Runtime, settle_for_serving
from memoryd.tenancy.auth import KeyRing, ensure_embedded_key
from memoryd.workers.bootstrap import set_runtime
from memoryd.workers.celery_app import app as celery_app
from memoryd.workers.inprocess import InProcessWorker, stop_workers
from memoryd.workers.periodic import PeriodicSender
from memoryd.workers.tasks import register_llm_tasks

log = get_logger("memoryd.stack")


def exit_on_sigterm() -> None:
    """Make SIGTERM (docker stop, systemd, kill) end the process the way Ctrl-C does.

    uvicorn shuts down on SIGTERM and then raises the signal again with the handler that
    was there before it started: the default one killed the process on the spot, before the
    stack stopped its worker, flushed the store, released its run record and stopped Redis
    (the next start then took the run for a crash). This handler raises instead, so
    `finally` blocks run."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def dump_threads_on_sigusr1() -> None:
    """`kill -USR1 <pid>` writes every thread's stack to stderr: what a stuck process is
    waiting on, without stopping it (the fault drills send it before they give up)."""
    faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)


def check_port_free(host: str, port: int) -> None:
    """Raise `ConfigurationError` naming the address when the gateway could not listen on
    it; called before the stack starts anything. uvicorn binds only once the app is up: a
    port another program held was found after Redis, the store and the workers had
    started. The socket is bound as uvicorn binds its own (SO_REUSEADDR; IPv6 for an address
    with a colon), then closed for uvicorn to bind: a program that takes the port in
    between still ends the start, later (uvicorn's own error)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ConfigurationError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}): another memoryd or "
                "another program may hold it; stop it, or choose another port (--port or "
                "MEMORYD_PORT)") from exc


@dataclass
class StackInfo:
    base_url: str
    api_key: str | None
    data_dir: str
    redis_url: str
    operator_key_file: str | None = None  # where the generated operator key is (0600)


class EmbeddedStack:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.redis: RedisHandle | None = None
        self.runtime: Runtime | None = None
        self.worker: InProcessWorker | None = None
        self.llm_worker: InProcessWorker | None = None
        self.bulk_worker: InProcessWorker | None = None
        self.webhook_worker: InProcessWorker | None = None
        self.server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.purger: PeriodicSender | None = None
        self.eraser: PeriodicSender | None = None
        self._run: RunRecord | None = None

    def prepare(self) -> StackInfo:
        """Everything but the HTTP server: Redis, store, worker; first, that its port is
        free (`check_port_free`)."""
        configure_logging(self.settings.log_level, self.settings.log_json_choice)
        check_port_free(self.settings.host, self.settings.port)
        make_private_dir(self.settings.data_dir)
        # A Redis of its own gets a password kept in the data directory (0600).
        self.redis = ensure_redis(
            self.settings.redis_url, self.settings.data_dir, start=self.settings.start_redis,
            generate_password=True,
        )
        settings = self.settings.model_copy(update={"redis_url": self.redis.url})
        self.settings = settings
        if self.redis.owned:
            apply_appendfsync(self.redis.url, settings)
        self.runtime = Runtime(settings, celery=celery_app)
        set_runtime(self.runtime)
        _ = self.runtime.index  # opens the shard and checks the embedding model now, not later
        keyring = KeyRing.from_settings(settings, embedded=True)
        # Before our worker consumes: what is unacked now belongs to a run that crashed.
        self._run = RunRecord(settings.data_dir)
        if self._run.claim():
            requeued = requeue_unacked(self.runtime.celery)
            log.warning("requeued_unacked_after_crash", count=requeued)
        grace = settings.worker_stop_grace_s
        # The first worker built takes kombu's process-wide event loop; every later one
        # needs a loop of its own (inprocess.py), and a worker's queue selection lives on
        # its app, so every later one has its own app too.
        if settings.llm_configured:
            # Two workers, one per queue: LLM tasks can never take every thread from the
            # cheap writes (raw ingest, saves, deletions).
            self.worker = InProcessWorker(self.runtime.celery, settings.worker_concurrency,
                                          queues=[QueueName.MEMORY.value], stop_grace_s=grace)
            llm_app = create_celery_app(settings)
            register_llm_tasks(llm_app)
            self.llm_worker = InProcessWorker(
                llm_app, settings.llm_worker_concurrency,
                hostname="embedded-llm@memoryd", queues=[QueueName.LLM.value],
                own_event_loop=True, stop_grace_s=grace,
            )
        else:
            self.worker = InProcessWorker(
                self.runtime.celery, settings.worker_concurrency,
                queues=[QueueName.MEMORY.value, QueueName.LLM.value], stop_grace_s=grace)
        # Bulk work (imports, backfill, re-embedding) on threads of its own: a tenant's
        # backlog never takes the threads that run saves, edits, forgets and interactions.
        self.bulk_worker = InProcessWorker(
            create_celery_app(settings), settings.bulk_worker_concurrency,
            hostname="embedded-bulk@memoryd", queues=[QueueName.BULK.value],
            own_event_loop=True, stop_grace_s=grace,
        )
        # Webhook deliveries on threads of their own: a slow receiver never holds the
        # threads that run writes (shared/webhooks/).
        self.webhook_worker = InProcessWorker(
            create_celery_app(settings), settings.webhook_worker_concurrency,
            hostname="embedded-webhooks@memoryd", queues=[QueueName.WEBHOOKS.value],
            own_event_loop=True, stop_grace_s=grace,
        )
        if self.llm_worker is not None:
            self.llm_worker.start()
        self.bulk_worker.start()
        self.webhook_worker.start()
        self.worker.start()
        # Retention runs here as beat runs it in server mode; soon after start, then each
        # interval (what expired while the stack was down goes first).
        self.purger = PeriodicSender(
            self.runtime.celery, TaskName.PURGE_EXPIRED, settings.retention_purge_interval_s,
            first_s=min(300.0, settings.retention_purge_interval_s),
        )
        self.purger.start()
        # Forgotten text leaves the files within MEMORYD_ERASURE_COMPACTION_S (at 0 the
        # forget itself compacts): shared/memories/erasure.py.
        if settings.erasure_compaction_s > 0:
            self.eraser = PeriodicSender(
                self.runtime.celery, TaskName.ERASE, settings.erasure_compaction_s,
                first_s=settings.erasure_compaction_s,
            )
            self.eraser.start()
        app = create_app(self.runtime, keyring)
        config = uvicorn.Config(
            app, host=settings.host, port=settings.port, log_config=None, access_log=False,
            timeout_graceful_shutdown=10,
        )
        self.server = uvicorn.Server(config)
        key = None if settings.api_keys is not None else ensure_embedded_key(settings)
        settle_for_serving(self.runtime)
        # The operator key is only named, never printed: it reaches every tenant's data.
        configured = settings.operator_keys is not None and bool(
            settings.operator_keys.get_secret_value().strip())
        operator_file = None if configured else str(settings.operator_key_file)
        return StackInfo(
            base_url=f"http://{settings.host}:{settings.port}",
            api_key=key,
            data_dir=str(settings.data_dir),
            redis_url=settings.redis_url,
            operator_key_file=operator_file,
        )

    def serve_forever(self) -> None:
        """Run the gateway in this thread until Ctrl-C / SIGTERM, then stop everything."""
        assert self.server is not None
        exit_on_sigterm()
        dump_threads_on_sigusr1()
        try:
            self.server.run()
        finally:
            self.stop()

    def start_in_background(self, timeout_s: float = 30.0) -> None:
        assert self.server is not None
        self._thread = threading.Thread(target=self.server.run, name="gateway", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the gateway did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(15)
            self._thread = None
        if self.purger is not None:
            self.purger.stop()
            self.purger = None
        if self.eraser is not None:
            self.eraser.stop()
            self.eraser = None
        workers = [w for w in (self.llm_worker, self.bulk_worker, self.webhook_worker,
                               self.worker) if w is not None]
        self.llm_worker = self.bulk_worker = self.webhook_worker = self.worker = None
        if workers:
            if self.runtime is not None:
                self._log_held(self.runtime)
            stop_workers(workers, self.settings.worker_stop_grace_s + 30.0)
            if self.runtime is not None:
                self._requeue_unfinished(self.runtime)
        if self._run is not None:
            self._run.release()
            self._run = None
        if self.runtime is not None:
            self.runtime.close()
            set_runtime(None)
            self.runtime = None
        if self.redis is not None:
            self.redis.stop()
            self.redis = None
        log.info("stack_stopped")

    @staticmethod
    def _log_held(runtime: Runtime) -> None:
        """Name the messages the workers hold for a countdown before kombu gives them back
        with its bare "Restoring N unacknowledged message(s)": on an idle stack, the
        access-count flush a search scheduled (shared/retrieval/access.py)."""
        try:
            held = scheduled_by_task(runtime.redis.hvals("unacked"), time.time())
        except RedisError:
            return
        if held:
            log.info("held_for_countdown_requeued", tasks=held,
                     note="tasks sent to run later go back to their queues now "
                          "(kombu: 'Restoring N unacknowledged message(s)') and run when "
                          "due after the next start")

    @staticmethod
    def _requeue_unfinished(runtime: Runtime) -> None:
        """Every message the stopped workers took and did not finish (handed to a thread
        but not started, held for a retry's countdown, or still running after the grace)
        goes back to its queue now, so the next start runs it at once instead of after the
        broker's visibility timeout. This process is its broker database's only consumer
        (shared/jobs/recovery.py), so what is unacknowledged now is ours."""
        try:
            count = requeue_unacked(runtime.celery)
        except RedisError as exc:  # then the visibility timeout brings them back
            log.warning("requeue_on_stop_failed", error=str(exc))
            return
        if count:
            log.warning("requeued_on_stop", count=count)


def apply_appendfsync(url: str, settings: Settings) -> None:
    """The fsync policy of the AOF of a Redis this stack started (`redis_appendfsync`): with
    "everysec" a host crash may lose about a second of accepted jobs, with "always" none."""
    client = redis.Redis.from_url(url, socket_timeout=settings.redis_timeout_s,
                                  socket_connect_timeout=settings.redis_timeout_s)
    try:
        client.config_set("appendfsync", settings.redis_appendfsync)
    finally:
        client.close()

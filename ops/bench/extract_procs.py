"""Server mode for the extraction bench: N llm worker PROCESSES behind one gateway.

`ProcStack` starts, on 127.0.0.1 and free ports: a Redis; the Qdrant REST stand-in
(tests/support/qdrant_facade_serve.py, a process of its own); `memoryd serve` pointed at it with
MEMORYD_QDRANT_URL; one `memoryd worker --queues memory` (raw ingest); and N
`memoryd worker --queues llm --concurrency 1`, each with its own node name, as N hosts or
containers would run.

No Qdrant server can run here: the stand-in is qdrant-client's local-mode engine behind
Qdrant's REST protocol, one Python process answering one request at a time under a lock.
Its CPU is reported on its own (`facade_cores`): near 1.0 means it, not the workers, set
the pace.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

from memoryd.jobs.celery_app import create_app
from memoryd.platform.redis_runtime import RedisHandle, ensure_redis, free_port
from memoryd.platform.settings import Settings
from ops.stack import (
    ROOT,
    CpuMeter,
    Proc,
    ScenarioFailed,
    clean_env,
    process_cpu_s,
    tied,
    wait_until,
)

KEY = "bench-extract-key"
TENANT = "default"


class FacadeProc:
    """tests/support/qdrant_facade_serve.py in a subprocess, tied to the bench."""

    def __init__(self, work: Path) -> None:
        self.data_dir = work / "qdrant-server"
        self.port_file = work / "qdrant-server.port"
        self.log_path = work / "qdrant-server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> FacadeProc:
        self.port_file.unlink(missing_ok=True)
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                tied([sys.executable, "-m", "tests.support.qdrant_facade_serve",
                      str(self.data_dir), str(self.port_file)]),
                cwd=ROOT, env=clean_env(), stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )

        def listening() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise ScenarioFailed(f"the Qdrant stand-in exited: {self.log_path.read_text()}")
            return self.port_file.exists()

        wait_until(listening, 60, "the Qdrant stand-in to listen", 0.1)
        self.url = f"http://127.0.0.1:{self.port_file.read_text().strip()}"
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


class PartsCpuMeter(CpuMeter):
    """CpuMeter over every part of the stack, plus the cores each part used on its own."""

    def __init__(self, parts: dict[str, list[int]]) -> None:
        super().__init__([pid for pids in parts.values() for pid in pids])
        self.parts = parts

    def _parts_cpu(self) -> dict[str, float]:
        return {name: sum(process_cpu_s(pid) for pid in pids)
                for name, pids in self.parts.items()}

    def __enter__(self) -> PartsCpuMeter:
        self._parts_start = (time.monotonic(), self._parts_cpu())
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        started, before = self._parts_start
        wall = max(time.monotonic() - started, 1e-9)
        after = self._parts_cpu()
        for name in self.parts:
            self.result[f"{name}_cores"] = round((after[name] - before[name]) / wall, 2)


class ProcStack:
    """Gateway, workers, Redis and the Qdrant stand-in as separate processes."""

    def __init__(self, label: str, work: Path, llm_workers: int,
                 settings: dict[str, object]) -> None:
        self.label = label
        self.work = work
        self.llm_workers = llm_workers
        self.settings = settings  # MEMORYD_* settings of every memoryd process, lower case
        self.base_url = ""
        self.redis: RedisHandle | None = None
        self.facade: FacadeProc | None = None
        self.gateway: Proc | None = None
        self.memory_worker: Proc | None = None
        self.workers: list[Proc] = []

    def __enter__(self) -> ProcStack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self.redis = ensure_redis(f"redis://127.0.0.1:{free_port()}/0", self.work / "redis")
        self.facade = FacadeProc(self.work).start()
        values: dict[str, object] = {
            "redis_url": self.redis.url, "qdrant_url": self.facade.url,
            "api_keys": f"{KEY}={TENANT}", **self.settings,
        }
        port = free_port()
        self.gateway = Proc(["serve", "--port", str(port)], self.work / "gateway.log", values,
                            tied=True).start()
        self.base_url = f"http://127.0.0.1:{port}"
        nodes = ["memory@bench"] + [f"llm-{i}@bench" for i in range(1, self.llm_workers + 1)]
        self.memory_worker = self._worker("memory", nodes[0], values)
        self.workers = [self._worker("llm", node, values) for node in nodes[1:]]
        self._wait_gateway()
        self._wait_nodes(nodes)

    def _worker(self, queue: str, node: str, values: dict[str, object]) -> Proc:
        args = ["worker", "--queues", queue, "--concurrency", "1", "--hostname", node,
                "--loglevel", "WARNING"]
        log_path = self.work / f"worker-{node.split('@')[0]}.log"
        return Proc(args, log_path, values, tied=True).start()

    def _procs(self) -> list[Proc]:
        return [p for p in (self.gateway, self.memory_worker, *self.workers) if p is not None]

    def _check_alive(self) -> None:
        for proc in self._procs():
            if not proc.alive():
                raise ScenarioFailed(f"memoryd {proc.args[0]} exited:\n{proc.log_tail()}")

    def _wait_gateway(self) -> None:
        def ready() -> bool:
            self._check_alive()
            try:
                return httpx.get(f"{self.base_url}/readyz", timeout=1,
                                 trust_env=False).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, 120, "memoryd serve to be ready", 0.2)

    def _wait_nodes(self, nodes: list[str]) -> None:
        """Until every worker answers a ping by its node name: then it consumes."""
        assert self.redis is not None
        probe = create_app(Settings(redis_url=self.redis.url))
        try:
            def all_up() -> bool:
                self._check_alive()
                replies = probe.control.ping(timeout=0.5) or []
                return set(nodes) <= {name for reply in replies for name in reply}

            wait_until(all_up, 120, f"workers {nodes} to answer a ping", 0.2)
        finally:
            probe.close()

    def client(self, timeout_s: float = 60.0) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, headers={"Authorization": f"Bearer {KEY}"},
                            timeout=timeout_s, trust_env=False)

    def cpu_meter(self) -> PartsCpuMeter:
        parts = {
            "gateway": self.gateway.pids() if self.gateway else [],
            "llm_workers": [pid for w in self.workers for pid in w.pids()],
            "memory_worker": self.memory_worker.pids() if self.memory_worker else [],
            "facade": [self.facade.pid] if self.facade and self.facade.proc else [],
            "redis": [self.redis.process.pid] if self.redis and self.redis.process else [],
        }
        return PartsCpuMeter(parts)

    def stop(self) -> None:
        for proc in reversed(self._procs()):
            proc.stop()
        self.workers, self.gateway, self.memory_worker = [], None, None
        if self.facade is not None:
            self.facade.stop()
            self.facade = None
        if self.redis is not None:
            self.redis.stop()
            self.redis = None

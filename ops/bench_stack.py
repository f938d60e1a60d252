"""The system under test: `memoryd up` as a subprocess, and what /proc says it costs.

`Stack` starts the real embedded stack (gateway, in-process worker, Qdrant Edge, its own Redis)
on free ports and always stops it again, even when the bench dies; `CpuMeter` and
`proc_memory` read the CPU and memory figures the report puts beside each latency.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import httpx

from ops.bench_common import ROOT, log
from ops.bench_http import RawClient
from shared.platform.redis_runtime import free_port

STACK_START_TIMEOUT_S = 180.0
STACK_STOP_TIMEOUT_S = 60.0


def proc_memory(pid: int) -> dict[str, float]:
    """VmHWM (peak resident set) and VmRSS of a live process, in MiB."""
    values: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            values[f"{key.lower()}_mib"] = round(int(rest.split()[0]) / 1024, 1)
    return values


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _system_busy_s() -> float:
    """CPU seconds all cores spent busy since boot (guest time is already inside user)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / _CLOCK_TICKS


def _thread_cpu_s(pid: int, prefix: str) -> float:
    """CPU seconds of the process's threads whose kernel name starts with `prefix`."""
    total = 0.0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0.0
    for task in tasks:
        try:
            if not (task / "comm").read_text().startswith(prefix):
                continue
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a thread that ended between the listing and the read
        total += (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    return total


def _process_cpu_s(pid: int) -> float:
    try:
        # Fields after the ")" that closes the command name start at field 3 (state).
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


class CpuMeter:
    """Where the machine's CPU went during a timed section, in cores (CPU-seconds per second).

    The bench shares a small machine with whatever else runs; `other_cores` says how much of
    it something else took, which is how far to trust the latencies next to it.
    """

    # The e5 lanes name their threads (shared/embeddings/e5/lanes.py).
    MODEL_THREADS = "e5-"

    def __init__(self, stack_pids: Sequence[int]) -> None:
        self.pids = list(stack_pids)
        self.result: dict[str, float] = {}

    def _sample(self) -> tuple[float, float, float, float, float]:
        times = os.times()
        stack = sum(_process_cpu_s(pid) for pid in self.pids)
        model = _thread_cpu_s(self.pids[0], self.MODEL_THREADS) if self.pids else 0.0
        return time.monotonic(), _system_busy_s(), stack, times.user + times.system, model

    def __enter__(self) -> CpuMeter:
        self._start = self._sample()
        return self

    def __exit__(self, *exc: object) -> None:
        end = self._sample()
        wall = max(end[0] - self._start[0], 1e-9)
        system, stack, bench, model = ((end[i] - self._start[i]) / wall for i in (1, 2, 3, 4))
        self.result = {
            "system_busy_cores": round(system, 2),
            "stack_cores": round(stack, 2),
            "bench_cores": round(bench, 2),
            "other_cores": round(max(system - stack - bench, 0.0), 2),
            # Of stack_cores: the e5 lanes' threads, with the OpenMP helpers they started
            # (a thread inherits its creator's name).
            "model_lane_cores": round(model, 3),
        }


# ---- the stack subprocess ----------------------------------------------------------------

# Runs before `memoryd up` and execs it: asks Linux to send SIGINT (memoryd's clean stop) when
# the bench dies, so a bench killed by a timeout or SIGKILL never leaves a stack and its Redis
# behind. The stack runs in its own session, so nothing else would ever stop it. Done in a
# launcher rather than with preexec_fn, which is unsafe once the bench has threads.
_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGINT), 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit('the bench exited before the stack started')\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


class Stack:
    """`memoryd up` in a subprocess, on free ports, with a Redis it starts itself."""

    def __init__(
        self, label: str, data_dir: Path, log_dir: Path, embedder: str,
        worker_concurrency: int | None = None, extra_env: dict[str, str] | None = None,
        root: Path = ROOT,
    ) -> None:
        self.label = label
        self.root = root  # the checkout whose code the stack runs
        self.data_dir = data_dir
        self.log_path = log_dir / f"stack-{label}.log"
        self.embedder = embedder
        self.worker_concurrency = worker_concurrency
        self.extra_env = dict(extra_env or {})
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.api_key = ""
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Stack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
        env.update({
            # A port nothing listens on: the stack then starts (and later stops) its own Redis.
            "MEMORYD_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
            "MEMORYD_LOG_LEVEL": "WARNING",
            "MEMORYD_LOG_JSON": "true",
            "MEMORYD_EMBEDDER": self.embedder,
        })
        if self.worker_concurrency is not None:
            env["MEMORYD_WORKER_CONCURRENCY"] = str(self.worker_concurrency)
        env.update(self.extra_env)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "workers.cli", "up", "--port", str(self.port),
               "--data-dir", str(self.data_dir)]
        if sys.platform.startswith("linux"):
            cmd = [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *cmd]
        with open(self.log_path, "wb") as out:
            # Own session: a Ctrl-C on the bench must not reach the stack too, or it would be
            # interrupted twice (by the terminal and by stop()) in the middle of shutting down.
            self.proc = subprocess.Popen(
                cmd, cwd=self.root, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        self._wait_ready()
        self.api_key = (self.data_dir / "api-key").read_text().strip()

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + STACK_START_TIMEOUT_S
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"memoryd up ({self.label}) exited with {self.proc.returncode}:\n"
                        f"{self.log_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.base_url}/readyz").status_code == 200:
                        return
                time.sleep(0.2)
        raise RuntimeError(f"memoryd up ({self.label}) was not ready in time:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def memory(self) -> dict[str, float]:
        return proc_memory(self.pid)

    def pids(self) -> list[int]:
        """The stack process and the Redis it started."""
        redis_pid = self._redis_pid()
        return [self.pid] if redis_pid is None else [self.pid, redis_pid]

    def _redis_pid(self) -> int | None:
        """The pid the stack's Redis recorded in its runtime file, if it got that far."""
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            record = json.loads((self.data_dir / "redis" / "runtime.json").read_text())
            return int(record["pid"])
        return None

    def cpu_meter(self) -> CpuMeter:
        return CpuMeter(self.pids())

    def client(self, timeout_s: float = 60.0) -> httpx.Client:
        # trust_env=False: a proxy from the environment must never sit between bench and stack.
        return httpx.Client(
            base_url=self.base_url, headers={"Authorization": f"Bearer {self.api_key}"},
            timeout=timeout_s, trust_env=False,
        )

    def raw_client(self, timeout_s: float = 60.0) -> RawClient:
        """The timed searches' client (ops/bench_http.py: lighter than httpx)."""
        return RawClient("127.0.0.1", self.port, self.api_key, timeout_s)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)  # memoryd stops worker, store and Redis in order
            try:
                proc.wait(STACK_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                log(f"memoryd up ({self.label}) ignored SIGINT for {STACK_STOP_TIMEOUT_S:.0f}s;"
                    " killing it")
                proc.kill()
                proc.wait(10)
        self._stop_orphan_redis()

    def _stop_orphan_redis(self) -> None:
        """A killed stack leaves its Redis running: end it, but only if it is surely ours."""
        redis_dir = (self.data_dir / "redis").resolve()
        pid = self._redis_pid()
        if pid is None:
            return
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except (OSError, ValueError):
            return
        if "redis" not in comm or cwd != str(redis_dir):
            return
        log(f"stopping the Redis (pid {pid}) left behind by memoryd up ({self.label})")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            if Path(f"/proc/{pid}").exists():
                os.kill(pid, signal.SIGKILL)

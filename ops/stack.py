"""The processes bench and chaos start, and what /proc says they cost: one helper for both.

`Stack` starts the real embedded stack (`memoryd up`: gateway, in-process worker, Qdrant Edge,
its own Redis) on free ports and always stops it again, even when the caller dies; `Proc` is
any other `memoryd` subcommand in its own session (`serve`, `worker`). Both get this process's
environment without its MEMORYD_* variables plus the settings asked for (`clean_env`), so a
variable left in the shell never reaches the system under test. `CpuMeter` and `proc_memory`
read the CPU and memory figures the bench puts beside each latency; `wait_until` is how every
caller waits for a process to get somewhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

import httpx

from memoryd.platform.redis_runtime import free_port
from ops.package_tree import build as build_package_tree

ROOT = Path(__file__).resolve().parents[1]
STACK_START_TIMEOUT_S = 180.0
STACK_STOP_TIMEOUT_S = 60.0


class ScenarioFailed(AssertionError):
    """A process or the service misbehaved (exited, a wrong status, a job that never ended)."""


def log(message: str) -> None:
    # Progress goes to stderr so stdout carries only the final table.
    print(message, file=sys.stderr, flush=True)


def wait_until(check: Callable[[], bool], timeout_s: float, what: str,
               interval_s: float = 0.05) -> float:
    """Seconds until `check()` held; ScenarioFailed after `timeout_s`."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout_s:
            raise ScenarioFailed(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(interval_s)
    return time.monotonic() - start


def clean_env(**settings: object) -> dict[str, str]:
    """This process's environment without any MEMORYD_* of its own, plus `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env.update({f"MEMORYD_{k.upper()}": str(v) for k, v in settings.items()})
    env.setdefault("MEMORYD_LOG_LEVEL", "WARNING")
    env.setdefault("MEMORYD_LOG_JSON", "true")
    return env


def log_tail(path: Path, lines: int = 30) -> str:
    """The last `lines` of a process's log, for the error that says it died."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def proc_memory(pid: int) -> dict[str, float]:
    """VmHWM (peak resident set) and VmRSS of a live process, in MiB; and of VmRSS, RssAnon
    (the process's own memory) and RssFile (pages of mapped files, such as a store's: the
    kernel can take them back)."""
    values: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
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


def process_cpu_s(pid: int) -> float:
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
        stack = sum(process_cpu_s(pid) for pid in self.pids)
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


# ---- processes that cannot outlive their caller -------------------------------------------

# Runs before the command and execs it: asks Linux to send SIGINT (memoryd's clean stop) when
# the caller dies, so a bench killed by a timeout or SIGKILL never leaves a stack and its Redis
# behind. The processes run in their own session, so nothing else would ever stop them. Done
# in a launcher rather than with preexec_fn, which is unsafe once the caller has threads.
_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGINT), 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit('the bench exited before the stack started')\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def tied(args: list[str]) -> list[str]:
    """`args` behind the launcher: the process gets SIGINT if this one dies (Linux only;
    elsewhere `args` unchanged)."""
    if not sys.platform.startswith("linux"):
        return args
    return [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *args]


# ---- memoryd up ---------------------------------------------------------------------------


def checkout_code(root: Path, tree: Path) -> tuple[str, dict[str, str]]:
    """How a stack runs the code of checkout `root` (its working directory): the CLI module
    for `python -m`, and the variables that make `root`'s code the one imported.

    This checkout: the installed memoryd, nothing to add. Another checkout with the memoryd
    namespace (`package-dir` in its pyproject.toml): the installed memoryd is this one's, so
    `root`'s link tree (ops/package_tree.py, built at `tree`) goes first on PYTHONPATH. One
    from before the namespace: its top-level packages, found from the working directory.
    """
    if root.resolve() == ROOT:
        return "memoryd.workers.cli", {}
    config = tomllib.loads((root / "pyproject.toml").read_text())
    if "memoryd" in config.get("tool", {}).get("setuptools", {}).get("package-dir", {}):
        build_package_tree(root, tree)
        path = os.pathsep.join(filter(None, (str(tree), os.environ.get("PYTHONPATH"))))
        return "memoryd.workers.cli", {"PYTHONPATH": path}
    return "workers/cli".replace("/", "."), {}  # the CLI's module then, named by its path


class Stack:
    """`memoryd up` in a subprocess, on free ports, with a Redis it starts itself.

    The bench's stack: tied to this process (`tied`), its log written afresh, settings beyond
    the defaults given as raw MEMORYD_* variables in `extra_env`, its code from `root`.
    """

    tied = True  # dies with this process (see `tied`)
    log_mode = "wb"  # a fresh log per start

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

    def env(self) -> dict[str, str]:
        """The stack's environment: defaults plus what this stack was asked for."""
        # A Redis port nothing listens on: the stack then starts (and later stops) its own.
        settings: dict[str, object] = {"redis_url": f"redis://127.0.0.1:{free_port()}/0",
                                       "embedder": self.embedder}
        if self.worker_concurrency is not None:
            settings["worker_concurrency"] = self.worker_concurrency
        return {**clean_env(**settings), **self.extra_env}

    def start(self) -> None:
        module, code_env = checkout_code(self.root, self.log_path.with_name(
            f"code-{self.label}"))
        env = {**self.env(), **code_env}
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", module, "up", "--port", str(self.port),
               "--data-dir", str(self.data_dir)]
        with open(self.log_path, self.log_mode) as out:
            # Own session: a Ctrl-C on the caller must not reach the stack too, or it would be
            # interrupted twice (by the terminal and by stop()) in the middle of shutting down.
            self.proc = subprocess.Popen(
                tied(cmd) if self.tied else cmd, cwd=self.root, env=env,
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
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
        return log_tail(self.log_path, lines)

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
        # trust_env=False: a proxy from the environment must never sit between caller and stack.
        return httpx.Client(
            base_url=self.base_url, headers={"Authorization": f"Bearer {self.api_key}"},
            timeout=timeout_s, trust_env=False,
        )

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


# ---- any other memoryd subcommand ---------------------------------------------------------


class Proc:
    """A `memoryd` subcommand in its own session, its output appended to a log file.

    `tied=True` puts it behind the launcher (`tied`): the bench's processes, which must not
    outlive it. The fault drills leave it False: they kill and restart processes themselves.
    """

    def __init__(self, args: list[str], log_path: Path, settings: dict[str, object],
                 tied: bool = False) -> None:
        self.args = args
        self.log_path = log_path
        self.settings = settings
        self.tied = tied
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        cmd = [sys.executable, "-m", "memoryd.workers.cli", *self.args]
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                tied(cmd) if self.tied else cmd, cwd=ROOT,
                env=clean_env(**self.settings), stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def children(self) -> list[int]:
        """Direct children (a prefork worker's pool processes)."""
        found: list[int] = []
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{self.pid}/task").iterdir():
                with contextlib.suppress(OSError, ValueError):
                    found += [int(p) for p in (task / "children").read_text().split()]
        return found

    def pids(self) -> list[int]:
        """The process and its direct children, while it runs."""
        return [self.pid, *self.children()] if self.alive() else []

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)

    def stop(self, timeout_s: float = 30.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

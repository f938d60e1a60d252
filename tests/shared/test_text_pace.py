"""The text pacer: work beyond the burst is followed by pauses that hold it to its share of
wall time, and threads take turns."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from memoryd.platform.settings import Settings
from memoryd.platform.text_pace import TextPacer
from memoryd.runtime import Runtime


def test_sustained_work_is_held_to_its_share() -> None:
    pacer = TextPacer(share=0.25, burst_s=0.0)
    started = time.monotonic()
    for _ in range(5):
        pacer.run(lambda: time.sleep(0.02))
    # 0.1 s of work at a quarter of the time: at least 0.4 s of wall time.
    assert time.monotonic() - started >= 0.38


def test_light_work_within_the_burst_is_not_paused() -> None:
    pacer = TextPacer(share=0.25, burst_s=0.05)
    assert pacer.run(lambda: 42) == 42
    assert pacer._credit_s > 0.049


def test_threads_take_turns() -> None:
    pacer = TextPacer(share=1.0 - 1e-9, burst_s=10.0)
    inside, most = 0, 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        time.sleep(0.01)
        with lock:
            inside -= 1

    threads = [threading.Thread(target=lambda: [pacer.run(work) for _ in range(5)])
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == 1


def test_the_runtime_paces_with_its_own_settings(tmp_path: Path) -> None:
    """One pacer a process, from the Settings its Runtime was built with (not the
    environment), shared by every job's writer."""
    settings = Settings(data_dir=tmp_path, text_pace_share=0.5, text_pace_burst_s=0.2)
    runtime = Runtime(settings)
    try:
        pacer = runtime.text_pacer
        assert (pacer.share, pacer.burst_s) == (0.5, 0.2)
        assert runtime.text_pacer is pacer
    finally:
        runtime.close()

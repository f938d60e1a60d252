"""The Qdrant REST stand-in (tests/support/qdrant_rest_facade.py) as a process of its own.

    python -m tests.support.qdrant_facade_serve <data dir> <port file>

Writes the port it listens on to <port file> once it answers, and serves until SIGTERM or
SIGINT. The extraction bench runs it apart from the bench process so that the stand-in's
CPU can be read on its own (it is one engine behind one lock: it may be the bottleneck),
and so that the bench's own threads (load, fake LLM) do not share a GIL with it.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from tests.support.qdrant_rest_facade import QdrantRestFacade


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write(f"usage: python -m {__spec__.name} <data dir> <port file>\n")
        return 2
    data_dir, port_file = Path(argv[0]), Path(argv[1])
    stop_on = {signal.SIGTERM, signal.SIGINT}
    # Blocked before the server threads start, so they inherit the mask and sigwait below
    # is the only place these signals land.
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_on)
    facade = QdrantRestFacade(data_dir).start()
    try:
        partial = port_file.with_suffix(".tmp")
        partial.write_text(str(facade.port))
        partial.replace(port_file)  # the reader never sees a half-written port
        signal.sigwait(stop_on)
    finally:
        facade.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

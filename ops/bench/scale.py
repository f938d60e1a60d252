"""A million memories in embedded mode: `python -m ops.bench`'s search phase on one store of
1,000 users x 1,000 memories, a user with 10 and one with 10,000 beside them.

    python -m ops.bench.scale [--reuse-data DIR] [--keep-data] [--work-dir DIR]
                              [any other option of python -m ops.bench]

The store is bulk-filled (ops/bench/fill.py: EdgeStore upserts of MemoryRecord points in the
bench process, before the stack starts); a fill takes a quarter of an hour on 2 cores, so
`--keep-data` keeps it and `--reuse-data <work dir>/search-1000000` measures it again. The
report (bench-results/bench-1m.json) carries the fill, the ready time, one-client and
8-client searches, the searches with the query embedding cached (the store and scoring
alone), the two users of other sizes, the stack's memory and the data dir's size;
`python -m ops.bench.docs` puts it on docs/benchmarks.md.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ops.bench import run

SIZE = 1_000_000
EXTRA_USERS = (10, 10_000)
# Relative, as the report records its command: run it from the checkout, as every bench.
DEFAULT_OUT = "bench-results/bench-1m.json"


def preset() -> list[str]:
    return ["--phases", "search", "--sizes", str(SIZE),
            "--extra-users", ",".join(map(str, EXTRA_USERS)), "--out", DEFAULT_OUT]


def main(argv: Sequence[str] | None = None) -> int:
    # Later options win in argparse: anything given here overrides the preset.
    return run.main([*preset(), *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())

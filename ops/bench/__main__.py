"""`python -m ops.bench`: the main benchmark (see `ops/bench/run.py`)."""

import sys

from ops.bench.run import main

sys.exit(main())

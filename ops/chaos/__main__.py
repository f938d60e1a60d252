"""`python -m ops.chaos`: the fault drills (see `ops/chaos/run.py`)."""

import sys

from ops.chaos.run import main

sys.exit(main())

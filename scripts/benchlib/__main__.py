"""`python3 -m scripts.benchlib ARGS`, what scripts/bench runs (from the repository root)."""

import sys

from scripts.benchlib.cli import run

sys.exit(run(sys.argv[1:]))

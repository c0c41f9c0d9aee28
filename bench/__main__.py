"""`python -m bench [--quick] [--only ...] [--out DIR]`: every benchmark, then the report (bench/run.py)."""

import sys

from bench.run import main

sys.exit(main(sys.argv[1:]))

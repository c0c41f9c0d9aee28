"""`python -m memnets` is the `memnets` command."""

import sys

from memnets.cli import main

sys.exit(main())

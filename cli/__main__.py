"""`python -m certfsm.cli`: the same command line as the `certfsm` console script."""

import sys

from certfsm.cli import main

sys.exit(main())

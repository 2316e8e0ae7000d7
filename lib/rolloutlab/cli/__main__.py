"""`python -m rolloutlab.cli ...`: the command line, as the `rolloutlab` script runs it."""
import sys

from .app import main

sys.exit(main())

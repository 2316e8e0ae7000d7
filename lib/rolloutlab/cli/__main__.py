"""`python -m rolloutlab.cli ...`: the command line, as the `rolloutlab` script runs it."""
import sys

from .main import main

sys.exit(main())

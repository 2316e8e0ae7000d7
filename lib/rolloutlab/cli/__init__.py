"""The command line, `rolloutlab ...` (pyproject's entry point ``rolloutlab.cli:main``): the parser,
each command and its printing. May import every other subpackage; nothing imports it."""
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from .app import build_parser, main
from .training import CURATE_FORMATS

__all__ = ["main", "build_parser", "CURATE_FORMATS", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE"]

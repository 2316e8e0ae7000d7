"""The command line, `rolloutlab ...` (pyproject's entry point ``rolloutlab.cli:main``): the parser,
each command and its printing. May import every other subpackage; nothing imports it."""
from .main import CURATE_FORMATS, EXIT_FAILED, EXIT_OK, EXIT_USAGE, build_parser, main

__all__ = ["main", "build_parser", "CURATE_FORMATS", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE"]

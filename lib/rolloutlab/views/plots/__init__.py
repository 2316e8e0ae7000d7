"""Figures from metric frames: ``static`` (matplotlib) and ``interactive`` (plotly), same names,
same look; ``readiness_table`` and ``audit_table`` style the checks and the audit's suspects;
``linked`` makes an interactive figure open what is clicked in the explorer; ``lint.problems``
is the standard every figure is held to. Imported only where used (the CLI stays light)."""
from . import interactive, lint, static
from .linked import linked
from .style import EmptyDataError, run_colors
from .tables import audit_table, readiness_table

__all__ = ["static", "interactive", "lint", "linked", "readiness_table", "audit_table", "run_colors",
           "EmptyDataError"]

"""Figures from metric frames: ``static`` (matplotlib) and ``interactive`` (plotly), same names,
same look; ``readiness_table`` styles the checks. Imported only where used (the CLI stays light)."""
from . import interactive, static
from .style import EmptyDataError, run_colors
from .tables import readiness_table

__all__ = ["static", "interactive", "readiness_table", "run_colors", "EmptyDataError"]

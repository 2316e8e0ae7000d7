"""rolloutlab: a Jupyter workbench for Agent RFT rollout logs, backed by DuckDB."""
from .store.catalog import rejects, runs, sources
from .ingest import IngestError, IngestFailed, detect_format, ingest
from .ingest.identity import RunNameError, merge_runs, rename_run
from .analysis.metrics.common import reward_scale, set_reward_scale
from .analysis.metrics import (UnknownRunError, capacity, capacity_change, in_flight, projection_error, grader_pairs, grader_stats,
                               latency, latency_ecdf, rollout_table, sample_stats, signal_plan, summary, training_runs,
                               tool_pairs, tool_stats, training_jobs, training_metrics)
from .analysis.metrics import (PriceWarning, cost, cost_per_sample_frame, frontier, job_cost, job_usage, price_table,
                               rollout_costs, tokens, truncation, truncation_check)
from .analysis.power_analysis import power
from .analysis.labelling import export_labels, import_labels, label, labelling_sample, labels
from .analysis.calibration import grader_calibration
from .analysis.readiness import check
from .analysis.audit import audit
from .analysis.compare import by_step, compare, compare_without, distribution_shift, sample_deltas, shift_test
from .views.widgets import explore
from .store.lake import connect_lake, export
from .store.database import DatabaseLockedError, SchemaVersionError, SharedReader, StoreError, connect, transaction

from .version import __version__

# Log text is full of dollar amounts ("$28.9M"); in JupyterLab, a DataFrame holding two of them
# would be typeset as math between the two "$". Mark DataFrame HTML so MathJax leaves it alone.
import pandas as _pd  # noqa: E402

_pd.set_option("display.html.use_mathjax", False)
_pd.set_option("styler.html.mathjax", False)

# Heavy (plotly) names load on first use, so that `import rolloutlab` and the CLI stay light.
# name -> its module (None: the name is the module, as in ``rl.plots``)
_LAZY = {"build_report": "views.report", "write_report": "views.report", "verdict": "views.report",
         "plots": "views.plots", "spark": "store.spark",
         "live": "views.liveview",
         "live_frame": "views.liveview",
         # curation (analysis) and the writers of training files
         "curate": "analysis.curation", "signal_by_step": "analysis.curation", "write_curated": "exports.training_files",
         # failure modes (scikit-learn loads with them)
         "failure_modes": "analysis.failure_modes", "failure_mode_of": "analysis.failure_modes",
         "failure_modes_diff": "analysis.failure_modes", "trajectory_diff": "analysis.trajectories",
         "sample_diff": "analysis.trajectories",
         "endpoint_labeler": "analysis.failure_labeler"}
# modules people import by their name from the package (docs before the layout of #40 did):
# ``from rolloutlab import fmt, plots, report, synth``
_LAZY.update({"fmt": "text.fmt", "report": "views.report", "synth": "demo.synth"})
_MODULES = {"plots", "spark", "fmt", "report", "synth"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module = importlib.import_module(f".{_LAZY[name]}", __name__)
        return module if name in _MODULES else getattr(module, name)
    raise AttributeError(f"module 'rolloutlab' has no attribute {name!r}")


__all__ = [
    "connect", "transaction", "export", "connect_lake", "SharedReader", "StoreError", "DatabaseLockedError", "SchemaVersionError",
    "ingest", "detect_format", "IngestError", "IngestFailed",
    "runs", "sources", "rejects", "merge_runs", "rename_run", "RunNameError", "reward_scale", "set_reward_scale",
    "summary", "sample_stats", "signal_plan", "tool_stats", "tool_pairs", "latency", "latency_ecdf",
    "rollout_table", "UnknownRunError", "training_runs", "training_metrics", "training_jobs", "grader_stats", "grader_pairs",
    "capacity", "capacity_change", "in_flight", "projection_error",
    "check", "audit",
    "compare", "compare_without", "sample_deltas", "distribution_shift", "shift_test", "by_step",
    "explore", "build_report", "write_report", "plots", "spark", "live", "live_frame",
    "curate", "signal_by_step", "write_curated", "verdict",
    "power", "label", "labels", "labelling_sample", "import_labels", "export_labels", "grader_calibration",
    "tokens", "cost", "rollout_costs", "cost_per_sample_frame", "frontier", "job_cost", "job_usage",
    "truncation", "truncation_check", "price_table", "PriceWarning",
    "failure_modes", "failure_mode_of", "failure_modes_diff", "trajectory_diff", "sample_diff", "endpoint_labeler",
]

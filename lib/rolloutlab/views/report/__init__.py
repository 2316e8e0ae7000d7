"""The stakeholder report, one module per section (``headline``: the verdict; ``readiness``, ``cost`` ...;
``build`` assembles them, ``page`` is what they are written on). May import analysis, store, plots, text, config.

One self-contained HTML file (plotly's JavaScript inlined once, no external requests), built from
the same functions as the notebooks. The first screen is the verdict in words (``verdict``): the
score change with its CI, and beside it every reason the workbench knows not to trust it yet
(reward-hacking suspects of the candidate, its readiness warnings, grader disagreement, infra
errors that differ between the runs, truncation, samples only one run evaluated), one line each
with a link to its section. Then the readiness of both runs side by side, variance, tool calls,
latency, per-sample changes, what to train on next (curation), graders and their calibration
against people's labels, the suspects, how the runs fail (failure modes), tool endpoint load,
cost, training curves, what the trainer reported, methods. The headline also says which
differences the comparison could detect (power). A contents line links every section; a section
that cannot be built says why in its place and the rest of the report is written.

Notebook 06-report shows the same verdict, readiness, suspects and endpoint load (through the
``*_html`` functions here) with static figures; the interactive figures are only in the report.

Every string from the logs is HTML-escaped; figures get escaped text from plots.interactive.
Numbers are shown for people (``fmt``); the frames behind them keep full values. A print
stylesheet and ``write_pdf`` (headless Chromium) give clean PDF pages.
"""
from .page import (CSS, LONG_TEXT_MAX, LONG_TEXT_OPEN, NO_MATH, PARTS_CSS, PRINT_JS, PRINT_WIDTH_PX, SHARE_CHECKS,
                   SHORT_WORD, check_value, fragment, long_text)
from .headline import (HIGHER_IS_BETTER, INFRA_DIFFER_P, LOWER_IS_BETTER, NoSharedSamplesError, TRUNCATED_WARN,
                       VERDICT_COLUMNS, headline_html, metric_label, metrics_table, require_shared, two_runs, verdict,
                       verdict_html, verdict_sentence, without_words)
from .power import power_html, power_sentence
from .readiness import readiness_html, report_checks
from .suspects import suspects_html
from .capacity import capacity_html
from .curation import CURATE_FORMATS, CURATION_WORDS, curation_html
from .failures import FAILURE_N_BOOT, FAILURE_TOP, failures_html
from .cost import cost_html
from .calibration import calibration_html
from .methods import methods_html
from .build import build_report, failed_html, write_report
from .pdf import (CHROMIUM_ARGS, CHROMIUM_ENV_VAR, CHROMIUM_NAMES, ChromiumNotFoundError, PDF_TIMEOUT_S,
                  find_chromium, write_pdf)

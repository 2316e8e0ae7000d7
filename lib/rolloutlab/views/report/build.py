"""The report assembled (``build_report``, ``write_report``): the sections in order, a section that
cannot be built says why in its place and the rest is written.
"""
from __future__ import annotations

import functools
import os
from datetime import datetime, timezone
from pathlib import Path

import duckdb
from tqdm.auto import tqdm

from ... import config
from ...analysis.audit import audit
from ...analysis.compare import compare, distribution_shift
from ...analysis.metrics import latency, latency_ecdf, sample_stats
from ...analysis.readiness import check
from ...text.htmltext import esc as _e
from ...version import __version__ as VERSION
from .calibration import calibration_html
from .capacity import capacity_html
from .cost import cost_html
from .curation import curation_html
from .failures import FAILURE_N_BOOT, failures_html
from .graders import _graders
from .headline import NoSharedSamplesError, _headline, require_shared, two_runs
from .methods import methods_html
from .page import CSS, PRINT_JS, _figure, _keep
from .per_sample import _per_sample
from .power import _power_or_failure
from .readiness import _readiness, report_checks
from .suspects import suspects_html
from .training import _trainer, _training

def build_report(con: duckdb.DuckDBPyConnection, base: str, candidate: str, n_boot: int = 2000,
                 progress: bool | None = None, batch_size: int | None = None,
                 compute_multiplier: int | None = None) -> str:
    """The report as one HTML string. ``batch_size``/``compute_multiplier``: the training step the
    capacity section projects (default ``config.CAPACITY_PLANNED_STEP``)."""
    from plotly.offline import get_plotlyjs

    from ..plots import interactive as pi

    base, candidate = two_runs(con, base, candidate)
    disable = config.progress_disabled() if progress is None else not progress
    sections: list[str] = []
    comparison = functools.cache(lambda: require_shared(compare(con, base, candidate, n_boot=n_boot)))
    suspects = functools.cache(lambda: audit(con, candidate, base=base))
    checks = functools.cache(lambda: {run: check(con, run) for run in (base, candidate)})
    power_line = functools.cache(lambda: _power_or_failure(con, base, candidate))
    steps = [
        ("headline", "Headline", lambda: _headline(con, base, candidate, comparison(), suspects(), checks(),
                                                   power_line())),
        ("readiness", "Readiness", lambda: _readiness(base, candidate, report_checks(checks(), power_line()[0]))),
        ("variance", "Variance", lambda: _keep(
            "<h2>Score per sample across attempts</h2><p class='note'>Only samples whose score varies across "
            "attempts give learning signal.</p>" + _figure(pi.variance({base: sample_stats(con, base),
                                                                        candidate: sample_stats(con, candidate)})))),
        ("tool calls", "Tool calls", lambda: _keep("<h2>Tool calls per rollout</h2>" + _figure(
            pi.tool_calls(distribution_shift(con, base, candidate), base, candidate)))),
        ("latency", "Latency", lambda: _keep("<h2>Latency</h2>" + _figure(pi.latency_ecdf(
            latency_ecdf(con, [base, candidate]), {r: latency(con, r, tool_n_boot=0) for r in (base, candidate)})))),
        ("per sample", "Per sample", lambda: _per_sample(con, base, candidate, pi)),
        ("train next", "What to train on next", lambda: curation_html(con, base, candidate)),
        ("graders", "Graders", lambda: _graders(con, base, candidate, comparison(), n_boot, pi)),
        ("calibration", "Graders against labels", lambda: calibration_html(con, base, candidate)),
        ("suspects", "Suspects", lambda: suspects_html(suspects(), candidate)),
        ("how it fails", "How it fails", lambda: failures_html(con, base, candidate, min(n_boot, FAILURE_N_BOOT))),
        ("capacity", "Endpoint load", lambda: capacity_html(con, base, candidate, batch_size, compute_multiplier)),
        ("cost", "Cost", lambda: cost_html(con, base, candidate, n_boot, batch_size, compute_multiplier)),
        ("training", "Training curves", lambda: _training(con, base, candidate, pi)),
        ("trainer", "Trainer", lambda: _trainer(con, pi)),
        ("methods", "Methods", lambda: methods_html(con, base, candidate, n_boot)),
    ]
    comparison()  # runs that are not there, or share no scored sample: an error, not a report of failed sections
    failed = []
    for name, heading, make in tqdm(steps, desc="report", unit="section", disable=disable):
        sections.append(f"<section id='{_section_id(name)}'>{_guarded(name, heading, make, failed)}</section>")
    contents = " · ".join(f"<a href='#{_section_id(name)}'>{_e(heading)}</a>"
                          + (" <span class='failed'>(failed)</span>" if name in failed else "")
                          for name, heading, _ in steps)
    title = f"{_e(base)} → {_e(candidate)}"
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>rolloutlab report: {title}</title>"
            f"<style>{CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            f"<h1>Fine-tuning report: {title}</h1><p class='sub'>rolloutlab {VERSION} · generated "
            f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC</p>"
            f"<nav class='toc no-print'><b>Contents</b>: {contents}</nav>{''.join(sections)}"
            f"<script type='text/javascript'>{PRINT_JS}</script></body></html>")


def _section_id(name: str) -> str:
    return name.replace(" ", "-")


def _guarded(name: str, heading: str, make, failed: list) -> str:
    """A section's HTML; a section that fails says why in its place (escaped) and is added to
    ``failed``, so that one broken section never costs the whole report."""
    try:
        return make()
    except NoSharedSamplesError:
        raise
    except Exception as exc:  # noqa: BLE001 (any error of one section; the others still show)
        failed.append(name)
        return failed_html(heading, exc)


def failed_html(heading: str, exc: BaseException) -> str:
    """The stand-in for a section that could not be built: its heading and the error, escaped."""
    return (f"<h2>{_e(heading)}</h2><p class='note failed'>This section could not be built: "
            f"{_e(type(exc).__name__)}: {_e(str(exc), 500)}. The rest of the report does not depend on it.</p>")


def write_report(con: duckdb.DuckDBPyConnection, base: str, candidate: str, path: str | os.PathLike,
                 n_boot: int = 2000, progress: bool | None = None, **step) -> Path:
    """Build the report and write it to ``path``; returns the path. ``step``: build_report's
    batch_size and compute_multiplier."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(build_report(con, base, candidate, n_boot=n_boot, progress=progress, **step), encoding="utf-8")
    return out

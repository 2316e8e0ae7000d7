"""The report printed to PDF by headless Chromium (``write_pdf``).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ... import config

CHROMIUM_ENV_VAR, CHROMIUM_NAMES, CHROMIUM_ARGS = config.CHROMIUM_ENV_VAR, config.CHROMIUM_NAMES, config.CHROMIUM_ARGS
PDF_TIMEOUT_S = 180


# --- PDF -----------------------------------------------------------------------------------------

class ChromiumNotFoundError(ValueError):
    """No Chromium to print the report with."""


def find_chromium() -> str:
    """Chromium's path: ``$ROLLOUTLAB_CHROMIUM``, else the first of ``CHROMIUM_NAMES`` on PATH."""
    env = os.environ.get(CHROMIUM_ENV_VAR)
    if env:
        if Path(env).is_file() and os.access(env, os.X_OK):
            return env
        raise ChromiumNotFoundError(f"${CHROMIUM_ENV_VAR} is {env}, which is no executable file: point it at "
                                    "Chromium or Chrome, or unset it to look on PATH.")
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise ChromiumNotFoundError(
        "a PDF needs Chromium (or Chrome), and none was found on PATH "
        f"(looked for {', '.join(CHROMIUM_NAMES)}). Install it (Debian/Ubuntu: apt-get install chromium; "
        f"macOS: brew install --cask chromium) or set ${CHROMIUM_ENV_VAR} to its path. Without it, open the "
        "HTML report in a browser and print it to PDF (the report has a print stylesheet).")


def write_pdf(html: str | os.PathLike, pdf: str | os.PathLike | None = None, chromium: str | None = None,
              timeout: float = PDF_TIMEOUT_S) -> Path:
    """Print a written report to PDF with headless Chromium (``--print-to-pdf``): figures drawn
    for the page width, folded text opened, controls hidden (the report's print stylesheet).
    ``pdf`` defaults to the HTML's path with ``.pdf``. Raises ``ChromiumNotFoundError`` (saying how
    to install it) when there is no Chromium, ``RuntimeError`` when printing fails."""
    html = Path(html).resolve()
    out = Path(pdf) if pdf is not None else html.with_suffix(".pdf")
    out = out.resolve()
    browser = chromium or find_chromium()
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="rolloutlab-chromium-") as profile:
        # --virtual-time-budget: Chromium waits for the page's scripts (plotly drawing, then
        # sizing the figures for print on load) before it prints
        command = [browser, "--headless", *CHROMIUM_ARGS, f"--user-data-dir={profile}", "--no-pdf-header-footer",
                   "--virtual-time-budget=15000", "--run-all-compositor-stages-before-draw",
                   f"--print-to-pdf={out}", html.as_uri() + "#print"]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"Chromium did not print {html} within {timeout:g} s: open the HTML in a browser "
                               "and print it to PDF instead.") from None
    if not out.is_file() or out.stat().st_size == 0:
        tail = " ".join((proc.stderr or "").strip().splitlines()[-3:])
        raise RuntimeError(f"Chromium ({browser}) wrote no PDF (exit {proc.returncode}{': ' + tail if tail else ''}). "
                           "Open the HTML report in a browser and print it to PDF instead.")
    return out

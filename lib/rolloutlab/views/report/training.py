"""The training sections: metrics by training step, and the step metrics the trainer reported.
"""
from __future__ import annotations

from ...analysis.compare import by_step
from ...analysis.metrics.common import training_runs
from ...analysis.metrics.training import training_metrics
from ...text.htmltext import esc as _e
from .page import _figure, _keep

def _training(con, base, candidate, pi) -> str:
    runs = training_runs(con, also=[base, candidate])
    info = {r: s for r, s in con.execute("SELECT run_id, step FROM runs").fetchall()}
    stepped = [r for r in runs if info[r] is not None]
    if len(stepped) < 2:
        return "<h2>Training curves</h2><p class='note'>Fewer than two runs carry a training step.</p>"
    steps = sorted({int(info[r]) for r in stepped})
    unstepped = [r for r in runs if info[r] is None]
    left_out = sorted(r for r in info if r not in runs)
    note = (f"{len(steps)} checkpoint{'s' if len(steps) > 1 else ''} by training step "
            f"({', '.join(map(str, steps))}) in {len(stepped)} runs, one line per split"
            + (f"; {', '.join(_e(r) for r in unstepped)} carr{'ies' if len(unstepped) == 1 else 'y'} no step "
               "and is an open marker at step 0" if unstepped else "")
            + (f". Not drawn: {len(left_out)} other run{'s' if len(left_out) > 1 else ''} without a step "
               f"({', '.join(_e(r) for r in left_out)})" if left_out else "") + ".")
    return _keep(f"<h2>Training curves</h2><p class='note' id='training-note'>{note}</p>"
                 + _figure(pi.training_curves(by_step(con, runs))))


def _trainer(con, pi) -> str:
    metrics = training_metrics(con)
    if metrics.empty:
        return ("<h2>What the trainer reported</h2><p class='note'>No trainer metrics loaded (OpenAI fine-tuning "
                "job events, checkpoints).</p>")
    return _keep("<h2>What the trainer reported</h2><p class='note'>The training job's own step metrics: reward on "
                 "training batches and on validation steps, per grader, grader error rates and step time. "
                 "Validation points exist only on validation steps.</p>" + _figure(pi.trainer_curves(metrics)))

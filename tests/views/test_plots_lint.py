"""Every figure function of plots.static and plots.interactive, fed with the frames the store
returns for a demo-like database (the demo's own generators: judged base and candidate with
planted hacks, an endpoint-logged training run with the trainer's job events) and for real tau2
logs, is held to one standard (``plots.lint``): a title, labelled axes, a legend or direct labels
for every series, no duplicate legend entries, no line hidden under another, numbers as people
read them, and the base blue / candidate orange for the runs and nothing else."""
from __future__ import annotations

import inspect

import matplotlib
import plotly.graph_objects as go
import pytest

matplotlib.use("Agg")

import rolloutlab as rl  # noqa: E402
from rolloutlab import config
from rolloutlab.demo import synth  # noqa: E402
from rolloutlab.views.plots import interactive as pi, lint, static as ps  # noqa: E402

BASE, CANDIDATE = "base", "step10"
TAU2 = ("gpt-4.1_airline_default_gpt-4.1_1trials.json",
        "ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm_airline_default_gpt-4.1_1trials.json")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lint")
    con = rl.connect(folder / "demo.duckdb")
    native, _ = synth.write_judged(folder / "native", samples=40, attempts=3, messages=True, hack_rate=0.05)
    rl.ingest(con, native + synth.write_endpoint(folder / "endpoint", samples=20, attempts=2, steps=(0, 5, 10)),
              progress=False)
    yield con
    con.close()


def frames(con, base: str, candidate: str) -> dict:
    """What each figure function draws, from the store (the calls the notebooks and report make)."""
    lat = {r: rl.latency(con, r) for r in (base, candidate)}
    deltas = rl.sample_deltas(con, base, candidate)
    grader = {r: rl.grader_stats(con, r) for r in (base, candidate)}
    suspects = rl.audit(con, candidate, base=base)
    return {
        "variance": lambda m: m.variance({base: rl.sample_stats(con, base), candidate: rl.sample_stats(con, candidate)}),
        "signal_plan": lambda m: m.signal_plan(rl.signal_plan(con, base), base),
        "tool_calls": lambda m: m.tool_calls(rl.distribution_shift(con, base, candidate, "tool_calls"), base, candidate),
        "tool_usage": lambda m: m.tool_usage({base: rl.tool_stats(con, base), candidate: rl.tool_stats(con, candidate)}),
        "turns_and_width": lambda m: m.turns_and_width(rl.summary(con, [base, candidate])),
        "latency_ecdf": lambda m: m.latency_ecdf(rl.latency_ecdf(con, [base, candidate]), lat),
        "tool_latency": lambda m: m.tool_latency(lat),
        "latency_vs_score": lambda m: m.latency_vs_score(rl.rollout_table(con, [base, candidate])),
        "quadrants": lambda m: m.quadrants(deltas, base, candidate),
        "forest": lambda m: m.forest(rl.compare(con, base, candidate, n_boot=200)),
        "sample_scores": lambda m: m.sample_scores(deltas, base, candidate),
        "training_curves": lambda m: m.training_curves(rl.by_step(con), base, candidate),
        "live_panel": lambda m: m.live_panel(rl.live_frame(con)),
        "trainer_curves": lambda m: m.trainer_curves(rl.training_metrics(con)),
        "graders": lambda m: m.graders(grader),
        "grader_disagreement": lambda m: m.grader_disagreement(grader[candidate].attrs["pairs"], candidate),
        "in_flight": lambda m: m.in_flight({base: rl.in_flight(con, base), candidate: rl.in_flight(con, candidate)}),
        "suspects": lambda m: m.suspects(suspects.head(30), candidate),
    }


def figure_functions(module) -> list[str]:
    return sorted(name for name, f in inspect.getmembers(module, inspect.isfunction)
                  if f.__module__ == module.__name__ and not name.startswith("_"))


def cases():
    return [(m, name) for m in (ps, pi) for name in figure_functions(m)]


def test_every_figure_function_is_linted(demo):
    """A new figure function must get its frames here (and so meet the standard)."""
    known = set(frames(demo, BASE, CANDIDATE))
    missing = [f"{m.__name__}.{name}" for m, name in cases() if name not in known]
    assert not missing, f"add these to frames(): {missing}"
    assert len(cases()) >= 30


@pytest.mark.parametrize("module,name", cases(), ids=lambda x: getattr(x, "__name__", x).split(".")[-1])
def test_figure_meets_the_standard(demo, module, name):
    fig = frames(demo, BASE, CANDIDATE)[name](module)
    assert isinstance(fig, go.Figure if module is pi else matplotlib.figure.Figure)
    assert lint.problems(fig, [BASE, CANDIDATE]) == []


TAU2_FIGURES = ["variance", "tool_calls", "tool_usage", "turns_and_width", "latency_vs_score", "quadrants", "forest",
                "sample_scores", "latency_ecdf", "graders"]


@pytest.fixture(scope="module")
def tau2(demo):
    runs = []
    for name in TAU2:
        path = config.real_data_dir() / "tau2-sft" / name
        if not path.exists():
            pytest.skip(f"real logs not found at {path} (set ${config.REAL_DATA_ENV_VAR} to their folder)")
        before = set(rl.runs(demo).run)
        rl.ingest(demo, path, progress=False)
        runs += sorted(set(rl.runs(demo).run) - before)
    return demo, runs[0], runs[1]


@pytest.mark.parametrize("name", TAU2_FIGURES)
def test_figures_of_real_tau2_logs_meet_the_standard(tau2, name):
    con, base, candidate = tau2
    assert base == "gpt-4.1/airline" and candidate.endswith("/airline")
    for module in (ps, pi):
        if hasattr(module, name):
            fig = frames(con, base, candidate)[name](module)
            assert lint.problems(fig, [base, candidate]) == [], (module.__name__, name)


# ---- the lint itself finds what it is for ---------------------------------------------------

def test_lint_finds_undecodable_plotly_figures():
    fig = go.Figure()
    fig.add_scatter(x=[1, 2], y=[3, 4])  # no name, no title, no axis titles
    fig.add_scatter(x=[1, 2], y=[3, 4], name="b", hovertemplate="%{y:.4g}")
    fig.add_scatter(x=[1, 2], y=[5, 6], name="b")
    found = "\n".join(lint.problems(fig))
    for expected in ("no title", "trace 0 (scatter ''): no name", "has no title", "d3 g/e",
                     "legend entry 'b' appears 2 times", "drawn exactly over"):
        assert expected in found, expected
    fig = go.Figure(go.Bar(x=[1], y=[2], name="3.323036e-16 and 40040 and p 0.0004998", marker_color="#0072B2"))
    fig.update_layout(title="t", xaxis_title="x", yaxis_title="y", showlegend=True)
    found = "\n".join(lint.problems(fig, ["base", "cand"]))
    assert "scientific notation" in found and "color of run 'base'" in found


def test_lint_finds_undecodable_matplotlib_figures():
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.subplots()
    ax.plot([1, 2], [10000, 40000], color="#E69F00", label="train")
    ax.plot([1, 2], [10000, 40000], color="#009E73", label="valid")
    found = "\n".join(lint.problems(fig, ["base", "cand"]))
    for expected in ("no title", "no x axis label", "no y axis label", "2 series and no legend",
                     "drawn exactly over"):
        assert expected in found, expected
    ax.legend()
    ax.set_title("t")
    found = "\n".join(lint.problems(fig, ["base", "cand"]))
    assert "color of run 'cand'" in found and "series and no legend" not in found


def test_lint_accepts_a_figure_that_meets_the_standard():
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.subplots()
    ax.plot([1, 2], [1, 2], color="#0072B2", label="base")
    ax.plot([1, 2], [2, 3], color="#E69F00", label="cand (10 rollouts)")
    ax.set(title="t", xlabel="step", ylabel="score")
    ax.legend()
    assert lint.problems(fig, ["base", "cand"]) == []
    assert lint.text_problems(["1,234 calls, 0.00378, p < 0.001, fin-00012, 40%"], "x") == []
    assert lint.text_problems(["40040 tokens"], "x")

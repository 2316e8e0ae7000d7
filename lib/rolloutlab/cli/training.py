"""Commands about what to train on next and how it fails: ``curate`` (and the training files),
``labels`` (export, import, sample), ``failure-modes``.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

from .. import config
from .common import (EXIT_FAILED, EXIT_OK, PASS_THRESHOLD_HELP, _add_db, _for_people, _json_records, _print_json,
                     _print_reasons, _print_table, _printed_as_json_or_empty, _read, _writing,
                     terminal_safe)

# The layouts ``curate --out`` writes: rolloutlab.exports.training_files.EXPORT_FORMATS (not imported here: it
# loads pyarrow; tests/cli/test_cli.py checks they agree).
CURATE_FORMATS = ("openai-rft", "verl", "trl", "jsonl", "bedrock-nova", "gemini-rl", "verifiers")


def _one_or_several(runs: list[str]):
    return runs[0] if len(runs) == 1 else runs


_CURATE_WORDS = [("keep_validation=False", "--no-keep-validation"), ("validation_share", "--validation-share")]


def _cli_words(text: str) -> str:
    """The library's parameter names in a message as the command line spells them."""
    for python, cli in _CURATE_WORDS:
        text = text.replace(python, cli)
    return text


def _print_verdicts(label: str, counts: dict, samples: int, attrs: dict) -> None:
    import pandas as pd

    from ..text import fmt

    band = attrs["band"]
    shown = (f"{fmt.share(band[0])}-{fmt.share(band[1])} pass rate" if attrs["on"] == "pass_rate"
             else f"mean score {fmt.number(band[0])}-{fmt.number(band[1])}")
    print(f"{label}: {samples:,} samples (keep: {shown}, at least {attrs['min_attempts']} attempts)")
    _print_table(pd.DataFrame({"verdict": list(counts), "samples": [fmt.count(n) for n in counts.values()],
                               "share": [fmt.share(n / samples) if samples else fmt.MISSING
                                         for n in counts.values()]}))


def _forecast_line(rows: list[dict]) -> str | None:
    """The forecast of ``curation.json`` in one line."""
    from ..text import fmt

    rows = [r for r in rows if r.get("expected_signal_share") is not None]
    if not rows:
        return None
    text = ("expected signal share of the kept samples (attempts per sample: share): "
            + ", ".join(f"{r['k']}: {fmt.share(r['expected_signal_share'])}" for r in rows))
    best = next((r for r in rows if r.get("recommended")), None)
    target = fmt.share(rows[0]["target"])
    return text + (f"; {target} reached at {best['k']} attempts per sample (the compute multiplier to ask for)"
                   if best else f"; no number of attempts reaches {target}")


def cmd_curate(args) -> int:
    import json

    import pandas as pd

    from ..text import fmt

    if args.to and args.out is None:
        raise ValueError("--to is the layout of the files --out writes: add --out DIR")
    if args.audit_base and not args.drop_suspects:
        raise ValueError("--audit-base is the base run of --drop-suspects' audit: add --drop-suspects")
    run = _one_or_several(args.run)
    options = dict(band=tuple(args.band) if args.band else None, on=args.on, min_attempts=args.min_attempts,
                   drop_suspects=args.drop_suspects, audit_base=args.audit_base,
                   validation_share=args.validation_share, seed=args.seed, keep_validation=not args.no_keep_validation,
                   pass_threshold=args.pass_threshold)
    label = ", ".join(args.run)
    if args.out is None:
        from ..analysis.curation import curate

        df = _read(args, lambda con: curate(con, run, **options))
        if args.json:
            _print_json(_json_records(df))
            return EXIT_OK
        a = df.attrs
        _print_verdicts(label, a["counts"], a["samples"], a)
        print(f"kept: {a['splits']['train']:,} train, {a['splits']['validation']:,} validation "
              f"(by whole groups of the same or near-duplicate prompts)")
        if a.get("advice"):
            print(f"nothing to train on: {a['advice']}")
        if len(df):
            shown = df.head(args.limit) if args.limit else df
            print()
            _print_table(pd.DataFrame({
                "sample_id": shown.sample_id, "verdict": shown.verdict, "split": shown.split.map(fmt.value),
                "attempts": shown.attempts.map(fmt.count), "pass_rate": shown.pass_rate.map(fmt.share),
                "reason": shown.reason}), left=("reason",))
            if len(shown) < len(df):
                print(f"(first {len(shown)} of {len(df)}; --limit 0 for all)")
        if a.get("advice"):
            return EXIT_FAILED
        print(f"\nwrite the kept samples as training files: rolloutlab curate "
              f"--run {' --run '.join(map(shlex.quote, args.run))} "
              f"... --out DIR --to {'|'.join(CURATE_FORMATS)}")
        return EXIT_OK

    from ..exports.training_files import write_curated

    with _writing(args.out, "--out"):
        manifest = _read(args, lambda con: write_curated(con, run, args.out, to=args.to or "openai-rft", **options))
    if args.json:
        _print_json(json.dumps(manifest, indent=2, ensure_ascii=False))
    else:
        _print_verdicts(label, manifest["counts"], manifest["samples"], manifest["parameters"])
        print()
        for split, facts in manifest["files"].items():
            if split == "curation":
                continue
            print(f"wrote {facts['path']} ({facts['rows']:,} {split} samples, {facts['bytes']:,} bytes, "
                  f"{manifest['to']})")
        print(f"wrote {manifest['files']['curation']} (what was curated, how, and from which files)")
        for why, what in manifest["not_exported"].items():
            print(f"not exported: {what['samples']:,} kept samples, {why.replace('_', ' ')} "
                  f"(e.g. {', '.join(what['examples'])})")
        line = _forecast_line(manifest["forecast"])
        if line:
            print(line)
    for warning in manifest["warnings"]:
        print(terminal_safe(f"rolloutlab curate: warning: {_cli_words(warning)}"), file=sys.stderr)
    return EXIT_OK if sum(manifest["exported"].values()) else EXIT_FAILED


def _table_file(path: Path, df) -> None:
    """``df`` as CSV (text cells that start like a formula get a leading ') or JSON lines, by the
    file's extension."""
    from ..analysis.labelling import EXPORT_FORMATS, _safe_cell

    kind = EXPORT_FORMATS.get(path.suffix.lower())
    if kind is None:
        raise ValueError(f"{path}: name it .csv or .jsonl")
    if path.is_dir():
        raise ValueError(f"{path} is a folder: give a file name for the sheet (.csv or .jsonl)")
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "csv":
        import pandas as pd

        text = [c for c in df.columns if not (pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c]))]
        safe = df.assign(**{c: df[c].map(_safe_cell) for c in text})
        # \r\n ends a row, so a \r or \n inside a cell is quoted, never a new row
        safe.to_csv(path, index=False, lineterminator="\r\n")
    else:
        path.write_text(df.to_json(orient="records", lines=True, double_precision=10) + ("\n" if len(df) else ""))


def cmd_labels(args) -> int:
    return {"export": _labels_export, "import": _labels_import, "sample": _labels_sample}[args.labels_command](args)


def _labels_export(args) -> int:
    from ..analysis.labelling import export_labels

    with _writing(args.out, "--out"):
        df = _read(args, lambda con: export_labels(con, args.out, run=args.run))
    whose = f" of {args.run}'s rollouts" if args.run else ""
    print(f"wrote {args.out}: {len(df):,} labels{whose}, {df.rollout_id.nunique():,} rollouts, "
          f"{df.who.nunique():,} labellers" + ("" if len(df) else " (none stored yet: rolloutlab labels sample, "
                                                                  "then rolloutlab labels import FILE)"))
    return EXIT_OK


def _labels_import(args) -> int:
    from ..store import database as store
    from ..analysis.labelling import import_labels

    path = config.db_path(args.db)
    if not path.exists():  # a new, empty database would take the labels and match no rollout
        raise store.StoreError(f"No database at {path}. Import labels into the database that holds the rollouts "
                               f"(--db DB), or create it first: rolloutlab ingest PATH --db {path}")
    con = store.connect(args.db)  # writes, as ingest does
    try:
        result = import_labels(con, args.file, who=args.who)
    finally:
        con.close()
    row = result.iloc[0]
    if args.json:
        _print_json(_json_records(result))
    else:
        print(f"{row.path}: {row.records:,} records, {row.loaded:,} labels loaded, {row.duplicates:,} already "
              f"stored, {row.rejected:,} rejected")
        _print_reasons(row.reasons, row.rejected, f"and {row.rejected - len(row.reasons):,} more")
        if row.unknown_rollouts:
            print(f"{row.unknown_rollouts:,} labelled rollouts are not in {path}: their labels apply once they are "
                  "ingested")
    return EXIT_FAILED if row.records and not (row.loaded or row.duplicates) else EXIT_OK


def _clipped(text, n: int) -> str:
    text = "" if text is None or (isinstance(text, float) and text != text) else " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _labels_sample(args) -> int:
    from ..analysis.labelling import labelling_sample

    if args.n < 1:
        raise ValueError(f"--n {args.n}: give 1 or more rollouts")
    df = _read(args, lambda con: labelling_sample(con, args.run, n=args.n, seed=args.seed,
                                                  unlabelled_only=not args.include_labelled,
                                                  with_score=args.with_score))
    if args.out is not None:
        sheet = df.assign(value=None, note=None, who=None)
        with _writing(args.out, "--out"):
            _table_file(args.out, sheet)
    empty = (f"no counted rollouts in {args.run}" if args.include_labelled
             else f"no unlabelled counted rollouts in {args.run} (--include-labelled draws from every one)")
    if _printed_as_json_or_empty(args, df, empty):
        return EXIT_OK
    if args.out is None:
        shown = df.drop(columns=["prompt", "reference", "open_with"]).assign(
            final_answer=[_clipped(a, 60) for a in df.final_answer])
        _print_table(_for_people(shown), left=("final_answer",))
    print(f"{len(df):,} rollouts of {args.run} drawn at random (seed {args.seed})"
          + ("" if len(df) == args.n else f", all there are of {args.n:,} asked for") + ".")
    if args.out is not None:
        print(f"wrote {args.out}: each rollout's prompt, reference and final answer (open_with opens its trajectory "
              "in the explorer); fill in value (pass / fail or a score) and note, then: "
              f"rolloutlab labels import {shlex.quote(str(args.out))} --who NAME")
    else:
        print("label every one of them (a hand-picked subset biases the estimates); --out FILE writes a sheet to "
              "fill in and import")
    return EXIT_OK


def _examples(ids, n: int) -> str:
    ids = list(ids)
    return ", ".join(ids[:n]) + (f" (+{len(ids) - n} more)" if len(ids) > n else "")


def _mode_json(df) -> str:
    """The modes without the per-rollout frame (``attrs``), lists kept as lists."""
    out = df.copy()
    out.attrs = {}
    return _json_records(out)


def cmd_failure_modes(args) -> int:
    import pandas as pd

    from ..text import fmt
    from ..analysis.failure_modes import diff_sentence, failure_modes, failure_modes_diff

    if args.examples < 0:
        raise ValueError(f"--examples {args.examples}: give 0 or more")
    if args.k is not None and args.k < 1:  # before opening anything: the range's top needs the data
        raise ValueError(f"--k {args.k}: give a number of modes from 1 to the number of model failures, or leave "
                         "--k out to choose it by silhouette")
    labeler = None
    if args.labeler:
        from ..analysis.failure_labeler import endpoint_labeler

        labeler = endpoint_labeler()
    if args.candidate is None:
        df = _read(args, lambda con: failure_modes(con, args.run, pass_threshold=args.pass_threshold, k=args.k,
                                                   method=args.method, seed=args.seed, n_boot=args.n_boot,
                                                   labeler=labeler))
    else:
        df = _read(args, lambda con: failure_modes_diff(con, args.run, args.candidate,
                                                        pass_threshold=args.pass_threshold, k=args.k,
                                                        method=args.method, seed=args.seed, n_boot=args.n_boot,
                                                        per=args.per, holdout=args.holdout, adjust=args.adjust,
                                                        alpha=args.alpha, n_perm=args.n_perm, labeler=labeler))
    for error in df.attrs.get("labeler_errors", []):
        print(terminal_safe(f"rolloutlab failure-modes: the labeller failed for {error}; the automatic label stays"),
              file=sys.stderr)
    if args.json:
        _print_json(_mode_json(df))
        return EXIT_OK
    a = df.attrs
    ci = f"{int(a['ci'] * 100)}% CI"
    how = (f"{a.get('method', args.method)}" + (" linkage" if a.get("method", args.method) == "average" else "")
           + (f", k = {a['k']} model modes" if "k" in a else "")
           + (f" by {a['k_chosen_by']}" if "k_chosen_by" in a else ""))
    if args.candidate is None:
        print(f"{a['run']}: {a['failures']:,} failing of {a['rollouts']:,} rollouts, {len(df)} modes ({how})")
        if df.empty:
            return EXIT_OK
        print()
        _print_table(pd.DataFrame({
            "mode": df["mode"], "kind": df.kind, "rollouts": df.rollouts.map(fmt.count),
            "share_of_failures": df.share_of_failures.map(fmt.share),
            ci: [f"{fmt.share(lo)}-{fmt.share(hi)}" if lo == lo else fmt.MISSING
                 for lo, hi in zip(df.share_ci_low, df.share_ci_high)],
            "label": df.label}), left=("label",))
        if args.examples:
            print("\nexamples (most typical first):")
            for row in df.itertuples():
                print(f"  {row.mode}: {_examples(row.examples, args.examples)}")
    else:
        tested = ("every sample" if a["in_sample"] else
                  f"{a['samples_tested']:,} samples held out of the fit ({a['samples_fitted']:,} fitted)")
        print(f"{a['base']} -> {a['candidate']}: {a['base_failures']:,} of {a['base_rollouts']:,} and "
              f"{a['candidate_failures']:,} of {a['candidate_rollouts']:,} rollouts fail; {len(df)} modes "
              f"fitted on both ({how}); counted and tested on {tested}; verdicts: permutation p-values, "
              f"{a['adjust_words']} adjustment across modes, alpha {a['alpha']:g}")
        if df.empty:
            print(diff_sentence(df))
            return EXIT_OK
        print()
        b, c, d = (("base_rate", "candidate_rate", "rate_diff") if a["per"] == "rollouts"
                   else ("base_share", "candidate_share", "diff"))
        unit = "of rollouts" if a["per"] == "rollouts" else "of failures"
        _print_table(pd.DataFrame({
            "mode": df["mode"], "kind": df.kind, a["base"]: df.base_rollouts.map(fmt.count),
            a["candidate"]: df.candidate_rollouts.map(fmt.count),
            f"share {unit}": [f"{fmt.share(x)} -> {fmt.share(y)}" for x, y in zip(df[b], df[c])],
            f"{ci} of diff (points)": [fmt.interval(lo * 100, hi * 100) for lo, hi in
                                       zip(df[f"{d}_ci_low"], df[f"{d}_ci_high"])],
            "p adjusted": [fmt.number(x) for x in df.p_adjusted],
            "verdict": df.verdict, "label": df.label}), left=("label",))
        if args.examples:
            print("\nexamples (most typical first):")
            for row in df.itertuples():
                for run, ids in ((a["base"], row.examples_base), (a["candidate"], row.examples_candidate)):
                    if len(ids):
                        print(f"  {row.mode} in {run}: {_examples(ids, args.examples)}")
        print("\n" + diff_sentence(df))
    print("\nA mode is a pattern failing rollouts share, not a cause: read its examples to find the cause.")
    return EXIT_OK


def add_curate(sub) -> None:
    p = sub.add_parser("curate", help="which samples to train on next (by learning signal); with --out, the "
                                      "training files")
    _add_db(p)
    p.add_argument("--run", required=True, action="append",
                   help="run label (repeat for a training run's steps: each sample is judged at its latest)")
    p.add_argument("--band", nargs=2, type=float, metavar=("LO", "HI"),
                   help=f"keep samples whose pass rate (or mean score) lies in [LO, HI] "
                        f"(default {' '.join(map(str, config.CURATE_DEFAULTS['band']))})")
    p.add_argument("--on", choices=("pass_rate", "mean_score"), help="what the band reads (default pass_rate)")
    p.add_argument("--min-attempts", type=int, metavar="N", help="fewer counted attempts: few_attempts "
                                                    f"(default {config.CURATE_DEFAULTS['min_attempts']})")
    p.add_argument("--validation-share", type=float, metavar="X",
                   help="share of the kept samples for validation, by whole groups "
                        f"(default {config.CURATE_DEFAULTS['validation_share']})")
    p.add_argument("--seed", type=int, metavar="S", help="which groups go to validation (default 0)")
    p.add_argument("--drop-suspects", action="store_true", help="samples with a rollout the audit flags: suspect")
    p.add_argument("--audit-base", metavar="RUN", help="with --drop-suspects: the base run the audit compares with")
    p.add_argument("--no-keep-validation", action="store_true",
                   help="split by --validation-share even samples other runs evaluated on a validation split")
    p.add_argument("--pass-threshold", type=float, default=None, help=PASS_THRESHOLD_HELP)
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="write the kept samples' train / validation files and curation.json here")
    p.add_argument("--to", choices=CURATE_FORMATS, help="layout of the files (with --out; default openai-rft)")
    p.add_argument("--limit", type=int, default=20, help="without --out: at most this many samples shown "
                                                         "(default 20; 0 for all)")
    p.add_argument("--json", action="store_true", help="the samples (with --out: curation.json) as JSON")


def add_labels(sub) -> None:
    p = sub.add_parser("labels", help="people's judgements of rollouts: export, import, a random sample to label")
    lsub = p.add_subparsers(dest="labels_command", required=True, metavar="{export,import,sample}")
    q = lsub.add_parser("export", help="write the stored labels to a CSV or JSONL file")
    _add_db(q)
    q.add_argument("--out", required=True, type=Path, metavar="FILE", help="FILE.csv or FILE.jsonl")
    q.add_argument("--run", help="only the labels of this run's rollouts")
    q = lsub.add_parser("import", help="load labels from a CSV or JSONL file (writes to the database)")
    q.add_argument("file", type=Path, metavar="FILE", help="columns of `labels export`; value (pass / fail or a "
                                                           "number) and rollout_id required")
    _add_db(q)
    q.add_argument("--who", metavar="NAME", help="labeller for the records that name none")
    q.add_argument("--json", action="store_true")
    q = lsub.add_parser("sample", help="a seeded random sample of a run's rollouts to label (unbiased estimates "
                                       "need a random subset)")
    _add_db(q)
    q.add_argument("--run", required=True)
    q.add_argument("--n", type=int, default=config.LABEL_SAMPLE_SIZE, help="rollouts (default %(default)s)")
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--include-labelled", action="store_true", help="also rollouts someone labelled already")
    q.add_argument("--with-score", action="store_true",
                   help="show the grader's score too (left out by default: a labeller who sees it leans toward it)")
    q.add_argument("--out", type=Path, metavar="FILE",
                   help="a labelling sheet (FILE.csv or FILE.jsonl) to fill in and import")
    q.add_argument("--json", action="store_true")


def add_failure_modes(sub) -> None:
    p = sub.add_parser("failure-modes", help="failing rollouts grouped into modes; with --candidate, how the "
                                             "modes changed")
    _add_db(p)
    p.add_argument("--run", required=True, help="the run (the base, with --candidate)")
    p.add_argument("--candidate", help="compare: modes fitted on both runs' failures, a verdict per mode")
    p.add_argument("--k", type=int, help="number of modes, 1 to the number of model failures (default: the best "
                                         "silhouette)")
    p.add_argument("--method", choices=("average", "kmeans", "hdbscan"), default="average")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--per", choices=("rollouts", "failures"), default="rollouts",
                   help="with --candidate: what the verdicts read (default: share of rollouts)")
    p.add_argument("--adjust", choices=("holm", "bh"), default=config.FAILURE_MODES_ADJUST,
                   help="with --candidate: the adjustment of the p-values across modes (default: holm)")
    p.add_argument("--alpha", type=float, default=config.FAILURE_MODES_ALPHA,
                   help="with --candidate: a change is called when its adjusted p-value is at most this")
    p.add_argument("--holdout", type=float, default=config.FAILURE_MODES_HOLDOUT,
                   help="with --candidate: the share of samples held out of the fit to count and test on "
                        "(default 0: fitted blind to the runs, tested by permutation)")
    p.add_argument("--n-perm", type=int, default=config.FAILURE_MODES_N_PERM,
                   help="with --candidate: permutations for the p-values")
    p.add_argument("--labeler", action="store_true",
                   help=f"name the modes with the team's own model at ${config.LABELER_URL_ENV_VAR} "
                        f"(${config.LABELER_MODEL_ENV_VAR}; OpenAI-compatible)")
    p.add_argument("--pass-threshold", type=float, default=None, help=PASS_THRESHOLD_HELP)
    p.add_argument("--n-boot", type=int, default=config.FAILURE_MODES_N_BOOT, help="bootstrap resamples for the CIs")
    p.add_argument("--examples", type=int, default=3, help="example rollout ids shown per mode (default 3)")
    p.add_argument("--json", action="store_true")


# each command: the function that adds its parser, the one that runs it
COMMANDS = {"curate": (add_curate, cmd_curate), "labels": (add_labels, cmd_labels), "failure-modes": (add_failure_modes, cmd_failure_modes)}

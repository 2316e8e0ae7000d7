"""Labels (rl.label, rl.labels, import / export, the random subset) and grader calibration."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import rolloutlab as rl
from rolloutlab.analysis import stats
from rolloutlab.analysis.calibration import ROLLOUT_SCORE, grader_calibration

from conftest import rollout, write_jsonl

from rolloutlab.analysis import labelling as L


def rows(df, cols) -> list[list]:
    """Cells as Python values, a missing one as None."""
    return [[None if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) else v for v in r]
            for r in df[cols].astype(object).values.tolist()]


def small_run(run="r", n=6, **kw):
    return [rollout(run, f"s{i}", float(i % 2), rollout_id=f"{run}-{i}", **kw) for i in range(n)]


def test_label_and_read_back(load, con):
    load(small_run())
    row = L.label(con, "r-0", "pass", note="right answer, wrong units", who="ann")
    assert row[["rollout_id", "run", "sample_id", "value", "passed", "note", "who", "origin"]].iloc[0].tolist() == \
        ["r-0", "r", "s0", 1.0, True, "right answer, wrong units", "ann", "python"]
    L.label(con, "r-1", False, who="bob", origin="explorer")
    L.label(con, "r-2", 0.75)
    df = L.labels(con, "r")
    assert rows(df, ["rollout_id", "value", "passed", "who", "origin"]) == [
        ["r-0", 1.0, True, "ann", "python"], ["r-1", 0.0, False, "bob", "explorer"], ["r-2", 0.75, None, None, "python"]]
    assert df.labelled_at.is_monotonic_increasing
    assert L.labels(con, rollout_ids="r-1").who.tolist() == ["bob"]  # the explorer's open rollout
    with pytest.raises(L.LabelError, match="no rollout 'nope'"):
        L.label(con, "nope", "pass")
    for bad, why in (("maybe", "use pass / fail or a number"), (float("inf"), "not a finite number"),
                     (None, "use pass / fail or a number")):
        with pytest.raises(L.LabelError, match=why):
            L.label(con, "r-0", bad)
    with pytest.raises(L.LabelError, match="note has 10,001 characters"):
        L.label(con, "r-0", "pass", note="x" * 10_001)
    assert len(L.labels(con)) == 3  # nothing stored by the refusals


def test_labels_survive_reingest(con, tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", small_run())
    rl.ingest(con, path)
    L.label(con, "r-3", "fail", who="ann")
    write_jsonl(path, [dict(r, score=1 - r["score"]) for r in small_run(n=8)])  # changed: its rollouts are replaced
    assert rl.ingest(con, path).action.tolist() == ["replaced"]
    df = L.labels(con, "r")
    assert df[["rollout_id", "run", "sample_id", "passed"]].values.tolist() == [["r-3", "r", "s3", False]]


def test_a_shared_reader_labels_through_a_short_lived_writer(con, db_path):
    rl.ingest(con, write_jsonl(db_path.parent / "r.jsonl", small_run()))
    con.close()
    reader = rl.connect(db_path, read_only=True)
    L.label(reader, "r-1", "pass", who="explorer user", origin="explorer")
    assert L.labels(reader).rollout_id.tolist() == ["r-1"]  # the reader reads what was written
    reader.release()  # the reader lets go (it does by itself after READER_IDLE_S)...
    writer = rl.connect(db_path)  # ...and the labelling writer is closed: a writer opens the file
    assert writer.execute("SELECT count(*) FROM labels").fetchone()[0] == 1
    writer.close()
    reader.close()
    plain = rl.connect(db_path, read_only=True, shared=False)  # a plain read-only connection cannot write
    with pytest.raises(L.LabelError, match="This connection is read-only"):
        L.label(plain, "r-2", "pass")
    plain.close()


@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_export_and_import_round_trip(load, con, tmp_path, suffix):
    load(small_run())
    L.label(con, "r-0", "pass", note="=HYPERLINK(\"http://x\")", who="ann")
    L.label(con, "r-1", 0.25, note="ünïcode, \"quoted\", two\nlines", who="bob")
    path = tmp_path / f"labels.{suffix}"
    written = L.export_labels(con, path)
    assert len(written) == 2
    if suffix == "csv":
        assert "'=HYPERLINK" in path.read_text()  # a spreadsheet shows it as text
    other = rl.connect(tmp_path / "other.duckdb")
    rl.ingest(other, write_jsonl(tmp_path / "same.jsonl", small_run()))
    result = L.import_labels(other, path)
    assert result[["format", "records", "loaded", "duplicates", "rejected", "unknown_rollouts"]].iloc[0].tolist() == \
        [suffix, 2, 2, 0, 0, 0]
    cols = ["rollout_id", "value", "passed", "note", "who", "labelled_at"]
    assert rows(L.labels(other), cols) == rows(L.labels(con), cols)
    again = L.import_labels(other, path).iloc[0]
    assert (again.loaded, again.duplicates) == (0, 2)  # importing twice adds nothing
    other.close()


def test_import_rejects_bad_records_and_keeps_unknown_rollouts(load, con, tmp_path):
    load(small_run())
    lines = [{"rollout_id": "r-0", "value": "correct"},
             {"rollout_id": "r-1", "label": 0, "labelled_at": "2025-03-01T10:00:00+02:00", "who": "cy"},
             {"rollout_id": "not-loaded-yet", "value": "fail"},
             {"rollout_id": "r-2", "value": "perhaps"},
             {"rollout_id": "r-3", "value": 1, "labelled_at": "3025-01-01"},
             {"value": 1},
             {"rollout_id": "r-4", "value": 1, "note": "n" * 10_001}]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join([json.dumps(x) for x in lines] + ["{not json", "[1, 2]"]) + "\n")
    res = L.import_labels(con, path, who="team").iloc[0]
    assert (res.records, res.loaded, res.rejected, res.unknown_rollouts) == (9, 3, 6, 1)
    assert res.reasons[0] == "line 4: label 'perhaps': use pass / fail or a number"
    assert res.reasons[1].startswith("line 5: labelled_at '3025-01-01': outside")
    assert res.reasons[2:4] == ["line 6: no rollout_id", "line 7: note has 10,001 characters; at most 10,000"]
    assert res.reasons[4].startswith("line 8: not JSON") and len(res.reasons) == 5  # the first 5 of 6 reasons
    df = L.labels(con)
    assert df.set_index("rollout_id").who.to_dict() == {"r-0": "team", "r-1": "cy", "not-loaded-yet": "team"}
    assert set(df.origin) == {"import:in.jsonl"}
    assert str(df.set_index("rollout_id").loc["r-1", "labelled_at"]) == "2025-03-01 08:00:00"  # UTC
    assert df.set_index("rollout_id").run.isna().loc["not-loaded-yet"]
    with pytest.raises(L.LabelError, match="name it .csv or .jsonl"):
        L.import_labels(con, tmp_path / "x.txt")


def test_a_sheet_without_times_imported_twice_adds_nothing(load, con, tmp_path):
    load(small_run())
    path = tmp_path / "sheet.csv"
    path.write_text("rollout_id,value,note\nr-0,pass,\nr-1,fail,looks wrong\n")
    assert L.import_labels(con, path).loaded[0] == 2
    again = L.import_labels(con, path).iloc[0]
    assert (again.loaded, again.duplicates) == (0, 2) and len(L.labels(con)) == 2


def test_labelling_sample_is_random_seeded_and_skips_labelled(load, con):
    load(small_run("a", n=200) + small_run("b", n=50))
    one = L.labelling_sample(con, "a", n=30, seed=1)
    assert len(one) == 30 and one.rollout_id.is_unique and set(one.run) == {"a"}
    assert one.rollout_id.tolist() == L.labelling_sample(con, "a", n=30, seed=1).rollout_id.tolist()
    other = L.labelling_sample(con, "a", n=30, seed=2)
    assert len(set(one.rollout_id) & set(other.rollout_id)) < 15  # ~30 x 30 / 200 = 4.5 expected
    # not the first rows in any order: ids spread over the run
    numbers = sorted(int(r.split("-")[1]) for r in one.rollout_id)
    assert numbers[0] < 40 and numbers[-1] > 160
    for rid in one.rollout_id[:10]:
        L.label(con, rid, "pass")
    rest = L.labelling_sample(con, "a", n=200, seed=1)
    assert len(rest) == 190 and not set(rest.rollout_id) & set(one.rollout_id[:10])


def test_a_sheet_to_label_holds_what_a_person_judges_from_and_not_the_grade(load, con, db_path, tmp_path, capsys):
    from rolloutlab.cli import main

    long_prompt = "What was Acme's revenue? " + "x" * 5000
    load([rollout("q", f"s{i}", float(i % 2), rollout_id=f"r-{i}", answer=f"${i}M", prompt=long_prompt if i == 0
                  else f"question {i}", reference=f"${i}.0M") for i in range(6)])
    df = L.labelling_sample(con, "q", n=6, seed=0)
    assert "score" not in df.columns  # a labeller who sees the grade leans toward it
    row = df.set_index("rollout_id").loc["r-3"]
    assert (row.prompt, row.reference, row.final_answer) == ("question 3", "$3.0M", "$3M")
    assert row.open_with == "rl.explore(con).open_rollout('r-3')"
    cut = df.set_index("rollout_id").loc["r-0", "prompt"]
    assert len(cut) == 4000 + len(" […]") and cut.endswith(" […]")
    assert L.labelling_sample(con, "q", n=6, seed=0, with_score=True).set_index("rollout_id").score["r-3"] == 1.0
    con.close()
    sheet = tmp_path / "sheet.csv"
    assert main(["labels", "sample", "--run", "q", "--n", "6", "--db", str(db_path), "--out", str(sheet)]) == 0
    text = sheet.read_text()
    header = text.splitlines()[0].split(",")
    assert header[:10] == ["rollout_id", "run", "sample_id", "attempt", "status", "prompt", "reference", "final_answer",
                           "n_tool_calls", "open_with"] and "score" not in header
    # filled in and brought back: the extra columns are read past
    rows = text.splitlines()
    sheet.write_text("\r\n".join([rows[0]] + [r[:-2] + "pass,," for r in rows[1:]]) + "\r\n")
    assert main(["labels", "import", str(sheet), "--who", "ann", "--db", str(db_path)]) == 0
    assert "6 records, 6 labels loaded" in capsys.readouterr().out


def test_calibration_on_a_hand_checked_run(load, con):
    """10 rollouts over 5 samples; the grader passes r-0..r-5 and fails the rest; 6 are labelled."""
    grader = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    records = [rollout("r", f"s{i // 2}", float(g), rollout_id=f"r-{i}",
                       grades=[{"grader": "judge", "score": float(g)}, {"grader": "format", "score": 1.0}])
               for i, g in enumerate(grader)]
    load(records)
    truth = {"r-0": "pass", "r-1": "fail", "r-2": "pass", "r-6": "fail", "r-7": "pass", "r-8": "fail"}
    for rid, v in truth.items():
        L.label(con, rid, v, who="ann")
    L.label(con, "r-1", "pass", who="old", labelled_at="2020-01-01")
    L.label(con, "r-1", "fail", who="old", labelled_at="2021-01-01")  # bob's latest word counts: fail
    df = grader_calibration(con, "r", lam=1.0).set_index("grader")
    assert df.index.tolist() == [ROLLOUT_SCORE, "format", "judge"]
    j = df.loc["judge"]
    # labelled: grader 1,1,1,0,0,0 vs truth 1,0,1,0,1,0 -> tp 2, fp 1, fn 1, tn 2
    assert (j.graded, j.labelled, j.tp, j.fp, j.fn, j.tn) == (10, 6, 2, 1, 1, 2)
    from sklearn.metrics import cohen_kappa_score

    assert j.accuracy == pytest.approx(4 / 6)
    assert j.kappa == pytest.approx(cohen_kappa_score([1, 1, 1, 0, 0, 0], [1, 0, 1, 0, 1, 0]))
    assert j.grader_rate == pytest.approx(0.6) and j.label_rate == pytest.approx(0.5)
    # PPI (lam = 1): mean of the grader on all 10, plus the mean of (label - grader) on the 6
    assert j.ppi_rate == pytest.approx(0.6 + (0 - 1 + 0 + 0 + 1 + 0) / 6)
    f = df.loc["format"]
    assert (f.tp, f.fp, f.grader_rate, f.kappa) == (3, 3, 1.0, 0.0)  # always passing: no better than chance
    assert df.loc[ROLLOUT_SCORE, "tp"] == 2  # the rollout's score is the judge's here
    only = grader_calibration(con, "r", grader="judge")
    assert only.grader.tolist() == ["judge"]
    with pytest.raises(ValueError, match="grader 'nope' did not grade run 'r'"):
        grader_calibration(con, "r", grader="nope")
    assert grader_calibration(con, "r", origin="import").labelled.tolist() == [0, 0, 0]
    # 6 labels: the interval was not measured to keep its level there, and every view says so
    from rolloutlab.analysis.calibration import PPI_MIN_LABELS, findings, report_table

    assert PPI_MIN_LABELS == 20 and not df.ppi_level_holds.any()
    assert "fewer than 20 labelled rollouts: the prediction-powered interval was not measured to keep its level " \
           "there and may be too narrow" == grader_calibration(con, "r").attrs["ppi_note"]
    table = report_table(df.reset_index())
    assert table["corrected by labels (PPI)"].str.endswith("(interval may be too narrow: few labels)").all()
    said = findings(grader_calibration(con, "r"))
    assert said[0].startswith("(score) (6), format (6), judge (6): fewer than 20 labelled rollouts")


def test_calibration_default_is_classic_ppi_with_the_small_label_floor(load, con):
    """lam = 1 by default (tuned on the data the interval covers below its level); with few labels
    the variance is at least the Bonett-Price floor: a grader that made no mistake on 6 labels
    still gets an interval wider than 0."""
    records = [rollout("p", f"s{i}", float(i % 2), rollout_id=f"p-{i}") for i in range(12)]
    load(records)
    for i in range(6):
        L.label(con, f"p-{i}", "pass" if i % 2 else "fail", who="ann")
    row = grader_calibration(con, "p").set_index("grader").loc[ROLLOUT_SCORE]
    assert row.lam == 1.0 and row.ppi_rate == pytest.approx(0.5)
    # labelled y - f: six 0s, plus the pseudo-units 1 and -1 -> variance 2/8 over 8; f's clustered part
    f = np.array([float(i % 2) for i in range(12)])
    full = 12 / 11 * ((f - f.mean()) ** 2).sum() / 12 ** 2
    se = np.sqrt((2 / 8) / 8 + full)
    assert row.ppi_ci_high - row.ppi_rate == pytest.approx(stats.z(0.975) * se)


def planted(rng, run, samples, k, base_rate=(2, 2), shift=0.0):
    """Rollouts whose true outcome is known; the reward (the score) passes every truly passing
    rollout and 30% of the truly failing ones."""
    p = np.clip(rng.beta(*base_rate, samples) + shift, 0, 1)
    truth = rng.random((samples, k)) < p[:, None]
    score = truth | (rng.random((samples, k)) < 0.3)
    recs, true = [], {}
    for i in range(samples):
        for j in range(k):
            rid = f"{run}-{i}-{j}"
            recs.append(rollout(run, f"q{i:03d}", float(score[i, j]), rollout_id=rid))
            true[rid] = bool(truth[i, j])
    return recs, true


def test_ppi_covers_the_true_rate_end_to_end(con, tmp_path):
    """The issue's test through the store: 60 seeds, each a run of 150 samples x 3 attempts whose
    grader passes 30% of truly failing rollouts, and 150 labels on a random subset
    (labelling_sample), imported from a file. The PPI interval covers the run's true pass rate in
    >= 90% of seeds; the grader's naive interval in almost none. With a base run labelled the same
    way, the PPI difference covers the true difference."""
    rng = np.random.default_rng(28)
    seeds, records, truth = 60, [], {}
    for s in range(seeds):
        recs, true = planted(rng, f"seed{s:02d}", 150, 3)
        records += recs
        truth.update(true)
    recs, true = planted(rng, "base", 150, 3, shift=-0.15)
    records += recs
    truth.update(true)
    rl.ingest(con, write_jsonl(tmp_path / "planted.jsonl", records))
    lines = []
    for run in [f"seed{s:02d}" for s in range(seeds)] + ["base"]:
        picked = L.labelling_sample(con, run, n=150, seed=7)
        lines += [{"rollout_id": rid, "value": "pass" if truth[rid] else "fail", "who": "oracle"}
                  for rid in picked.rollout_id]
    assert L.import_labels(con, write_jsonl(tmp_path / "labels.jsonl", lines)).loaded[0] == 150 * (seeds + 1)
    covered = naive = 0
    for s in range(seeds):
        run = f"seed{s:02d}"
        true_rate = np.mean([v for rid, v in truth.items() if rid.startswith(run + "-")])
        row = grader_calibration(con, run).iloc[0]
        assert row.grader == ROLLOUT_SCORE and row.labelled == 150 and row.graded == 450
        covered += row.ppi_ci_low <= true_rate <= row.ppi_ci_high
        naive += row.grader_ci_low <= true_rate <= row.grader_ci_high
    print(f"PPI covers the true rate in {covered}/{seeds} seeds, the grader's own CI in {naive}/{seeds}")
    assert covered / seeds >= 0.9 and naive / seeds <= 0.1
    diff = grader_calibration(con, "seed00", base="base").iloc[0]
    rate = {r: np.mean([v for rid, v in truth.items() if rid.startswith(r + "-")]) for r in ("seed00", "base")}
    assert diff.ppi_diff_ci_low <= rate["seed00"] - rate["base"] <= diff.ppi_diff_ci_high
    assert diff.ppi_diff == pytest.approx(diff.ppi_rate - diff.base_ppi_rate)


def test_ppi_difference_is_paired_by_sample():
    """Two runs on the same samples whose per-sample outcomes move together: the difference's SE
    (influence of the difference, cluster by cluster) is well below the SE of two independent
    estimates, and matches the spread of the difference over simulated replications."""
    rng = np.random.default_rng(5)
    samples, k = 300, 2
    diffs, ses, indep = [], [], []
    for _ in range(300):
        p = rng.beta(0.5, 0.5, samples)  # samples are mostly easy or mostly hard: strong pairing
        tb = rng.random((samples, k)) < p[:, None]
        tc = rng.random((samples, k)) < np.clip(p + 0.05, 0, 1)[:, None]
        codes = np.repeat(np.arange(samples), k)
        ests = []
        for t in (tb, tc):
            f = (t | (rng.random(t.shape) < 0.2)).ravel().astype(float)
            y = np.full(f.size, np.nan)
            lab = rng.choice(f.size, 150, replace=False)
            y[lab] = t.ravel()[lab]
            ests.append(stats.ppi_influence(f, y, codes, samples, 1.0))
        (tb_, pb, _), (tc_, pc, _) = ests
        diffs.append(tc_ - tb_)
        ses.append(stats.influence_se(pc - pb))
        indep.append(np.hypot(stats.influence_se(pb), stats.influence_se(pc)))
    assert np.mean(ses) == pytest.approx(np.std(diffs), rel=0.1)
    assert np.mean(ses) < 0.9 * np.mean(indep)


# ---- review fixes: CSV export / import edge cases ----------------------------------------------

def _import_into_fresh(tmp_path, path):
    other = rl.connect(tmp_path / "other.duckdb")
    rl.ingest(other, write_jsonl(tmp_path / "same.jsonl", small_run()))
    return other, L.import_labels(other, path).iloc[0]


def test_csv_export_quotes_line_breaks_and_the_formula_guard_round_trips(load, con, tmp_path):
    import csv
    load(small_run())
    notes = ["x\r=1", "a\nb", "'=keep my quote", "''two quotes", "'just a quote", "=1+1", "plain"]
    for i, note in enumerate(notes):
        L.label(con, "r-0", "pass", note=note, who=f"p{i}")
    path = tmp_path / "labels.csv"
    L.export_labels(con, path)
    raw = path.read_bytes().decode("utf-8")
    assert '"x\r=1"' in raw and '"a\nb"' in raw  # quoted: a spreadsheet keeps each note in its cell
    with path.open(newline="", encoding="utf-8") as f:  # as a spreadsheet reads it: one row per label
        sheet = list(csv.reader(f))
    assert len(sheet) == 1 + len(notes)
    assert [r[5] for r in sheet[1:]] == ["x\r=1", "a\nb", "''=keep my quote", "'''two quotes", "''just a quote",
                                         "'=1+1", "plain"]
    other, res = _import_into_fresh(tmp_path, path)
    assert (res.records, res.loaded, res.rejected) == (len(notes), len(notes), 0)
    assert L.labels(other).note.tolist() == notes  # exactly as written
    other.close()
    # a hand-made sheet: a leading ' that guards nothing is the note's own
    sheet = tmp_path / "hand.csv"
    sheet.write_text("rollout_id,value,note\nr-1,pass,'quoted\nr-2,pass,'=guarded\n")
    L.import_labels(con, sheet)
    assert L.labels(con, rollout_ids=["r-1", "r-2"]).note.tolist() == ["'quoted", "=guarded"]


def test_csv_import_rejects_a_huge_field_and_goes_on(load, con, tmp_path):
    load(small_run())
    path = tmp_path / "big.csv"
    big = "A" * 200_000
    path.write_text(f"rollout_id,value,note\nr-0,pass,{big}\nr-1,fail,ok\n"
                    f'r-2,pass,"{big}\n{big}\nr-9,pass,inside the open quote"\nr-3,pass,after\n')
    res = L.import_labels(con, path).iloc[0]
    assert (res.records, res.loaded, res.rejected) == (4, 2, 2)
    assert res.reasons == ["line 2: a field longer than 131,072 characters (notes hold at most 10,000)",
                           "line 4: a field longer than 131,072 characters (notes hold at most 10,000); "
                           "lines 4-6 skipped"]
    assert sorted(L.labels(con).rollout_id) == ["r-1", "r-3"]


def test_csv_import_needs_a_header_naming_each_column_once(load, con, tmp_path):
    load(small_run())
    path = tmp_path / "sheet.csv"
    for text, why in (("r-0,pass\n", "is not a header; expected a header row naming the columns: rollout_id and value"),
                      ("rollout_id,note\nr-0,x\n", "is not a header"),
                      ("rollout_id,value,value\nr-0,pass,fail\n", "names value more than once"),
                      ("", "empty file")):
        path.write_text(text)
        with pytest.raises(L.LabelError, match=why) as err:
            L.import_labels(con, path)
        assert str(path) in str(err.value)
    path.write_text("rollout_id,label\nr-0,pass\n")  # label for value
    assert L.import_labels(con, path).loaded[0] == 1


def test_csv_import_rejects_rows_that_are_not_utf8_or_have_extra_cells(load, con, tmp_path):
    load(small_run())
    path = tmp_path / "sheet.csv"
    path.write_bytes("rollout_id,value,note\nr-0,pass,café\nr-1,pass,caf\xe9 latin-1\n"
                     "r-2,fail,wrong, units\nr-3,fail,trailing empties,,\n".encode("utf-8").replace(b"\xc3\xa9 latin", b"\xe9 latin"))
    res = L.import_labels(con, path).iloc[0]
    assert (res.records, res.loaded, res.rejected) == (4, 2, 2)
    assert res.reasons == ["line 3: not UTF-8 (save the sheet as CSV UTF-8)",
                           "line 4: 4 cells but the header names 3 columns (an unquoted comma?)"]
    assert L.labels(con).note.tolist() == ["café", "trailing empties"]


def test_jsonl_import_rejects_non_text_notes_non_iso_times_and_lone_surrogates(load, con, tmp_path):
    load(small_run())
    path = tmp_path / "in.jsonl"
    lines = [{"rollout_id": "r-0", "value": "pass", "note": {"x": "y"}},
             {"rollout_id": "r-0", "value": "pass", "who": ["a"]},
             {"rollout_id": "r-0", "value": "pass", "labelled_at": "now"},
             {"rollout_id": "r-0", "value": "pass", "labelled_at": 12345},
             {"rollout_id": "r-1", "value": "pass", "labelled_at": "2025-03-01"}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + '\n{"rollout_id": "r-2", "value": "pass", "note": "\\ud800"}\n')
    res = L.import_labels(con, path).iloc[0]
    assert (res.records, res.loaded, res.rejected) == (6, 1, 5)
    assert res.reasons == ["line 1: note must be text, not dict", "line 2: who must be text, not list",
                           "line 3: labelled_at 'now': not an ISO-8601 timestamp",
                           "line 4: labelled_at 12345: not an ISO-8601 timestamp",
                           "line 6: note is not valid Unicode (a lone surrogate)"]
    assert L.labels(con).rollout_id.tolist() == ["r-1"]


def test_a_later_row_of_a_sheet_is_the_newer_judgement(load, con, tmp_path):
    from rolloutlab.analysis.metrics.common import run_sql
    load(small_run())
    path = tmp_path / "fix.csv"
    path.write_text("rollout_id,value,who,note\nr-0,pass,ann,first look\nr-0,fail,ann,no: wrong unit (correction)\n")
    assert L.import_labels(con, path).loaded[0] == 2
    truth = run_sql(con, L.label_truth_sql(), {"threshold": 0.5, "origin": None}).df()
    assert truth[["rollout_id", "y", "labellers"]].values.tolist() == [["r-0", 0.0, 1]]
    assert L.labels(con).note.tolist()[-1] == "no: wrong unit (correction)"  # the latest
    again = L.import_labels(con, path).iloc[0]
    assert (again.loaded, again.duplicates) == (0, 2)  # still idempotent


def test_a_stray_quote_is_one_reject_and_the_rows_after_it_load(load, con, tmp_path):
    """#34: an unmatched " in a note swallowed the rows after it (records 2, loaded 2, the note
    holding the raw CSV of the next rows). Now its record is a reject with its line and reason,
    and the rows after it are read; a note quoted over two lines still loads."""
    load(small_run())
    path = tmp_path / "sheet.csv"
    path.write_text('rollout_id,value,note\n'
                    'r-0,pass,"a stray quote opens this note\n'
                    'r-1,fail,wrong unit\n'
                    'r-2,pass,"fine, quoted"\n'
                    'r-3,fail,"a note\nover two lines"\n'
                    'r-4,pass,"never closed\n'
                    'and more text\n')
    res = L.import_labels(con, path).iloc[0]
    assert (res.records, res.loaded, res.rejected, res.unknown_rollouts) == (6, 3, 3, 0)
    assert res.reasons == [
        'line 2: an unmatched " (the quoted cell it opens is still open at line 3, which reads as a row of its '
        'own): quote the whole cell and double each " in it; the lines after it are read as rows',
        'line 7: an unmatched " (the quoted cell it opens is still open at the end of the file): quote the whole '
        'cell and double each " in it; the lines after it are read as rows',
        "line 8: no value (pass / fail or a number)"]
    stored = L.labels(con).set_index("rollout_id")
    assert stored.note.to_dict() == {"r-1": "wrong unit", "r-2": "fine, quoted", "r-3": "a note\nover two lines"}
    assert stored.passed.to_dict() == {"r-1": False, "r-2": True, "r-3": False}


def test_contradicting_cells_are_rejects_and_cells_are_trimmed(load, con, tmp_path):
    """#34: value=pass with passed=false is a contradiction (a reject, not a pass); a sheet with
    both value and label columns rejects the rows where they disagree; cells are trimmed
    (' r-4 ' is r-4), the note as written."""
    load(small_run())
    path = tmp_path / "sheet.csv"
    path.write_text("rollout_id,value,label,passed,note\n"
                    " r-0 ,pass,,false,contradiction\n"
                    "r-1,pass,fail,,two columns disagree\n"
                    "r-2,pass,PASS,, they agree \n"
                    "r-3,0.7,,true,a score with its verdict\n"
                    " r-4 , fail ,, ,trimmed\n"
                    "r-5,,fail,,the label column alone\n")
    res = L.import_labels(con, path).iloc[0]
    assert (res.records, res.loaded, res.rejected, res.unknown_rollouts) == (6, 4, 2, 0)
    assert res.reasons == ["line 2: value 'pass' and passed false contradict each other: give one verdict (or a "
                           "score in value and the verdict in passed)",
                           "line 3: value 'pass' and label 'fail' disagree: fill in one of the two columns"]
    stored = L.labels(con).set_index("rollout_id")
    assert stored.run.to_dict() == {"r-2": "r", "r-3": "r", "r-4": "r", "r-5": "r"}  # every one a loaded rollout
    assert stored.value.to_dict() == {"r-2": 1.0, "r-3": 0.7, "r-4": 0.0, "r-5": 0.0}
    assert stored.passed.to_dict() == {"r-2": True, "r-3": True, "r-4": False, "r-5": False}
    assert stored.note["r-2"] == " they agree "
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"rollout_id": "r-0", "value": "pass", "passed": false}\n'
                     '{"rollout_id": "r-1", "value": 1, "label": "fail"}\n')
    res = L.import_labels(con, jsonl).iloc[0]
    assert (res.records, res.loaded, res.rejected) == (2, 0, 2)


def test_a_400_digit_number_is_one_reject(load, con, tmp_path):
    """#34: an integer of 400 digits crashed the import (OverflowError) and lost the line after it."""
    load(small_run())
    path = tmp_path / "in.jsonl"
    path.write_text('{"rollout_id": "r-0", "value": ' + "9" * 400 + '}\n{"rollout_id": "r-1", "value": "pass"}\n')
    res = L.import_labels(con, path).iloc[0]
    assert (res.records, res.loaded, res.rejected) == (2, 1, 1)
    assert res.reasons[0] == f"line 1: label {'9' * 60}… (400 characters): not a finite number"
    sheet = tmp_path / "in.csv"
    sheet.write_text(f"rollout_id,value\nr-2,{'9' * 400}\nr-3,fail\n")
    res = L.import_labels(con, sheet).iloc[0]
    assert (res.records, res.loaded, res.rejected) == (2, 1, 1)
    assert L.labels(con).rollout_id.tolist() == ["r-1", "r-3"]


def test_calibration_judges_at_the_runs_own_pass_threshold(load, con):
    """Issue 36: rewards in [-1, 1] with a pass at 0.5 (declared by the run): the reward's verdicts
    and a label given as a value are read at 0.5, not at the global 1.0."""
    meta = {"run_meta": {"reward_range": [-1, 1], "pass_threshold": 0.5}}
    scores = [0.6, 0.8, -1.0, -0.2, 1.0, -1.0]
    load([rollout("g", f"s{i}", v, rollout_id=f"g-{i}", **meta) for i, v in enumerate(scores)])
    for i, value in enumerate([0.7, 0.9, -1.0, 0.5, 0.2, -0.8]):  # labels as values: pass at >= 0.5
        L.label(con, f"g-{i}", value, who="ann")
    row = grader_calibration(con, "g").set_index("grader").loc[ROLLOUT_SCORE]
    # reward passes g-0, g-1, g-4; labels pass g-0, g-1, g-3
    assert (row.tp, row.fp, row.fn, row.tn) == (2, 1, 1, 2)
    assert row.grader_rate == pytest.approx(0.5) and row.label_rate == pytest.approx(0.5)
    assert grader_calibration(con, "g").attrs["pass_threshold"] == 0.5

"""curate, forecast, signal_by_step and their figures: verdicts, groups and splits checked against
plain-Python oracles on synthetic runs with known success probabilities, the forecast against
simulated new attempts, and the demo data."""
from __future__ import annotations

import json
import math
import random
import unicodedata

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

import rolloutlab as rl  # noqa: E402
from conftest import rollout, write_jsonl  # noqa: E402
from rolloutlab.analysis import curation as curate_module
from rolloutlab.demo import synth  # noqa: E402
from rolloutlab.analysis.curation import curate, forecast, near_duplicates, signal_by_step  # noqa: E402
from rolloutlab.views.plots import curation as pc  # noqa: E402
from rolloutlab.views.plots.style import EmptyDataError  # noqa: E402

_WORDS_RNG = random.Random(0)
WORDS = ["".join(_WORDS_RNG.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7)) for _ in range(400)]


def words(rng: random.Random, n: int = 14) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def outcome_records(run: str, outcomes: dict[str, list], prompts: dict[str, str | None] | None = None,
                    split: str | None = None, step: int | None = None) -> list[dict]:
    """Native records: each sample's attempts in order; an attempt is a score, or 'infra' /
    'ungraded' for a rollout that says nothing about the model."""
    records = []
    for sample, attempts in outcomes.items():
        for a in attempts:
            status = a if a in ("infra_error", "ungraded") else "ok"
            extra = {"split": split, "step": step}
            if prompts is not None and prompts.get(sample) is not None:
                extra.update(prompt=prompts[sample], reference=f"ref-{sample}")
            records.append(rollout(run, sample, None if status != "ok" else a, status=status,
                                   **{k: v for k, v in extra.items() if v is not None}))
    return records


def oracle_verdict(attempts: list, lo: float, hi: float, min_attempts: int, on_mean: bool = False) -> str:
    scores = [a for a in attempts if a not in ("infra_error", "ungraded")]
    n, c = len(scores), sum(s >= 1.0 for s in scores)
    if n == 0:
        return "infra"
    if n < min_attempts:
        return "few_attempts"
    if c == n:
        return "too_easy"
    if (not on_mean and c == 0) or (on_mean and max(scores) == min(scores)):
        return "too_hard"
    value = sum(scores) / n if on_mean else c / n
    return "keep" if lo <= value <= hi else "outside_band"


def random_outcomes(seed: int, n_samples: int = 80) -> dict[str, list]:
    """Known success probabilities, 3-6 attempts each, and the edge cases: only infra errors, one
    counted attempt, never graded, partial credit only."""
    rng = random.Random(seed)
    out = {}
    for i in range(n_samples):
        p = rng.choice([0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0])
        out[f"s{i:03d}"] = [1.0 if rng.random() < p else 0.0 for _ in range(rng.randint(3, 6))]
    out["z-infra"] = ["infra_error", "infra_error", "ungraded"]
    out["z-few"] = [1.0, "infra_error", "infra_error"]
    out["z-partial"] = [0.0, 0.5, 0.5, 0.0]
    out["z-fifth"] = [1.0, 0.0, 0.0, 0.0, 0.0]  # 20%: on the band's edge, inside
    return out


@pytest.fixture(scope="module")
def random_run(tmp_path_factory):
    """One database for the tests that only read run "r"."""
    folder = tmp_path_factory.mktemp("random_run")
    outcomes = random_outcomes(3)
    rng = random.Random(4)
    prompts = {s: words(rng) for s in outcomes}
    connection = rl.connect(folder / "r.duckdb")
    result = rl.ingest(connection, write_jsonl(folder / "r.jsonl", outcome_records("r", outcomes, prompts)))
    assert result.rejected.sum() == 0
    yield connection, outcomes
    connection.close()


def test_verdicts_are_exactly_the_band_on_known_outcomes(random_run):
    con, outcomes = random_run
    df = curate(con, "r", band=(0.2, 0.8), min_attempts=2)
    want = {s: oracle_verdict(a, 0.2, 0.8, 2) for s, a in outcomes.items()}
    assert dict(zip(df.sample_id, df.verdict)) == want
    assert {"keep", "too_easy", "too_hard", "infra", "few_attempts"} <= set(want.values())
    kept = df[df.verdict == "keep"]
    assert set(kept.sample_id) == {s for s, v in want.items() if v == "keep"}
    assert df.attrs["counts"] == {v: list(want.values()).count(v) for v in curate_module.VERDICTS}
    for s, a in outcomes.items():
        row = df[df.sample_id == s].iloc[0]
        scores = [x for x in a if x not in ("infra_error", "ungraded")]
        assert row.attempts == len(scores) and row.rollouts == len(a)
        if scores:
            assert row.pass_rate == pytest.approx(sum(x >= 1 for x in scores) / len(scores))
            assert row.mean_score == pytest.approx(sum(scores) / len(scores))


def test_a_narrower_band_and_more_attempts_change_exactly_what_the_oracle_says(random_run):
    con, outcomes = random_run
    df = curate(con, "r", band=(0.3, 0.6), min_attempts=5)
    assert dict(zip(df.sample_id, df.verdict)) == {s: oracle_verdict(a, 0.3, 0.6, 5) for s, a in outcomes.items()}
    assert (df.verdict == "outside_band").any()


def test_band_on_mean_score_for_continuous_rewards(load, con):
    rng = random.Random(11)
    outcomes = {f"c{i:02d}": [round(rng.choice([0.0, 0.2, 0.4, 0.6, 0.8]) * rng.random(), 3) for _ in range(4)]
                for i in range(40)}
    outcomes["flat"] = [0.4, 0.4, 0.4]
    outcomes["full"] = [1.0, 1.0]
    load(outcome_records("m", outcomes))
    df = curate(con, "m", band=(0.1, 0.3), on="mean_score")
    assert dict(zip(df.sample_id, df.verdict)) == {s: oracle_verdict(a, 0.1, 0.3, 2, on_mean=True)
                                                   for s, a in outcomes.items()}
    assert df.set_index("sample_id").loc["flat", "reason"] == "scored 0.4 on all 3 attempts: no signal"


def test_reasons_say_why_in_words(random_run):
    con, _ = random_run
    df = curate(con, "r").set_index("sample_id")
    assert df.loc["z-infra", "reason"] == "3 rollouts, all infra errors or never graded: unknown, not hard"
    assert df.loc["z-few", "reason"] == "1 counted attempt, fewer than min_attempts=2 (2 infra errors or never graded)"
    assert df.loc["z-partial", "reason"] == "never passed in 4 attempts (partial credit only, best 0.5)"
    assert df.loc["z-fifth", "reason"] == "passed 1 of 5 attempts (20%): inside the band 20%–80%"
    easy = df[df.verdict == "too_easy"].iloc[0]
    assert easy.reason == f"passed all {easy.attempts} attempts: nothing left to learn"


def test_same_seed_same_curation_other_seed_other_validation(random_run):
    con, _ = random_run
    a = curate(con, "r", validation_share=0.3, seed=1)
    b = curate(con, "r", validation_share=0.3, seed=1)
    pd.testing.assert_frame_equal(a, b)
    assert a.attrs == b.attrs
    others = [curate(con, "r", validation_share=0.3, seed=s) for s in (2, 3, 4)]
    assert all((o.verdict == a.verdict).all() for o in others)
    valid = set(a.sample_id[a.split == "validation"])
    assert any(set(o.sample_id[o.split == "validation"]) != valid for o in others)


@pytest.mark.parametrize("share", [0.0, 0.1, 0.3, 1.0])
def test_validation_takes_its_share_of_kept_samples(random_run, share):
    con, _ = random_run
    df = curate(con, "r", validation_share=share)
    kept = df[df.verdict == "keep"]
    assert kept.split.isin(["train", "validation"]).all() and df[df.verdict != "keep"].split.isna().all()
    # singleton groups here: the share is met exactly
    assert (kept.split == "validation").sum() == round(share * len(kept))
    assert df.attrs["splits"] == {"train": int((kept.split == "train").sum()),
                                  "validation": int((kept.split == "validation").sum())}


# ---- grouping ---------------------------------------------------------------------------------

def normalised(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split()).lower()


def shingles(text: str, width: int = 5) -> set[str]:
    return {text[i:i + width] for i in range(max(len(text) - width + 1, 1))}


def brute_force_pairs(texts: list[str], threshold: float) -> dict[tuple[str, str], float]:
    sets = {t: shingles(t) for t in texts}
    out = {}
    for i, a in enumerate(texts):
        for b in texts[i + 1:]:
            j = len(sets[a] & sets[b]) / len(sets[a] | sets[b])
            if j >= threshold:
                out[(min(a, b), max(a, b))] = j
    return out


def edit(text: str, rng: random.Random, n: int) -> str:
    chars = list(text)
    for _ in range(n):
        chars[rng.randrange(len(chars))] = rng.choice("abcdefghijklmnopqrstuvwxyz ")
    return "".join(chars)


@pytest.mark.parametrize("threshold", [0.5, 0.8, 0.9])
def test_near_duplicates_are_exactly_the_pairs_at_or_above_the_threshold(con, threshold):
    """Prefix filtering misses no pair: compared with every pair's Jaccard in plain Python."""
    rng = random.Random(21)
    texts = []
    for _ in range(25):
        base = words(rng, 12)
        texts += [base] + [edit(base, rng, rng.choice([1, 1, 2, 2, 3, 4, 6, 9, 14])) for _ in range(5)]
    texts = sorted({normalised(t) for t in texts})
    want = brute_force_pairs(texts, threshold)
    got = near_duplicates(con, texts, threshold)
    assert {(a, b): j for a, b, j in zip(got.key_a, got.key_b, got.jaccard)} == pytest.approx(want)
    assert 3 <= len(want) < len(texts) ** 2 / 20  # a real test: pairs on both sides of the threshold


def grouped_prompts(seed: int) -> tuple[dict[str, str], list[set[str]]]:
    """Prompts with planted near-duplicates: for each base, variants that differ in case and
    spacing, by a typo or two, or by appended words; returns the prompts and the planted sets."""
    rng = random.Random(seed)
    prompts, planted = {}, []
    for g in range(30):
        base = words(rng, 16)
        ids = [f"g{g:02d}-0"]
        prompts[ids[0]] = base
        kind = g % 4
        if kind == 0:
            variants = ["  " + base.upper().replace(" ", "   ") + " "]
        elif kind == 1:
            variants = [edit(base, rng, 1), edit(base, rng, 2)]
        elif kind == 2:
            variants = [base + " " + rng.choice(WORDS)]
        else:
            variants = []
        for v, text in enumerate(variants, start=1):
            prompts[f"g{g:02d}-{v}"] = text
            ids.append(f"g{g:02d}-{v}")
        planted.append(set(ids))
    return prompts, planted


def oracle_groups(prompts: dict[str, str], threshold: float) -> dict[str, str]:
    keys = {s: normalised(p) for s, p in prompts.items()}
    parent = {s: s for s in prompts}

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    pairs = brute_force_pairs(sorted(set(keys.values())), threshold)
    by_key = {}
    for s, k in keys.items():
        by_key.setdefault(k, []).append(s)
    edges = [(by_key[a][0], by_key[b][0]) for a, b in pairs] + [(v[0], x) for v in by_key.values() for x in v[1:]]
    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    members = {}
    for s in prompts:
        members.setdefault(find(s), []).append(s)
    return {s: min(members[find(s)]) for s in prompts}


def test_planted_near_duplicates_form_one_group_and_never_straddle_the_split(load, con):
    prompts, planted = grouped_prompts(5)
    rng = random.Random(6)
    # every sample kept (1 of 2 passes), so every group has to be placed whole
    load(outcome_records("g", {s: [1.0, 0.0] if rng.random() < 0.5 else [0.0, 1.0] for s in prompts}, prompts))
    df = curate(con, "g", validation_share=0.4, seed=0)
    want = oracle_groups(prompts, 0.8)
    assert dict(zip(df.sample_id, df.group)) == want
    for ids in planted:
        assert len({want[s] for s in ids}) == 1, ids
    for seed in range(6):
        split = curate(con, "g", validation_share=0.4, seed=seed)
        assert (split.groupby("group").split.nunique() == 1).all()
        assert 0 < (split.split == "validation").sum() < len(split)
    multi = [ids for ids in planted if len(ids) > 1]
    assert df.attrs["groups"] == len(set(want.values()))
    assert df.attrs["groups_with_several_samples"] == sum(1 for g in set(want.values())
                                                          if list(want.values()).count(g) > 1) >= len(multi)
    same = [s for s in prompts if sum(normalised(prompts[s]) == normalised(p) for p in prompts.values()) > 1]
    assert df.attrs["same_prompt_samples"] == len(same) >= 2 * 8  # the case-and-spacing variants, at least
    assert df.attrs["near_duplicate_pairs"] == len(brute_force_pairs(sorted({normalised(p) for p in prompts.values()}), 0.8))


def test_exact_duplicates_keep_the_first_sample(load, con):
    prompts = {"a": "What is the revenue of Acme in 2020?", "b": "what is the   revenue of ACME in 2020?",
               "c": "What is the revenue of Acme in 2021?"}
    load(outcome_records("d", {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 0.0]}, prompts))
    df = curate(con, "d").set_index("sample_id")
    assert df.verdict.to_dict() == {"a": "keep", "b": "duplicate", "c": "keep"}
    assert df.loc["b", "reason"] == "same prompt as a" and df.loc["b", "duplicate_of"] == "a"
    # the number differs: not the same prompt, a near-duplicate (same group) ...
    assert df.loc["c", "group"] == "a"
    # ... and with numbers masked, the same prompt for grouping, still its own task
    masked = curate(con, "d", mask_numbers=True, near_duplicate_threshold=1.0).set_index("sample_id")
    unmasked = curate(con, "d", near_duplicate_threshold=1.0).set_index("sample_id")
    assert masked.loc["c", "group"] == "a" and unmasked.loc["c", "group"] == "c"
    assert masked.loc["c", "verdict"] == "keep"
    assert masked.attrs["same_prompt_samples"] == 3 and unmasked.attrs["same_prompt_samples"] == 2


QUESTIONS = [
    "What was Acme Corp's total revenue in fiscal 2021?", "How many employees did Globex report at year end?",
    "Which segment grew fastest for Initech in 2022?", "What is the operating margin of Umbrella in Q3?",
    "By how much did Hooli's R&D spending rise from 2020 to 2021?", "What dividend per share did Stark pay in 2019?",
    "Name the largest customer of Wayne Enterprises by revenue.", "What was Cyberdyne's free cash flow in 2020?",
    "How much long-term debt did Tyrell carry at the end of 2021?", "Which region had the highest sales for Soylent?",
    "What is the effective tax rate reported by Vandelay Industries?", "How many stores did Wonka open in 2022?",
    "What share of revenue came from subscriptions at Pied Piper?", "What was the gross margin of Oscorp in 2018?",
    "How much goodwill did Massive Dynamic write down?", "What was Gringotts' net interest income last year?",
    "Which product line of Aperture lost money in 2021?", "What were Dunder Mifflin's paper sales in tonnes?",
    "How many patents did Weyland-Yutani file in 2020?", "What capital expenditure did Nakatomi plan for 2023?",
    "What was the book value per share of Monarch Solutions?", "How did Prestige Worldwide's backlog change?",
    "What inventory turnover did Los Pollos Hermanos reach?", "Which auditor signed Sterling Cooper's report?",
    "What were Bluth Company's lease liabilities in 2019?",
]


def chat(text: str) -> str:
    return json.dumps([{"role": "user", "content": text}])


def chat_with_parts(text: str) -> str:
    return json.dumps([{"role": "system", "content": "Answer from the filing."},
                       {"role": "user", "content": [{"type": "text", "text": text}]}])


def zero_width(text: str) -> str:
    """Zero-width spaces and joiners, a BOM and a soft hyphen: the same question to a reader."""
    words_ = text.split(" ")
    return "\ufeff" + " ".join(w[:2] + "\u200b" + w[2:] + "\u200d" if len(w) > 3 else w + "\u00ad" for w in words_)


def full_width(text: str) -> str:
    """Full-width forms (a Japanese IME's Latin letters): NFKC's business."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


@pytest.mark.parametrize("form", [chat, chat_with_parts, zero_width, full_width])
def test_one_question_in_two_forms_never_lands_in_both_splits(load, con, tmp_path, form):
    """#34: 25 questions, each as plain text and in another form (a JSON chat list as chat formats
    store prompts, zero-width characters, full-width letters): read back from the training files
    write_curated wrote, no question has a copy in train.jsonl and one in validation.jsonl."""
    prompts = {f"q{i:02d}-{kind}": (q if kind == "a" else form(q))  # a: plain, b: the other form
               for i, q in enumerate(QUESTIONS) for kind in ("a", "b")}
    load(outcome_records("qa", {s: [1.0, 0.0] for s in prompts}, prompts))
    for seed in range(4):
        out = tmp_path / f"rft-{seed}"
        rl.write_curated(con, "qa", out, to="openai-rft", validation_share=0.5, seed=seed)
        where = {}
        for split in ("train", "validation"):
            for line in (out / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
                question = QUESTIONS[int(json.loads(line)["id"][1:3])]
                where.setdefault(question, set()).add(split)
        assert len(where) == len(QUESTIONS)
        assert [q for q, splits in where.items() if len(splits) > 1] == []
        assert {min(s) for s in where.values()} == {"train", "validation"}
    df = curate(con, "qa", validation_share=0.5, seed=0).set_index("sample_id")
    for i in range(len(QUESTIONS)):
        plain, other = f"q{i:02d}-a", f"q{i:02d}-b"
        assert df.loc[plain, "group"] == df.loc[other, "group"] == plain
        assert df.loc[other, "verdict"] == "duplicate" and df.loc[other, "duplicate_of"] == plain
    assert df.attrs["same_prompt_samples"] == 50


def test_what_a_prompt_says_is_its_user_turns_normalised():
    from rolloutlab.analysis.prompts import said

    q = "What is Acme's revenue?"
    assert said(q) == "what is acme's revenue?"
    assert said(chat(q)) == said(chat_with_parts(q)) == said(zero_width(q)) == said(full_width(q)) == said(q)
    assert said("  WHAT  is\tAcme's\nrevenue? ") == said(q)
    # an image is part of what is asked: two images, two prompts
    image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "a.png"}},
                                          {"type": "text", "text": q}]}]
    other = json.dumps([{**image[0], "content": [{"type": "image_url", "image_url": {"url": "b.png"}},
                                                 image[0]["content"][1]]}])
    assert said(json.dumps(image)) != said(other) and q.lower() in said(other)
    # a JSON list that is not chat messages is text; nothing said is None
    assert said("[1, 2, 3]") == "[1, 2, 3]" and said("\u200b \u200b") is None and said(None) is None


def test_samples_another_run_validated_on_stay_in_validation(load, con):
    rng = random.Random(8)
    prompts = {f"t{i:02d}": words(rng) for i in range(20)}
    load(outcome_records("cand", {s: [1.0, 0.0, 0.0] for s in prompts}, prompts, split="train"))
    # another run's validation split: one sample by id, one by the same prompt under another id,
    # one near-duplicate prompt; and a training run that pins nothing
    valid = {"t03": prompts["t03"], "v-same": prompts["t07"].upper(), "v-near": edit(prompts["t11"], rng, 1)}
    load(outcome_records("evalrun", {s: [1.0] for s in valid}, valid, split="valid"))
    load(outcome_records("otherrun", {"t05": [1.0]}, {"t05": prompts["t05"]}, split="train"))
    df = curate(con, "cand", validation_share=0.0).set_index("sample_id")
    assert set(df.index[df.split == "validation"]) == {"t03", "t07", "t11"}
    assert df.loc["t03", "reason"].endswith("stays in validation: the sample is in the validation split of evalrun")
    assert df.loc["t07", "reason"].endswith("stays in validation: its prompt is in the validation split of evalrun")
    assert df.loc["t11", "reason"].endswith(
        "stays in validation: a near-duplicate of its prompt is in the validation split of evalrun")
    assert df.attrs["pinned_validation"] == 3
    free = curate(con, "cand", validation_share=0.0, keep_validation=False)
    assert (free.split == "train").all() and free.attrs["pinned_validation"] == 0


def test_audit_suspects_are_dropped_when_asked(tmp_path, con):
    paths, planted = synth.write_judged(tmp_path / "judged", samples=120, attempts=4, seed=3)
    rl.ingest(con, paths)
    plain = curate(con, "step10")
    assert not (plain.verdict == "suspect").any()
    df = curate(con, "step10", drop_suspects=True, audit_base="base").set_index("sample_id")
    flagged = rl.audit(con, "step10", base="base")
    first_reason = flagged.drop_duplicates("sample_id").set_index("sample_id").reason
    band = plain.set_index("sample_id").verdict
    want = {s for s in first_reason.index if band[s] not in ("infra", "few_attempts")}
    assert set(df.index[df.verdict == "suspect"]) == want and want
    for s in want:
        assert df.loc[s, "reason"] == f"flagged by the audit: {first_reason[s]}"
    hacked = {r["sample_id"] for r in synth.generate_judged(samples=120, attempts=4, seed=3)[0]
              if r["rollout_id"] in planted and r["run"] == "step10"}
    # the audit ranks, it does not catch everything: most planted hacks make their sample a suspect
    assert len(hacked & want) >= 0.9 * len(hacked) > 0
    assert df.attrs["counts"]["suspect"] == len(want)


# ---- across training ----------------------------------------------------------------------------

def test_across_training_steps_saturated_and_never_moved(load, con):
    steps = {0: {"sat": [1, 0, 0, 0], "never": [0, 0, 0, 0], "always": [1, 1, 1, 1], "mid": [1, 1, 0, 0],
                 "early": [1, 1, 0, 0], "lastinfra": [1, 0, 0, 1]},
             1: {"sat": [1, 1, 0, 0], "never": [0, 0, 0, 0], "always": [1, 1, 1, 1], "mid": [1, 0, 1, 0],
                 "early": [1, 0, 0, 0]},
             2: {"sat": [1, 1, 1, 0], "never": [0, 0, 0, 0], "always": [1, 1, 1, 1], "mid": [0, 1, 1, 0],
                 "once": [1, 0, 0, 0]},
             3: {"sat": [1, 1, 1, 1], "never": [0, 0, 0, 0], "always": [1, 1, 1, 1], "mid": [0, 0, 1, 1],
                 "lastinfra": ["infra_error"] * 4}}
    for step, outcomes in steps.items():
        load(outcome_records(f"t-step{step}", {s: [float(x) if x != "infra_error" else x for x in a]
                                               for s, a in outcomes.items()}, split="train", step=step))
    df = curate(con, ["t-step3", "t-step0", "t-step2", "t-step1"]).set_index("sample_id")
    assert df.attrs["runs"] == ["t-step0", "t-step1", "t-step2", "t-step3"] and df.attrs["run"] == "t-step3"
    assert df.run.to_dict() == {"always": "t-step3", "early": "t-step1", "lastinfra": "t-step0", "mid": "t-step3",
                                "never": "t-step3", "once": "t-step2", "sat": "t-step3"}
    assert df.verdict.to_dict() == {"always": "too_easy", "early": "keep", "lastinfra": "keep", "mid": "keep",
                                    "never": "too_hard", "once": "keep", "sat": "too_easy"}
    assert df.trend.to_dict() == {"always": "never_moved", "early": "moving", "lastinfra": "one_step",
                                  "mid": "moving", "never": "never_moved", "once": "one_step", "sat": "saturated"}
    assert df.loc["sat", "first_pass_rate"] == 0.25 and df.loc["sat", "first_step"] == 0
    assert df.loc["sat", "reason"] == ("at step 3 (t-step3): passed all 4 attempts: nothing left to learn; saturated "
                                       "by the last checkpoint (25% at step 0 (t-step0)): move it out of the curriculum")
    assert df.loc["never", "reason"].endswith("never moved: failed every attempt at all 4 steps (16 attempts)")
    assert df.loc["always", "reason"].endswith("never moved: passed every attempt at all 4 steps (16 attempts)")


def test_signal_by_step_counts_by_hand(load, con):
    load(outcome_records("a-step0", {"x": [1.0, 0.0], "y": [0.0, 0.0], "z": [1.0, 1.0], "w": [0.5, 0.5],
                                     "u": [0.0, 0.5], "solo": [1.0]}, split="train", step=0))
    load(outcome_records("a-step5", {"x": [1.0, 1.0], "y": [1.0, 0.0], "z": [1.0, 1.0], "w": [1.0, 0.5],
                                     "u": ["infra_error", 0.0]}, split="train", step=5))
    load(outcome_records("ev", {"x": [0.0, 0.0, 1.0], "y": [0.0, 0.0]}, split="valid"))
    con.execute("UPDATE samples SET meta = json_object('data_source', CASE WHEN sample_id IN ('x', 'y') "
                "THEN 'math' ELSE 'code' END) WHERE sample_id <> 'w'")
    df = signal_by_step(con)
    got = {(r.run, r.data_source): (r.samples, r.samples_multi, r.single_attempt, r.all_fail, r.all_pass, r.mixed,
                                    r.zero_std) for r in df.itertuples()}
    assert got == {("a-step0", "(all)"): (6, 5, 1, 3, 1, 1, 3), ("a-step0", "code"): (3, 2, 1, 1, 1, 0, 1),
                   ("a-step0", "math"): (2, 2, 0, 1, 0, 1, 1),
                   ("a-step5", "(all)"): (5, 4, 1, 0, 2, 2, 2), ("a-step5", "code"): (2, 1, 1, 0, 1, 0, 1),
                   ("a-step5", "math"): (2, 2, 0, 0, 1, 1, 1),
                   ("ev", "(all)"): (2, 2, 0, 1, 0, 1, 1), ("ev", "math"): (2, 2, 0, 1, 0, 1, 1)}
    assert list(df.run) == ["a-step0"] * 3 + ["a-step5"] * 3 + ["ev"] * 2
    assert list(df.data_source[:3]) == ["(all)", "code", "math"]
    first = df.iloc[0]
    assert (first.share_all_fail, first.share_all_pass, first.share_mixed, first.share_zero_std) == (0.6, 0.2, 0.2, 0.6)
    assert df.set_index("run").loc["ev"].step_known.tolist() == [False, False]


def test_signal_by_step_on_the_demo_shape(tmp_path, con):
    """On synthetic demo logs: per run, the counts equal those from ``sample_stats``."""
    paths = synth.write_native(tmp_path / "native", samples=40, attempts=3, checkpoints="base,step10", seed=2)
    paths += synth.write_endpoint(tmp_path / "endpoint", samples=30, attempts=3, steps=(0, 5, 10), seed=2)
    rl.ingest(con, paths)
    df = signal_by_step(con)
    assert list(df.run) == ["train-step0", "train-step5", "train-step10", "base", "step10"]
    for row in df.itertuples():
        stats = rl.sample_stats(con, row.run)
        multi = stats[stats.attempts >= 2]
        assert row.samples == len(stats) and row.samples_multi == len(multi)
        assert row.all_fail == (multi.successes == 0).sum()
        assert row.all_pass == (multi.successes == multi.attempts).sum()
        assert row.zero_std == (multi["max"] == multi["min"]).sum()
        assert row.share_mixed == pytest.approx(((multi.successes > 0) & (multi.successes < multi.attempts)).mean())


def test_curate_on_the_demo_shape(tmp_path, con):
    paths = synth.write_native(tmp_path / "native", samples=60, attempts=3, checkpoints="base,step10", seed=4)
    rl.ingest(con, paths)
    df = rl.curate(con, "base")
    stats = rl.sample_stats(con, "base")
    band = stats[(stats.successes > 0) & (stats.successes < stats.attempts)
                 & stats.success_rate.between(0.2, 0.8) & (stats.attempts >= 2)]
    kept = df[df.verdict.isin(["keep", "duplicate"])]
    assert set(kept.sample_id) == set(band.sample_id) and len(band) > 5
    # base and step10 evaluate the same validation samples: each keeps the other's in validation
    assert (df.split[df.verdict == "keep"] == "validation").all()
    assert df.attrs["pinned_validation"] == (df.verdict == "keep").sum()
    # ... and says so, with the command that gives something to train on (none here: no training run)
    assert df.attrs["advice"].startswith(f"All {df.attrs['pinned_validation']} kept samples of base are evaluated on "
                                         "a validation split (by step10): training on them would leak")
    assert df.attrs["next"] is None and "(load them first)" in df.attrs["advice"]
    with pytest.raises(ValueError, match="nothing to train on, so nothing was written"):
        rl.write_curated(con, "base", tmp_path / "out", to="openai-rft")
    assert not (tmp_path / "out").exists()


def test_the_readmes_curation_leads_to_training_files(tmp_path):
    """The demo: base evaluates the validation split, so curating it names the training runs;
    the command it names writes a training file with samples in it."""
    from rolloutlab.cli import main

    db = tmp_path / "demo.duckdb"
    con = rl.connect(db)
    rl.ingest(con, [*synth.write_native(tmp_path / "native", samples=60, attempts=3, checkpoints="base,step10", seed=4),
                    *synth.write_endpoint(tmp_path / "endpoint", samples=60, attempts=3, steps=(0, 2))])
    base = rl.curate(con, "base")
    assert base.attrs["splits"]["train"] == 0 and base.attrs["next"] == "rolloutlab curate --run train-step0"
    step0 = rl.curate(con, "train-step0")
    assert step0.attrs["advice"] is None and step0.attrs["splits"]["train"] > 5
    con.close()
    assert main(["curate", "--run", "base", "--db", str(db)]) == 1  # nothing to train on: not a success
    assert main(["curate", "--run", "base", "--db", str(db), "--out", str(tmp_path / "x"), "--to", "jsonl"]) == 2
    assert main(["curate", "--run", "train-step0", "--db", str(db), "--out", str(tmp_path / "t"), "--to", "openai-rft"]) == 0
    lines = (tmp_path / "t" / "train.jsonl").read_text().splitlines()
    assert len(lines) == step0.attrs["splits"]["train"] and all(json.loads(line)["messages"] for line in lines)


def test_a_band_nothing_falls_in_says_what_to_change(con, tmp_path):
    paths = synth.write_native(tmp_path / "native", samples=30, attempts=3, checkpoints="base", seed=4)
    rl.ingest(con, paths)
    df = rl.curate(con, "base", band=(0.99, 1.0))
    assert df.attrs["counts"]["keep"] == 0 and "is inside the band 0.99–1 of its pass rate" in df.attrs["advice"]


def test_rl_curate_works_after_the_module_was_imported(random_run):
    import rolloutlab.analysis.curation  # noqa: F401  (the module's name is not the function's: no clash)

    con, _ = random_run
    assert rl.curate(con, "r").equals(curate(con, "r"))
    assert rl.signal_by_step is signal_by_step


def test_bad_parameters_say_what_to_give(random_run):
    con, _ = random_run
    with pytest.raises(rl.UnknownRunError):
        curate(con, "nope")
    with pytest.raises(ValueError, match="pass_rate"):
        curate(con, "r", on="median")
    with pytest.raises(ValueError, match="low <= high"):
        curate(con, "r", band=(0.8, 0.2))
    with pytest.raises(ValueError, match="share from 0 to 1"):
        curate(con, "r", validation_share=1.5)


# ---- the forecast ------------------------------------------------------------------------------

def expected_signal(alpha: float, beta: float, k: int) -> float:
    def log_ratio(x):
        return math.lgamma(x + k) - math.lgamma(x) + math.lgamma(alpha + beta) - math.lgamma(alpha + beta + k)
    return 1 - math.exp(log_ratio(alpha)) - math.exp(log_ratio(beta))


def test_forecast_is_signal_plans_model_over_the_kept_samples(random_run):
    con, outcomes = random_run
    df = curate(con, "r")
    ks = (1, 2, 4, 8)
    fc = forecast(con, df, ks=ks, target=0.5)
    plan = rl.signal_plan(con, "r", ks=ks)
    # every sample with counted attempts, before curation: signal_plan itself
    assert fc.all_expected_signal_share.tolist() == pytest.approx(plan.expected_signal_share.tolist(), abs=1e-12)
    assert fc.prior_a.tolist() == pytest.approx(plan.prior_a.tolist())
    a, b = plan.prior_a.iloc[0], plan.prior_b.iloc[0]
    kept = df[df.verdict == "keep"]
    for k, row in zip(ks, fc.itertuples()):
        q = [max(expected_signal(a + c, b + n - c, k), 0.0) for c, n in zip(kept.successes, kept.attempts)]
        assert row.expected_signal_share == pytest.approx(sum(q) / len(q), abs=1e-12)
        se = math.sqrt(sum(x * (1 - x) for x in q)) / len(q)
        assert row.se == pytest.approx(se, rel=1e-9, abs=1e-7)  # k=1: rounding residue only
        assert row.ci_low == pytest.approx(max(0.0, row.expected_signal_share - 1.959963984540054 * se), abs=1e-7)
        assert row.samples == len(kept)
    assert fc.recommended.sum() == 1 and fc[fc.recommended].k.iloc[0] == fc[fc.reaches_target].k.min()
    assert (fc.expected_signal_share.iloc[1:] > fc.all_expected_signal_share.iloc[1:]).all()


def simulate(load, con, draw, datasets: int, samples: int, attempts: int, ks=(2, 4, 8), seed: int = 0):
    """Per dataset: success probabilities from ``draw``, observed attempts, a curation and its
    forecast; then k new attempts per kept sample from the true probabilities. Yields (k,
    realised share, forecast row)."""
    rng = random.Random(seed)
    records, truth = [], {}
    for d in range(datasets):
        for i in range(samples):
            p = draw(rng)
            truth[(f"sim{d}", f"x{i:04d}")] = p
            records += [rollout(f"sim{d}", f"x{i:04d}", float(rng.random() < p)) for _ in range(attempts)]
    load(records)
    for d in range(datasets):
        df = curate(con, f"sim{d}")
        fc = forecast(con, df, ks=ks).set_index("k")
        kept = df.sample_id[df.verdict == "keep"]
        for k in ks:
            hits = [rng.random() < truth[(f"sim{d}", s)] for s in kept for _ in range(k)]
            mixed = [0 < sum(hits[i * k:(i + 1) * k]) < k for i in range(len(kept))]
            yield k, sum(mixed) / len(mixed), fc.loc[k]


def test_forecast_holds_against_new_attempts_drawn_from_known_probabilities(load, con):
    """Success probabilities ~ Beta(0.5, 0.5), the U shape of RL task sets, which the model's
    prior can express: the realised share of a new round falls within the stated 95% interval."""
    results = list(simulate(load, con, lambda rng: rng.betavariate(0.5, 0.5), datasets=8, samples=250, attempts=4))
    inside = [fc.ci_low <= real <= fc.ci_high for _, real, fc in results]
    assert sum(inside) >= 0.85 * len(inside), [(k, real, fc.ci_low, fc.ci_high) for k, real, fc in results]
    bias = sum(real - fc.expected_signal_share for _, real, fc in results) / len(results)
    assert abs(bias) < 0.04


def test_forecast_is_conservative_where_samples_are_often_always_right_or_wrong(load, con):
    """A known limit of signal_plan's model, pinned so that a change to it shows: with the demo's
    success law (a third of samples never solved, half always), one Beta prior fitted to every
    sample drags the kept samples toward 0 or 1, so the forecast undershoots a new round by
    about 10 points (docs/metrics.md, "Forecast")."""
    def demo_law(rng):
        return min(1.0, max(0.0, (synth.BASE_SKILL - rng.random()) / synth.BAND + 0.5))

    results = list(simulate(load, con, demo_law, datasets=6, samples=250, attempts=3, seed=1))
    gaps = [real - fc.expected_signal_share for _, real, fc in results]
    assert 0.03 < sum(gaps) / len(gaps) < 0.2


# ---- figures ----------------------------------------------------------------------------------

SBS = pd.DataFrame({
    "run": ["base", "t0", "t5", "t0"], "split": ["valid", "train", "train", "train"], "step": [0, 0, 5, 0],
    "step_known": [False, True, True, True], "data_source": ["(all)", "(all)", "(all)", "math"],
    "samples": [10, 20, 20, 8], "samples_multi": [10, 20, 20, 8], "single_attempt": [0, 0, 0, 0],
    "all_fail": [5, 10, 4, 2], "all_pass": [2, 6, 12, 2], "mixed": [3, 4, 4, 4], "zero_std": [6, 15, 16, 4],
    "share_all_fail": [0.5, 0.5, 0.2, 0.25], "share_all_pass": [0.2, 0.3, 0.6, 0.25],
    "share_mixed": [0.3, 0.2, 0.2, 0.5], "share_zero_std": [0.6, 0.75, 0.8, 0.5]})


def test_signal_by_step_figure_draws_the_frame():
    fig = pc.signal_by_step(SBS)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["valid", "train", "train · math"]
    train = panels[1]
    heights = [round(p.get_height(), 6) for p in train.patches]
    bottoms = [round(p.get_y(), 6) for p in train.patches]
    assert heights == [0.5, 0.2, 0.2, 0.2, 0.3, 0.6]  # all-fail, mixed, all-pass per step, in that order
    assert bottoms == [0, 0, 0.5, 0.2, 0.7, 0.4]
    assert [t.get_text() for t in train.get_xticklabels()] == ["0", "5"]
    assert panels[0].get_xticklabels()[0].get_text() == "base\n(no step)"
    assert list(train.lines[0].get_ydata()) == [0.75, 0.8]
    assert panels[0].get_ylabel() == "share of samples" and train.get_xlabel() == "training step"
    assert "4 runs" not in fig.get_suptitle() and "3 runs" in fig.get_suptitle()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "all attempts pass (no signal)", "pass and fail: learning signal", "all attempts fail (no signal)",
        "same score every attempt (zero advantage)"]
    with pytest.raises(EmptyDataError):
        pc.signal_by_step(SBS.iloc[:0])


def test_signal_by_step_interactive_escapes_and_stacks():
    df = SBS.assign(run=["<b>base</b>", "t0", "t5", "t0"])
    fig = pc.signal_by_step_interactive(df)
    bars = [t for t in fig.data if t.type == "bar"]
    assert len(bars) == 9 and fig.layout.barmode == "stack"
    assert list(bars[3].y) == [0.5, 0.2] and bars[3].name == "all attempts fail (no signal)"
    assert "&lt;b&gt;base&lt;/b&gt;" in bars[0].x[0] and "<b>" not in fig.to_json().replace("\\u003cb\\u003e", "")
    assert fig.layout.title.text.startswith("Learning signal along training")


def test_forecast_figures_draw_the_frame(random_run):
    con, _ = random_run
    fc = forecast(con, curate(con, "r"), ks=(1, 2, 4, 8))
    ax = pc.forecast(fc, "r").axes[0]
    curated, before = ax.lines[0], ax.lines[1]
    assert list(curated.get_ydata()) == fc.expected_signal_share.tolist()
    assert list(before.get_ydata()) == fc.all_expected_signal_share.tolist()
    assert ax.get_xlabel() == "attempts per sample (compute multiplier)"
    assert ax.get_title().startswith("What the curation buys — r: ")
    assert any(t.get_text().startswith("recommended") for t in ax.get_legend().get_texts())
    fig = pc.forecast_interactive(fc, "r")
    assert list(fig.data[1].y) == fc.expected_signal_share.tolist()


def test_figures_meet_the_figure_standard(random_run):
    lint = pytest.importorskip("rolloutlab.views.plots.lint")
    con, _ = random_run
    fc = forecast(con, curate(con, "r"))
    for fig in (pc.signal_by_step(SBS), pc.signal_by_step_interactive(SBS), pc.forecast(fc, "r"),
                pc.forecast_interactive(fc, "r")):
        assert lint.problems(fig, ["base", "t0"]) == []


def test_verdicts_on_rewards_in_minus_one_to_one(load, con):
    """Issue 36: -1 is the bottom, not a partial credit; a broken attempt counts -1."""
    meta = {"run_meta": {"reward_range": [-1, 1]}}
    rows = {"hard": [-1, -1, None], "easy": [1, 1, 1], "mixed": [1, -1, -1, 1], "partial": [0.5, -1, 0.0]}
    load([rollout("g", s, v, status="model_error" if v is None else "ok", prompt=f"question {s}", **meta)
          for s, vs in rows.items() for v in vs])
    df = rl.curate(con, "g").set_index("sample_id")
    assert df.verdict.to_dict() == {"easy": "too_easy", "hard": "too_hard", "mixed": "keep", "partial": "too_hard"}
    assert df.loc["hard", "reason"] == "never passed in 3 attempts"  # not "partial credit only, best 0"
    assert df.loc["partial", "reason"] == "never passed in 3 attempts (partial credit only, best 0.5)"
    on_mean = rl.curate(con, "g", on="mean_score", band=(-0.5, 0.5)).set_index("sample_id")
    assert on_mean.loc["mixed", "verdict"] == "keep" and on_mean.loc["mixed", "mean_score"] == 0.0
    assert on_mean.loc["hard", "mean_score"] == -1.0

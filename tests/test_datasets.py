"""write_curated: each layout read back by its consumer's reader (Hugging Face ``datasets``, which
verl's RLHFDataset and TRL's trainers load with) or checked against OpenAI's documented schema
for reinforcement fine-tuning lines; only prompts and references leave, never a rollout's answer."""
from __future__ import annotations

import hashlib
import json
import os

import jsonschema
import pytest

import rolloutlab as rl
from conftest import rollout, write_jsonl
from rolloutlab import datasets as exports
from rolloutlab.curation import curate

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local files only: no hub lookups from the reader
hf = pytest.importorskip("datasets", reason="the round trips need Hugging Face datasets (requirements.txt)")

SYSTEM_PROMPT = json.dumps([{"role": "system", "content": "Answer with a number."},
                            {"role": "user", "content": "How many moons has Mars?"},
                            {"role": "assistant", "content": "an answer kept in the dataset after the question"}])
PROMPTS = {
    "plain": "What was Acme's revenue in 2020?",
    "chat": SYSTEM_PROMPT,
    "object-ref": "Name the capital of France and its population.",
    "no-prompt": None,
    "blank": "   ",
    "image": json.dumps([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
    "reserved": "Which tools exist?",
    "pinned": "A question another run validated on.",
    "easy": "Too easy to keep.",
}
REFERENCES = {"object-ref": {"capital": "Paris", "population": 2.1}, "reserved": {"messages": "clash", "answer": "3"}}
MORE = [f"Question number {i} about report {i * 7}?" for i in range(12)]


def build(db) -> tuple:
    """Every sample passes 1 of 2 attempts (kept) but 'easy'; each rollout answers with a marker
    that must never reach a training file."""
    records = []
    prompts = dict(PROMPTS, **{f"more-{i:02d}": p for i, p in enumerate(MORE)})
    for n, (sample, prompt) in enumerate(sorted(prompts.items())):
        for attempt, score in enumerate([1.0, 1.0] if sample == "easy" else [1.0, 0.0]):
            extra = {"split": "train", "answer": f"ROLLOUT-ANSWER-{n}-{attempt}",
                     "messages": [{"role": "assistant", "content": f"ROLLOUT-MESSAGE-{n}-{attempt}"}]}
            if prompt is not None:
                extra.update(prompt=prompt, reference=REFERENCES.get(sample, f"ref {sample}"))
            records.append(rollout("cand", sample, score, **extra))
    records.append(rollout("evalrun", "pinned", 1.0, split="valid", prompt=PROMPTS["pinned"], reference="x"))
    con = rl.connect(db)
    path = write_jsonl(db.parent / "logs.jsonl", records)
    assert rl.ingest(con, path).rejected.sum() == 0
    return con, path


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exports")
    con, path = build(folder / "e.duckdb")
    yield con, path, folder
    con.close()


def lines(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


# OpenAI's API reference, "Training format for reasoning models using the reinforcement method":
# messages (developer, user, assistant or tool messages; text content) and tools are the only
# reserved keys; any other key is the item a grader reads as {{item.<key>}}.
RFT_LINE = {
    "type": "object", "required": ["messages"],
    "properties": {
        "messages": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["role", "content"],
            "properties": {"role": {"enum": ["developer", "user", "assistant", "tool"]},
                           "content": {"anyOf": [{"type": "string", "minLength": 1},
                                                 {"type": "array", "items": {"type": "object",
                                                                             "properties": {"type": {"const": "text"}}}}]}}}},
        "tools": {"type": "array"}},
}


def test_openai_rft_lines_follow_the_documented_format(built, tmp_path):
    con, _, _ = built
    out = rl.write_curated(con, "cand", tmp_path, to="openai-rft", validation_share=0.25, seed=1)
    curated = curate(con, "cand", validation_share=0.25, seed=1)
    train, valid = lines(tmp_path / "train.jsonl"), lines(tmp_path / "validation.jsonl")
    for line in train + valid:
        jsonschema.validate(line, RFT_LINE)
        assert line["messages"][-1]["role"] == "user"
    by_id = {x["id"]: x for x in train + valid}
    assert by_id["plain"] == {"messages": [{"role": "user", "content": PROMPTS["plain"]}],
                              "reference_answer": "ref plain", "id": "plain"}
    # a system prompt is the developer's; what followed the last user turn is not exported
    assert by_id["chat"]["messages"] == [{"role": "developer", "content": "Answer with a number."},
                                         {"role": "user", "content": "How many moons has Mars?"}]
    # a reference object's fields at the top level, for {{item.capital}}
    assert by_id["object-ref"] == {"messages": [{"role": "user", "content": PROMPTS["object-ref"]}],
                                   "capital": "Paris", "population": 2.1, "id": "object-ref"}
    kept = curated[curated.verdict == "keep"]
    unexportable = {"no-prompt", "blank", "image", "reserved"}
    assert set(by_id) == set(kept.sample_id) - unexportable
    assert {x["id"] for x in valid} == set(kept.sample_id[kept.split == "validation"]) - unexportable
    assert "pinned" in {x["id"] for x in valid}
    assert out["not_exported"] == {"no_prompt": {"samples": 2, "examples": ["blank", "no-prompt"]},
                                   "non_text_prompt": {"samples": 1, "examples": ["image"]},
                                   "reserved_field": {"samples": 1, "examples": ["reserved"]}}
    assert out["exported"] == {"train": len(train), "validation": len(valid)}
    assert out["checks"] == exports.OPENAI_RFT_CHECKS
    assert all(f["bytes"] <= exports.OPENAI_RFT_MAX_FILE_BYTES for f in out["files"].values() if isinstance(f, dict))


@pytest.mark.parametrize("to", exports.EXPORT_FORMATS)
def test_never_a_rollouts_answer_and_never_an_empty_prompt(built, tmp_path, to):
    con, _, _ = built
    rl.write_curated(con, "cand", tmp_path, to=to)
    for path in tmp_path.iterdir():
        data = path.read_bytes()
        assert b"ROLLOUT-ANSWER" not in data and b"ROLLOUT-MESSAGE" not in data, path
    if to in ("openai-rft", "jsonl"):
        for split in ("train", "validation"):
            for line in lines(tmp_path / f"{split}.jsonl"):
                messages = line["messages"] if to == "openai-rft" else line["prompt"]
                assert messages and all(m["content"].strip() for m in messages)


def load_parquet(folder, cache):
    return hf.load_dataset("parquet", data_files={s: str(folder / f"{s}.parquet") for s in ("train", "validation")},
                           cache_dir=str(cache))


def test_verl_parquet_reads_back_as_verl_reads_it(built, tmp_path):
    """verl's RLHFDataset reads its files with datasets.load_dataset("parquet"), renders ``prompt``
    with the chat template and takes extra_info.index; rewards read reward_model.ground_truth."""
    con, _, _ = built
    out = rl.write_curated(con, "cand", tmp_path / "verl", to="verl", validation_share=0.25, seed=1)
    ds = load_parquet(tmp_path / "verl", tmp_path / "cache")
    assert ds["train"].column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert len(ds["train"]) == out["exported"]["train"] and len(ds["validation"]) == out["exported"]["validation"]
    rows = {r["extra_info"]["sample_id"]: r for s in ("train", "validation") for r in ds[s]}
    assert rows["plain"]["prompt"] == [{"role": "user", "content": PROMPTS["plain"]}]
    assert rows["plain"]["reward_model"] == {"style": "rule", "ground_truth": "ref plain"}
    assert rows["plain"]["data_source"] == "cand" and rows["plain"]["ability"] == exports.VERL_ABILITY
    assert rows["chat"]["prompt"][0] == {"role": "system", "content": "Answer with a number."}
    assert json.loads(rows["object-ref"]["reward_model"]["ground_truth"]) == REFERENCES["object-ref"]
    assert [r["extra_info"]["index"] for r in ds["train"]] == list(range(len(ds["train"])))
    assert {r["extra_info"]["split"] for r in ds["validation"]} == {"validation"}
    assert rows["plain"]["extra_info"]["pass_rate"] == 0.5 and rows["plain"]["extra_info"]["attempts"] == 2


def test_trl_parquet_is_a_conversational_prompt_only_dataset(built, tmp_path):
    """TRL's GRPO trainer takes a "prompt" column of chat messages (its is_conversational: a list
    whose first item is a dict with "role") and passes every other column to the reward
    functions by name."""
    con, _, _ = built
    rl.write_curated(con, "cand", tmp_path / "trl", to="trl")
    ds = load_parquet(tmp_path / "trl", tmp_path / "cache")
    assert ds["train"].column_names[:3] == ["prompt", "ground_truth", "sample_id"]
    rows = {r["sample_id"]: r for s in ("train", "validation") for r in ds[s]}
    for row in rows.values():
        assert isinstance(row["prompt"], list) and isinstance(row["prompt"][0], dict) and "role" in row["prompt"][0]
        assert row["prompt"][-1]["role"] == "user"
    assert rows["plain"]["ground_truth"] == "ref plain"
    assert rows["object-ref"]["capital"] == "Paris" and rows["object-ref"]["population"] == 2.1
    assert rows["plain"]["capital"] is None


def test_jsonl_reads_back_with_the_json_loader(built, tmp_path):
    con, _, _ = built
    rl.write_curated(con, "cand", tmp_path / "j", to="jsonl")
    ds = hf.load_dataset("json", data_files={s: str(tmp_path / "j" / f"{s}.jsonl") for s in ("train", "validation")},
                         cache_dir=str(tmp_path / "cache"))
    rows = {r["sample_id"]: r for s in ("train", "validation") for r in ds[s]}
    assert rows["plain"]["reference"] == "ref plain" and rows["plain"]["pass_rate"] == 0.5
    assert rows["plain"]["group"] == "plain" and rows["pinned"]["split"] == "validation"


def test_curation_json_says_what_came_from_where(built, tmp_path):
    con, logs, folder = built
    out = rl.write_curated(con, "cand", tmp_path, to="verl", band=(0.4, 0.6), seed=7)
    saved = json.loads((tmp_path / "curation.json").read_text())
    assert {k: v for k, v in saved.items() if k != "files"} == {k: v for k, v in out.items() if k != "files"}
    curated = curate(con, "cand", band=(0.4, 0.6), seed=7)
    assert saved["run"] == "cand" and saved["to"] == "verl" and saved["seed"] == 7
    assert saved["parameters"]["band"] == [0.4, 0.6] and saved["parameters"]["seed"] == 7
    assert saved["counts"] == curated.attrs["counts"] and saved["counts"]["too_easy"] == 1
    assert saved["database"] == str(folder / "e.duckdb")
    assert saved["sources"] == [{"source_id": 1, "path": str(logs), "format": "native",
                                 "sha256": hashlib.sha256(logs.read_bytes()).hexdigest()}]
    for split in ("train", "validation"):
        facts = saved["files"][split]
        assert facts["sha256"] == hashlib.sha256((tmp_path / f"{split}.parquet").read_bytes()).hexdigest()
    assert [row["k"] for row in saved["forecast"]] == [1, 2, 3, 4, 8, 16, 32]
    assert any("not exported" in w for w in saved["warnings"])


@pytest.mark.parametrize("to", exports.EXPORT_FORMATS)
def test_the_same_curation_writes_the_same_bytes(built, tmp_path, to):
    con, _, _ = built
    rl.write_curated(con, "cand", tmp_path / "a", to=to, seed=3)
    rl.write_curated(con, "cand", tmp_path / "b", to=to, seed=3)
    for name in sorted(p.name for p in (tmp_path / "a").iterdir() if p.name != "curation.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_an_empty_train_file_is_said(built, tmp_path):
    con, _, _ = built
    out = rl.write_curated(con, "evalrun", tmp_path, to="openai-rft", min_attempts=1, band=(0, 1))
    assert out["exported"] == {"train": 0, "validation": 0}
    assert "the train file is empty" in out["warnings"] and (tmp_path / "train.jsonl").read_bytes() == b""


def test_limits_and_unknown_layouts_refuse(built, tmp_path, monkeypatch):
    con, _, _ = built
    with pytest.raises(ValueError, match="openai-rft, verl, trl, jsonl"):
        rl.write_curated(con, "cand", tmp_path, to="csv")
    monkeypatch.setattr(exports, "OPENAI_RFT_MAX_FILE_BYTES", 100)
    with pytest.raises(ValueError, match="over the 0 MB the Files API accepts"):
        rl.write_curated(con, "cand", tmp_path, to="openai-rft")


def test_demo_logs_export_every_layout(tmp_path):
    from rolloutlab import synth

    con = rl.connect(tmp_path / "demo.duckdb")
    rl.ingest(con, synth.write_native(tmp_path / "logs", samples=40, attempts=4, checkpoints="base", seed=9))
    kept = curate(con, "base")
    n_kept = int((kept.verdict == "keep").sum())
    for to in exports.EXPORT_FORMATS:
        out = rl.write_curated(con, "base", tmp_path / to, to=to)
        assert sum(out["exported"].values()) == n_kept > 5
        assert out["exported"]["validation"] == round(0.1 * n_kept)
    con.close()

"""write_curated: each layout read back by its consumer's reader (Hugging Face ``datasets``, which
verl's RLHFDataset and TRL's trainers load with) or checked against OpenAI's documented schema
for reinforcement fine-tuning lines; only prompts and references leave, never a rollout's answer."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import jsonschema
import pytest

import rolloutlab as rl
from conftest import rollout, write_jsonl
from rolloutlab.exports import training_files as exports
from rolloutlab.analysis.curation import curate

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


@pytest.fixture(autouse=True)
def small_sets_allowed(monkeypatch, request):
    """These fixtures keep a dozen samples, below Bedrock's minimum of 100 training records; that
    minimum is tested on its own (``test_bedrock_nova_needs_its_minimum``)."""
    if "bedrock_minimum" not in request.keywords:
        monkeypatch.setattr(exports, "BEDROCK_NOVA_MIN_RECORDS", 1)


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


def test_an_empty_train_file_is_an_error_and_nothing_is_written(built, tmp_path):
    con, _, _ = built
    with pytest.raises(ValueError, match=r"nothing to train on, so nothing was written to .*: No sample of evalrun is "
                                         r"inside the band 0–1 of its pass rate \(1 too_easy\)"):
        rl.write_curated(con, "evalrun", tmp_path / "out", to="openai-rft", min_attempts=1, band=(0, 1))
    assert not (tmp_path / "out").exists()


def test_limits_and_unknown_layouts_refuse(built, tmp_path, monkeypatch):
    con, _, _ = built
    with pytest.raises(ValueError, match="openai-rft, verl, trl, jsonl, bedrock-nova, gemini-rl, verifiers"):
        rl.write_curated(con, "cand", tmp_path, to="csv")
    monkeypatch.setattr(exports, "OPENAI_RFT_MAX_FILE_BYTES", 1000)
    # the size in bytes, exactly (not "0 MB, over the 0 MB")
    with pytest.raises(ValueError, match=r"the train file would be \d{1,3}(,\d{3})+ bytes, over the 1,000 bytes "
                                         "the Files API accepts"):
        rl.write_curated(con, "cand", tmp_path, to="openai-rft")
    assert list(tmp_path.iterdir()) == []  # nothing written, no temporary file left


def test_demo_logs_export_every_layout(tmp_path):
    from rolloutlab.demo import synth

    con = rl.connect(tmp_path / "demo.duckdb")
    rl.ingest(con, synth.write_native(tmp_path / "logs", samples=40, attempts=4, checkpoints="base", seed=9))
    kept = curate(con, "base")
    n_kept = int((kept.verdict == "keep").sum())
    for to in exports.EXPORT_FORMATS:
        out = rl.write_curated(con, "base", tmp_path / to, to=to)
        assert sum(out["exported"].values()) == n_kept > 5
        assert out["exported"]["validation"] == round(0.1 * n_kept)
    con.close()


# --- hostile data: secrets, numbers JSON has not, text that is not Unicode ----------------------

SECRETS = ["sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdef", "hunter2", "pa55w0rd", "s3cr3tV4lue"]
HOSTILE = {  # sample: (prompt, reference), as a dataset's logs hold them
    "nan": ("What is 2+2?", '{"answer": NaN}'),
    "inf": ("What is 3+3?", '{"answer": -Infinity}'),
    "surrogate-prompt": ('[{"role": "user", "content": "bad \\ud800 text"}]', "1"),
    "surrogate-ref": ("What is 1+1?", '{"answer": "x\\udfff"}'),
    "secret-prompt": (f"Use key {SECRETS[0]} and password=hunter2 to call https://user:pa55w0rd@api.example.com", "8"),
    "secret-ref": ("Where does the deploy go?", '{"answer": "https://bot:s3cr3tV4lue@ci.example.com/x"}'),
    **{f"ok-{i}": (f"What is {i} times {i}?", str(i * i)) for i in range(6)},
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    records = [rollout("h", sample, score, split="train", prompt=prompt, reference=reference)
               for sample, (prompt, reference) in sorted(HOSTILE.items()) for score in (1.0, 0.0)]
    con = rl.connect(folder / "h.duckdb")
    assert rl.ingest(con, write_jsonl(folder / "h.jsonl", records)).rejected.sum() == 0
    yield con
    con.close()


def strict_lines(path) -> list[dict]:
    """JSON lines as a strict reader (not Python's) takes them: no NaN / Infinity."""
    def refuse(constant):
        raise ValueError(f"{path}: {constant} is not JSON")
    return [json.loads(x, parse_constant=refuse) for x in path.read_text(encoding="utf-8").splitlines()]


def sample_id_of(line: dict, to: str) -> str:
    """Where each JSONL layout keeps the sample id."""
    return {"openai-rft": lambda x: x["id"], "jsonl": lambda x: x["sample_id"], "bedrock-nova": lambda x: x["sample_id"],
            "gemini-rl": lambda x: x["references"]["sample_id"],
            "verifiers": lambda x: json.loads(x["info"])["sample_id"]}[to](line)


@pytest.mark.parametrize("to", exports.EXPORT_FORMATS)
def test_records_that_cannot_be_json_are_counted_not_written(hostile, tmp_path, to):
    out = rl.write_curated(hostile, "h", tmp_path, to=to, validation_share=0.25, seed=1)
    assert out["not_exported"] == {"invalid_unicode": {"samples": 2, "examples": ["surrogate-prompt", "surrogate-ref"]},
                                   "non_finite_number": {"samples": 2, "examples": ["inf", "nan"]}}
    assert sum(out["exported"].values()) == len(HOSTILE) - 4
    assert any("2 invalid unicode, 2 non finite number" in w for w in out["warnings"])
    for path in tmp_path.iterdir():
        assert path.suffix != ".tmp", path
        if path.suffix in (".json", ".jsonl"):
            path.read_bytes().decode("utf-8")  # every text file is UTF-8
    if to in exports.JSONL_FORMATS:
        written = [strict_lines(tmp_path / f"{s}.jsonl") for s in ("train", "validation")]
        ids = {sample_id_of(x, to) for lines_ in written for x in lines_}
    else:
        ds = load_parquet(tmp_path, tmp_path / "cache")
        ids = {r["extra_info"]["sample_id"] if to == "verl" else r["sample_id"]
               for s in ("train", "validation") for r in ds[s]}
    assert ids == set(HOSTILE) - {"nan", "inf", "surrogate-prompt", "surrogate-ref"}
    assert json.loads((tmp_path / "curation.json").read_text(encoding="utf-8"))["not_exported"] == out["not_exported"]


@pytest.mark.parametrize("to", exports.EXPORT_FORMATS)
def test_secrets_in_prompts_and_references_are_redacted(hostile, tmp_path, to):
    out = rl.write_curated(hostile, "h", tmp_path, to=to, validation_share=0.25, seed=1)
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert {p.name for p in files} >= {"curation.json", "train." + ("parquet" if to in ("verl", "trl") else "jsonl")}
    for path in files:
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, (path, secret)
    assert out["redacted"] == {"records": 2}
    assert json.loads((tmp_path / "curation.json").read_text())["redacted"] == {"records": 2}
    assert any("2 exported records had secrets" in w for w in out["warnings"])
    if to == "openai-rft":
        by_id = {x["id"]: x for s in ("train", "validation") for x in strict_lines(tmp_path / f"{s}.jsonl")}
        assert by_id["secret-prompt"]["messages"][0]["content"] == (
            "Use key [redacted] and password=[redacted] to call https://user:[redacted]@api.example.com")
        assert by_id["secret-ref"]["answer"] == "https://bot:[redacted]@ci.example.com/x"
        assert by_id["ok-3"] == {"messages": [{"role": "user", "content": "What is 3 times 3?"}],
                                 "reference_answer": "9", "id": "ok-3"}


@pytest.mark.parametrize("to", ["openai-rft", "verl"])
def test_a_planted_symlink_is_replaced_never_followed(built, tmp_path, to):
    out = tmp_path / "out"
    out.mkdir()
    victims = {name: tmp_path / f"victim-{i}" for i, name in enumerate(["train", ".train.jsonl.tmp",
                                                                        ".train.parquet.tmp", "curation.json"])}
    for i, (name, victim) in enumerate(victims.items()):
        victim.write_text(f"precious {i}\n")
        link = name if name.startswith(".") or name == "curation.json" else (
            "train.jsonl" if to == "openai-rft" else "train.parquet")
        os.symlink(victim, out / link)
    rl.write_curated(built[0], "cand", out, to=to)
    for i, victim in enumerate(victims.values()):
        assert victim.read_text() == f"precious {i}\n"  # no file outside was written through a link
    for name in ("train.jsonl" if to == "openai-rft" else "train.parquet", "curation.json"):
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 0
    assert json.loads((out / "curation.json").read_text())["to"] == to
    # the old fixed temporary names are left as they were, and no new temporary file stays
    assert (out / ".train.jsonl.tmp").is_symlink() and (out / ".train.parquet.tmp").is_symlink()
    assert sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp")) == [".train.jsonl.tmp",
                                                                                ".train.parquet.tmp"]


def folder_bytes(folder) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_an_export_that_fails_leaves_the_folder_as_it_was(built, tmp_path, monkeypatch):
    """A later file over the limit: the earlier one is not replaced, curation.json still tells the
    files that are there."""
    out = tmp_path / "out"
    rl.write_curated(built[0], "cand", out, to="openai-rft", validation_share=0.25, seed=1)
    before = folder_bytes(out)
    # the next export: its validation file (most samples) is over the limit, its train file is not
    trial = rl.write_curated(built[0], "cand", tmp_path / "trial", to="openai-rft", validation_share=0.8, seed=2)
    train, valid = trial["files"]["train"]["bytes"], trial["files"]["validation"]["bytes"]
    assert train < valid and (tmp_path / "trial" / "train.jsonl").read_bytes() != before["train.jsonl"]
    monkeypatch.setattr(exports, "OPENAI_RFT_MAX_FILE_BYTES", (train + valid) // 2)
    with pytest.raises(ValueError, match=f"the validation file would be {valid:,} bytes, over the "
                                         f"{(train + valid) // 2:,} bytes the Files API accepts"):
        rl.write_curated(built[0], "cand", out, to="openai-rft", validation_share=0.8, seed=2)
    assert folder_bytes(out) == before


def test_a_failure_while_writing_removes_what_was_written(built, tmp_path, monkeypatch):
    out = tmp_path / "out"
    rl.write_curated(built[0], "cand", out, to="verl", seed=1)
    before = folder_bytes(out)
    real = exports.pq.write_table
    calls = []

    def disk_full(table, where, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(table, where, **kw)

    monkeypatch.setattr(exports.pq, "write_table", disk_full)
    with pytest.raises(OSError, match="No space left"):
        rl.write_curated(built[0], "cand", out, to="verl", seed=4, validation_share=0.5)
    assert folder_bytes(out) == before


def test_out_must_be_a_folder(built, tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="afile is a file, not a folder: give a folder for the training files"):
        rl.write_curated(built[0], "cand", tmp_path / "afile", to="jsonl")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        rl.write_curated(built[0], "cand", tmp_path / "afile" / "sub", to="jsonl")
    assert (tmp_path / "afile").read_text() == "x"


@pytest.mark.parametrize("to", ["openai-rft", "trl"])
def test_training_files_keep_ordinary_text_and_lose_every_planted_secret(tmp_path, to):
    """#34: read back from the files (JSON lines; Parquet through Hugging Face datasets), a prompt
    or reference that holds nothing secret is exactly what the dataset holds ("Answer key: B"
    stays), and every provider's credential format planted in a prompt or a reference is gone."""
    from test_capture_redact import ORDINARY, PLANTED_TEXTS

    samples = {f"ord-{i:02d}": (text, ORDINARY[(i + 1) % len(ORDINARY)]) for i, text in enumerate(ORDINARY)}
    secrets = {}
    for i, (name, (planted, secret)) in enumerate(sorted(PLANTED_TEXTS.items())):
        question = f"Which invoice does this belong to? Context: {planted}"
        if i % 2:
            samples[f"sec-{name}"] = (question, "ref")
        else:
            samples[f"sec-{name}"] = (f"Which invoice is the {name} one?", json.dumps({"answer": "INV-7", "context": planted}))
        secrets[f"sec-{name}"] = secret
    records = [rollout("t", sid, score, split="train", prompt=prompt, reference=reference)
               for sid, (prompt, reference) in sorted(samples.items()) for score in (1.0, 0.0)]
    con = rl.connect(tmp_path / "t.duckdb")
    assert rl.ingest(con, write_jsonl(tmp_path / "t.jsonl", records)).rejected.sum() == 0
    out = rl.write_curated(con, "t", tmp_path / to, to=to, validation_share=0.25, seed=1)
    con.close()
    if to == "openai-rft":
        rows = {x["id"]: (x["messages"][-1]["content"], x.get("reference_answer", x.get("answer")))
                for s in ("train", "validation") for x in strict_lines(tmp_path / to / f"{s}.jsonl")}
    else:
        ds = load_parquet(tmp_path / to, tmp_path / "cache")
        rows = {r["sample_id"]: (r["prompt"][-1]["content"], r["ground_truth"]) for s in ("train", "validation")
                for r in ds[s]}
    assert set(rows) == set(samples)
    assert {sid: rows[sid] for sid in samples if sid.startswith("ord")} == \
        {sid: v for sid, v in samples.items() if sid.startswith("ord")}
    data = b"".join(p.read_bytes() for p in (tmp_path / to).iterdir())
    assert [name for name, secret in secrets.items() if secret.encode() in data] == []
    assert out["redacted"] == {"records": len(secrets)}


def test_trl_reference_values_round_trip_exactly(tmp_path):
    """#34: a reference field of integers is an int64 column (9007199254740993 is not a double:
    it was written 9007199254740992.0, and 42 as 42.0); one past int64 and a column mixing kinds
    hold JSON text that says the value exactly. Read back with pyarrow and Hugging Face datasets."""
    import pyarrow.parquet as pq

    refs = {
        "a": {"answer_id": 9007199254740993, "count": 42, "ratio": 0.5, "huge": 10**30, "mixed": 3, "flag": True},
        "b": {"answer_id": -7, "count": 0, "ratio": 2, "huge": 5, "mixed": "three", "flag": False},
        "c": {"answer_id": 2**63 - 1, "count": None, "ratio": 1e-9, "huge": None, "mixed": None, "flag": None},
    }
    records = [rollout("t", sid, score, split="train", prompt=f"Question {sid}?", reference=ref)
               for sid, ref in refs.items() for score in (1.0, 0.0)]
    con = rl.connect(tmp_path / "t.duckdb")
    assert rl.ingest(con, write_jsonl(tmp_path / "t.jsonl", records)).rejected.sum() == 0
    rl.write_curated(con, "t", tmp_path / "trl", to="trl", validation_share=0.34, seed=1)
    con.close()
    table = pq.read_table(tmp_path / "trl" / "train.parquet")
    assert str(table.schema.field("answer_id").type) == "int64" and str(table.schema.field("count").type) == "int64"
    assert str(table.schema.field("ratio").type) == "double" and str(table.schema.field("flag").type) == "bool"
    ds = load_parquet(tmp_path / "trl", tmp_path / "cache")
    rows = {r["sample_id"]: r for s in ("train", "validation") for r in ds[s]}
    for sid, ref in refs.items():
        for key in ("answer_id", "count", "flag"):
            got = rows[sid][key]
            assert got == ref[key] and type(got) is type(ref[key]), (sid, key, got)
        assert rows[sid]["ratio"] == ref["ratio"]
        for key in ("huge", "mixed"):  # JSON text: the value exactly, its kind too
            assert (None if rows[sid][key] is None else json.loads(rows[sid][key])) == ref[key], (sid, key)
    assert rows["a"]["answer_id"] == 9007199254740993 and rows["a"]["count"] == 42


KILLED_EXPORT = r"""
import os, signal, sys

import rolloutlab as rl

db, out, point, nth, seed = sys.argv[1:6]
calls = []


def dying(real):
    # the nth rename-like call of the export: SIGKILL just before or just after it
    def wrapper(*args, **kwargs):
        calls.append(real)
        if point == "before" and len(calls) == int(nth):
            os.kill(os.getpid(), signal.SIGKILL)
        result = real(*args, **kwargs)
        if point == "after" and len(calls) == int(nth):
            os.kill(os.getpid(), signal.SIGKILL)
        return result
    return wrapper


os.replace, os.rename = dying(os.replace), dying(os.rename)
try:
    from rolloutlab import folders
    folders.exchange = dying(folders.exchange)
except ImportError:  # an export without a folder swap
    pass
con = rl.connect(db, read_only=True)
rl.write_curated(con, "cand", out, to="openai-rft", validation_share=0.5, seed=int(seed))
"""


def the_set(out) -> dict:
    """The export's files, after checking that curation.json's hashes are theirs."""
    manifest = json.loads((out / "curation.json").read_text())
    got = {}
    for split in ("train", "validation"):
        data = (out / f"{split}.jsonl").read_bytes()
        assert hashlib.sha256(data).hexdigest() == manifest["files"][split]["sha256"], split
        got[split] = data
    return got


@pytest.mark.parametrize("point,nth", [("after", 1), ("after", 2), ("before", 1), ("before", 2)])
def test_an_export_killed_between_its_renames_leaves_the_old_set_or_the_new(tmp_path, point, nth):
    """#34: kill -9 at the export's renames (the child SIGKILLs itself just before or after its
    nth rename, replace or folder swap). The folder then holds the whole old set or the whole new
    one, curation.json's hashes matching; the next export removes what the killed one left."""
    import subprocess
    import sys

    con, _ = build(tmp_path / "k.duckdb")
    out = tmp_path / "out"
    (out / "notes").mkdir(parents=True)
    (out / "notes" / "README.md").write_text("ours\n")  # entries of other names stay
    rl.write_curated(con, "cand", tmp_path / "new", to="openai-rft", validation_share=0.5, seed=2)
    rl.write_curated(con, "cand", out, to="openai-rft", validation_share=0.5, seed=1)
    con.close()
    old, new = the_set(out), the_set(tmp_path / "new")
    assert old != new
    child = subprocess.run([sys.executable, "-c", KILLED_EXPORT, str(tmp_path / "k.duckdb"), str(out), point,
                            str(nth), "2"], capture_output=True, text=True, timeout=120)
    assert child.returncode in (0, -9), child.stderr
    assert the_set(out) in (old, new)
    assert (out / "notes" / "README.md").read_text() == "ours\n"
    (out / ".k2x_9qaz.tmp").write_text("half a file an earlier version's killed export left")
    con = rl.connect(tmp_path / "k.duckdb", read_only=True)
    rl.write_curated(con, "cand", out, to="openai-rft", validation_share=0.5, seed=3)
    con.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no staging folder left
    assert sorted(p.name for p in out.iterdir()) == ["curation.json", "notes", "train.jsonl", "validation.jsonl"]
    assert the_set(out) not in (old, new)


def test_an_export_into_the_working_folder_leaves_this_process_standing_in_it(built, tmp_path, monkeypatch):
    """The swap replaces the folder: a notebook writing into "." keeps working there afterwards."""
    out = tmp_path / "here"
    out.mkdir()
    monkeypatch.chdir(out)
    rl.write_curated(built[0], "cand", ".", to="openai-rft", seed=1)
    rl.write_curated(built[0], "cand", ".", to="openai-rft", seed=2)
    assert os.getcwd() == str(out) and sorted(os.listdir(".")) == ["curation.json", "train.jsonl", "validation.jsonl"]
    assert the_set(out) == the_set(Path("."))


# --- the next platforms (issue 36): Bedrock Nova RFT, Gemini RL tuning, verifiers ----------------

# The Bedrock user guide ("Prepare data for Amazon Nova models") and AWS's own validator
# (aws/nova-forge-sdk, RFTDatasetSample / RFTMessage: message keys role, content, tool_calls,
# tool_call_id only; content non-empty text or parts; reference_answer non-empty text or object;
# id non-empty text; any other top-level key reaches the reward Lambda in `metadata`).
BEDROCK_LINE = {
    "type": "object", "required": ["messages", "reference_answer"],
    "properties": {
        "messages": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["role", "content"], "additionalProperties": False,
            "properties": {"role": {"enum": ["system", "user", "assistant", "tool", "developer"]},
                           "content": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "array", "minItems": 1}]},
                           "tool_calls": {}, "tool_call_id": {}}}},
        "reference_answer": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "object", "minProperties": 1}]},
        "id": {"type": "string", "minLength": 1},
        "tools": {"type": "array", "minItems": 1}},
}


def test_bedrock_nova_lines_follow_the_documented_rules(built, tmp_path):
    con, _, _ = built
    out = rl.write_curated(con, "cand", tmp_path, to="bedrock-nova")
    found = lines(tmp_path / "train.jsonl") + lines(tmp_path / "validation.jsonl")
    for line in found:
        jsonschema.validate(line, BEDROCK_LINE)
        assert exports.bedrock_nova_problem(line) is None
        roles = [m["role"] for m in line["messages"]]
        assert "user" in roles and "system" not in roles[1:]
    by_id = {x["id"]: x for x in found}
    # a system prompt stays a system message (unlike OpenAI RFT's developer); one key for the reference
    assert by_id["chat"] == {"messages": [{"role": "system", "content": "Answer with a number."},
                                          {"role": "user", "content": "How many moons has Mars?"}],
                             "reference_answer": "ref chat", "id": "chat", "sample_id": "chat"}
    assert by_id["object-ref"]["reference_answer"] == {"capital": "Paris", "population": 2.1}
    assert by_id["reserved"]["reference_answer"] == {"messages": "clash", "answer": "3"}  # no reserved keys inside
    assert out["checks"] == exports.BEDROCK_NOVA_CHECKS
    assert set(out["not_exported"]) == {"no_prompt", "non_text_prompt"}


def test_bedrock_nova_rules_accept_awss_own_training_files():
    """The schema the export is checked against accepts the RFT datasets AWS publishes
    ($ROLLOUTLAB_CORPUS: bedrock-rft, aws-samples/amazon-bedrock-samples)."""
    roots = [Path(p) / "bedrock-rft" for p in os.environ.get("ROLLOUTLAB_CORPUS", "").split(":") if p]
    files = sorted(f for root in roots if root.is_dir() for f in root.rglob("*.jsonl"))
    if not files:
        pytest.skip("no bedrock-rft/ in $ROLLOUTLAB_CORPUS (AWS's sample RFT datasets, kept out of the repo)")
    n = 0
    for path in files:
        for line in lines(path):
            jsonschema.validate(line, BEDROCK_LINE)
            n += 1
    assert n >= 1500  # 300 + validation + 1,200 lines


@pytest.mark.bedrock_minimum
def test_bedrock_nova_needs_its_minimum(built, tmp_path):
    con, _, _ = built
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"Bedrock reinforcement fine-tuning takes 100 to 20,000 training records; "
                                         r"this curation gives \d+ .*Curate more samples.*nothing was written"):
        rl.write_curated(con, "cand", tmp_path, to="bedrock-nova")
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
    big = rl.connect(tmp_path / "big.duckdb")
    rl.ingest(big, write_jsonl(tmp_path / "big.jsonl", [
        rollout("r", f"q{i:03d}", score, prompt=f"What is {i} plus {i + 1}?", reference=str(2 * i + 1))
        for i in range(130) for score in (1.0, 0.0)]))
    out = rl.write_curated(big, "r", tmp_path / "nova", to="bedrock-nova")
    assert out["exported"] == {"train": 117, "validation": 13}
    big.close()


def test_gemini_rl_lines_validate_with_google_genai(built, tmp_path):
    """Every line is a ``ReinforcementTuningExample`` of google-genai (requirements.txt), which
    forbids unknown keys and wants text references; the roles it leaves to the service (user /
    model) are checked here."""
    types = pytest.importorskip("google.genai.types", reason="google-genai (requirements.txt) validates the lines")
    con, _, _ = built
    out = rl.write_curated(con, "cand", tmp_path, to="gemini-rl")
    raw = (tmp_path / "train.jsonl").read_text().splitlines() + (tmp_path / "validation.jsonl").read_text().splitlines()
    by_id = {}
    for text in raw:
        example = types.ReinforcementTuningExample.model_validate_json(text)
        line = json.loads(text)
        assert example.model_dump(mode="json", by_alias=True, exclude_none=True) == line  # nothing dropped
        assert all(c.role in ("user", "model") for c in example.contents) and example.contents[-1].role == "user"
        assert exports.gemini_rl_problem(line) is None
        by_id[example.references["sample_id"]] = line
    assert by_id["chat"] == {"systemInstruction": {"role": "system", "parts": [{"text": "Answer with a number."}]},
                             "contents": [{"role": "user", "parts": [{"text": "How many moons has Mars?"}]}],
                             "references": {"reference_answer": "ref chat", "sample_id": "chat"}}
    # an object's fields are references of their own, numbers as their JSON text ({{references.population}})
    assert by_id["object-ref"]["references"] == {"capital": "Paris", "population": "2.1", "sample_id": "object-ref"}
    assert out["checks"] == exports.GEMINI_RL_CHECKS
    with pytest.raises(Exception):  # what the export avoids: an id at the top level is refused by the SDK
        types.ReinforcementTuningExample.model_validate({**by_id["chat"], "id": "chat"})


def test_gemini_rl_refuses_more_examples_than_tuning_takes(built, tmp_path, monkeypatch):
    con, _, _ = built
    monkeypatch.setattr(exports, "GEMINI_RL_MAX_TRAIN", 3)
    with pytest.raises(ValueError, match=r"at most 3 training and 500 validation examples; this curation gives \d+"):
        rl.write_curated(con, "cand", tmp_path, to="gemini-rl")
    assert list(tmp_path.iterdir()) == []


def test_verifiers_dataset_loads_as_an_environment_reads_it(built, tmp_path):
    con, _, _ = built
    rl.write_curated(con, "cand", tmp_path / "v", to="verifiers")
    ds = hf.load_dataset("json", data_files={s: str(tmp_path / "v" / f"{s}.jsonl") for s in ("train", "validation")},
                         cache_dir=str(tmp_path / "cache"))
    assert set(ds["train"].column_names) == {"prompt", "answer", "info"}
    rows = {json.loads(r["info"])["sample_id"]: r for s in ("train", "validation") for r in ds[s]}
    assert rows["plain"]["prompt"] == [{"role": "user", "content": PROMPTS["plain"]}]
    assert rows["plain"]["answer"] == "ref plain"
    assert json.loads(rows["object-ref"]["info"]) == {"sample_id": "object-ref",
                                                      "reference": {"capital": "Paris", "population": 2.1}}
    assert json.loads(rows["object-ref"]["answer"]) == {"capital": "Paris", "population": 2.1}


VERIFIERS_READ = """
import json, sys
import verifiers as vf
from datasets import Dataset
env = vf.SingleTurnEnv(dataset=Dataset.from_json(sys.argv[1]), rubric=vf.Rubric())
print(json.dumps([{k: r[k] for k in ("example_id", "prompt", "answer", "info")} for r in env.get_dataset()]))
"""


def test_verifiers_builds_an_environment_from_the_export(built, tmp_path):
    """Differential: verifiers 0.3.1 itself (a venv of its own) takes the file as an environment's
    dataset: every row, its prompt, answer and info as written, example ids added."""
    import subprocess

    from conftest import producer_python

    python = producer_python("verifiers")
    con, _, _ = built
    rl.write_curated(con, "cand", tmp_path / "v", to="verifiers")
    mine = lines(tmp_path / "v" / "train.jsonl")
    done = subprocess.run([str(python), "-c", VERIFIERS_READ, str(tmp_path / "v" / "train.jsonl")],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    assert [r["example_id"] for r in theirs] == list(range(len(mine)))
    assert [{k: r[k] for k in ("prompt", "answer", "info")} for r in theirs] == mine

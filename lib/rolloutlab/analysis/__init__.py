"""Analysis, what the numbers say: metrics, compare and its statistics, power, readiness, the audit, curation,
labels and calibration, failure modes, trajectory diffs. May import store, text, config and capture's redaction only."""

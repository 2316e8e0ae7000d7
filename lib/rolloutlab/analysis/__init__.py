"""Analysis: what the numbers say — metrics, compare and its statistics, power, readiness, the audit,
curation, labels and calibration, failure modes and trajectory diffs. May import store, ingest's identity, text and config; never views, exports, capture's middleware or cli."""

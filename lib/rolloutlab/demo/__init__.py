"""The demo's synthetic data (``synth``): rollouts, endpoint logs and job events for `rolloutlab demo`, the tests
and the benchmarks. Its writers import only config; its loaders may use ingest, store and analysis, lazily."""

"""Metrics over the canonical tables: SQL builders (``*_sql``) beside the functions that run them."""
from .capacity import capacity, capacity_change, in_flight, projection_error
from .costs import (PriceWarning, cost, cost_per_sample_frame, frontier, job_cost, job_usage, price_table, rollout_costs,
                   tokens, truncation, truncation_check)
from .common import UnknownRunError, resolve_runs, training_runs
from .graders import grader_pairs, grader_stats
from .latency import latency, latency_ecdf
from .scores import rollout_table, sample_stats, signal_plan, summary
from .tools import tool_pairs, tool_stats
from .training import training_jobs, training_metrics

__all__ = ["summary", "sample_stats", "signal_plan", "tool_stats", "tool_pairs", "latency", "latency_ecdf",
           "rollout_table", "grader_stats", "grader_pairs", "training_metrics", "training_jobs",
           "capacity", "capacity_change", "in_flight", "projection_error", "resolve_runs", "training_runs", "UnknownRunError",
           "tokens", "cost", "rollout_costs", "cost_per_sample_frame", "frontier", "job_cost", "job_usage",
           "truncation", "truncation_check", "price_table", "PriceWarning"]

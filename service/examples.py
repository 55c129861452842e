"""Example bodies of the HTTP API, as the OpenAPI schema shows them (one per body).

Times are Unix seconds of November 2023; every request example is accepted by a
service whose clock reads later than its times.  No example holds a null: the
published document leaves null values out.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BATCH_OUT",
    "CLICKS_IN",
    "CRAWL_RESULTS_IN",
    "HEALTH_OUT",
    "HOSTS_OUT",
    "HOST_CHANGE_IN",
    "HOST_DELETED_OUT",
    "HOST_OUT",
    "PURGE_OUT",
    "METRICS_TEXT",
    "NEXT_OUT",
    "REGISTER_OUT",
    "REMOVE_OUT",
    "SIGNALS_IN",
    "URLS_IN",
    "URLS_REMOVE_IN",
    "URL_EXPLANATION",
]

_URL = "https://shop.example/p/1"
_T = 1_700_000_000.0

URLS_IN: dict[str, Any] = {
    "urls": [
        {"url": _URL, "weight": 0.0005, "change_rate": 1.2e-5, "label": "product"},
        {"url": "https://bücher.example/neu", "crawl_delay_s": 2.0},
    ]
}
URLS_REMOVE_IN: dict[str, Any] = {"urls": ["https://shop.example/p/2"]}
SIGNALS_IN: dict[str, Any] = {"signals": [{"url": _URL, "time": _T, "source": "sitemap"}]}
CLICKS_IN: dict[str, Any] = {"clicks": [{"url": _URL, "time": _T}]}
CRAWL_RESULTS_IN: dict[str, Any] = {
    "results": [
        {
            "url": _URL,
            "lease_id": "9f1c2e0b7a5d4c3e8b6a1f0e2d3c4b5a",
            "fetched_at": _T,
            "status": 200,
            "changed": True,
        },
        {
            "url": "https://shop.example/p/2",
            "lease_id": "3a4b5c6d7e8f90a1b2c3d4e5f6a7b8c9",
            "fetched_at": _T,
            "status": 429,
            "retry_after_s": 3600,
        },
    ]
}
METRICS_TEXT = """\
# HELP crawlsched_lambda0 Global Lagrange multiplier λ₀ (crawl value per crawl)
# TYPE crawlsched_lambda0 gauge
crawlsched_lambda0 0.0123
"""

REGISTER_OUT: dict[str, Any] = {"created": 2, "updated": 0}
REMOVE_OUT: dict[str, Any] = {"removed": 1}
BATCH_OUT: dict[str, Any] = {"accepted": 1, "ignored": [{"index": 1, "status": "unknown_url"}]}
NEXT_OUT: dict[str, Any] = {
    "now": 1699998200.0,
    "leases": [
        {
            "url": _URL,
            "host": "shop.example",
            "lease_id": "9f1c2e0b7a5d4c3e8b6a1f0e2d3c4b5a",
            "deadline": 1699998800.0,
            "crawl_value": 41.67,
            "threshold": 0.0,
            "due_at": 1699996400.0,
        }
    ],
}
_ESTIMATE = {"estimate": 0.000394, "prior_mean": 0.0005, "prior_shape": 2.0, "observations": 1.0}
URL_EXPLANATION: dict[str, Any] = {
    "url": _URL,
    "host": "shop.example",
    "weight": 0.000394,
    "change_rate": 1.43e-05,
    "recall": 0.484,
    "false_signal_rate": 9.04e-07,
    "signal_rate": 7.81e-06,
    "precision": 0.884,
    "unsignalled_change_rate": 7.35e-06,
    "signal_time_equivalent_s": 293304.0,
    "now": 1700000005.0,
    "registered_at": 1699996400.0,
    "last_crawl_at": 1700000000.0,
    "elapsed_s": 5.0,
    "signals_since_crawl": 0,
    "effective_elapsed_s": 5.0,
    "crawl_value": 3.63e-08,
    "max_value": 27.68,
    "threshold": 41.67,
    "lambda0": 41.67,
    "lambda_h": 0.0,
    "scored_threshold": 41.67,
    "threshold_s": 2592000.0,
    "due_at": 1702592000.0,
    "due_in_s": 2591995.0,
    "freshness_probability": 0.99996,
    "lease_id": "9f1c2e0b7a5d4c3e8b6a1f0e2d3c4b5a",
    "lease_deadline": 1700000600.0,
    "host_gate_at": 1699998201.0,
    "clicks": 1,
    "signals": 1,
    "crawls": 1,
    "changes": 1,
    "fetch_errors": 0,
    "learning": {
        "fixed": False,
        "label": "product",
        "weight": _ESTIMATE,
        "signal_rate": {**_ESTIMATE, "estimate": 7.81e-06, "prior_mean": 5.26e-06},
        "unsignalled_change_rate": {
            "estimate": 7.35e-06,
            "prior_mean": 1.47e-05,
            "prior_shape": 2.0,
            "observations": 0.0,
        },  # fmt: skip
        "signal_quality": {
            "estimate": 2.156,
            "prior_mean": 4.313,
            "prior_shape": 2.0,
            "observations": 0.0,
        },  # fmt: skip
    },
    "due_reason": "leased",
    "readable": {
        "now": "2023-11-14T22:13:25Z",
        "registered_at": "2023-11-14T21:13:20Z",
        "last_crawl_at": "2023-11-14T22:13:20Z",
        "due_at": "2023-12-14T22:13:20Z",
        "due": "in 30 d",
        "lease_deadline": "2023-11-14T22:23:20Z",
        "host_gate_at": "2023-11-14T21:43:21Z",
        "elapsed": "5 s",
        "effective_elapsed": "5 s",
        "threshold_interval": "30 d",
        "signal_time_equivalent": "3 d 9 h",
        "max_revisit": "30 d",
        "retry_delay": "1 h",
        "requests_per_day": 34.04,
        "changes_per_day": 1.236,
        "signals_per_day": 0.6748,
        "false_signals_per_day": 0.0781,
        "unsignalled_changes_per_day": 0.635,
        "mean_time_between_changes": "19 h 25 min",
        "freshness_probability": "100.0%",
    },
    "decision": "leased until 2023-11-14T22:23:20Z: a worker is fetching it",
}
HOST_OUT: dict[str, Any] = {
    "host": "shop.example",
    "crawl_delay_s": 1.0,
    "gate_at": 1699998201.0,
    "urls": 1,
    "queued": 1,
    "due": 0,
    "next_due_at": 1702592000.0,
    "lambda_h": 0.0,
    "threshold": 41.67,
    "scored_threshold": 41.67,
    "signal_precision": 0.884,
    "signal_outcomes": 3.0,
    "source_precision": 0.71,
    "source_recall": 0.83,
    "max_in_flight": 1,
    "in_flight": 0,
    "paused": False,
    "blocked": True,
    "blocked_until": 1700003600.0,
    "block_reason": "back_off",
    "consecutive_failures": 1,
    "retired": 0,
    "rate_limit_per_s": 1.0,
    "why": "blocked until 2023-11-14T23:13:20Z (back-off after 1 failure in a row)",
}
HOST_CHANGE_IN: dict[str, Any] = {"crawl_delay_s": 5.0, "max_in_flight": 2, "paused": False}
HOSTS_OUT: dict[str, Any] = {"hosts": [HOST_OUT], "cursor": "100"}
HOST_DELETED_OUT: dict[str, Any] = {"host": "shop.example", "removed": 1}
PURGE_OUT: dict[str, Any] = {"removed": 12}
HEALTH_OUT: dict[str, Any] = {
    "status": "ok", "now": 1700000005.0, "clock_rate": 1.0, "store": "memory",
}  # fmt: skip

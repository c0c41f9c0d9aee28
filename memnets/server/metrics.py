"""The server's Prometheus metrics (prometheus-client), one registry per app.

``/metrics`` serves them in Prometheus' text format. Each server process counts its own requests:
with ``--workers N`` a scrape reaches one worker, so scrape each worker's port or sum over them.
"""

from __future__ import annotations

import gc

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ServerMetrics:
    """Requests, latencies, errors, recall-gate decisions, encoder batch sizes, busy time and window waits
    of one server, and the objects its garbage collector no longer scans
    (:func:`memnets.server.state.freeze_loaded_objects`)."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "memnets_requests", "HTTP requests served", ("method", "route", "status"), registry=self.registry
        )
        self.latency = Histogram(
            "memnets_request_seconds",
            "time to answer a request",
            ("method", "route"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter("memnets_errors", "error responses by error code", ("code",), registry=self.registry)
        self.gate = Counter(
            "memnets_gate_decisions", "recall-gate decisions of the managers", ("recall",), registry=self.registry
        )
        self.batch = Histogram(
            "memnets_encode_batch_size", "texts per encoder forward pass", buckets=BATCH_BUCKETS, registry=self.registry
        )
        self.window_waits = Counter(
            "memnets_encode_window_waits",
            "forward passes that waited --max-wait for more texts (their first found the encoder idle)",
            registry=self.registry,
        )
        self.encode_seconds = Counter(
            "memnets_encode_seconds",
            "seconds the encoder spent in forward passes, summed over passes (with batching: its busy share)",
            registry=self.registry,
        )
        self.frozen = Gauge(
            "memnets_gc_frozen_objects",
            "objects moved out of the garbage collector's scans once the memory opened (gc.freeze)",
            registry=self.registry,
        )
        self.frozen.set_function(gc.get_freeze_count)

    def encoded(self, size: int, waited: bool, seconds: float) -> None:
        """One forward pass of ``size`` texts that took ``seconds`` (the batching encoder's ``on_batch``)."""
        self.batch.observe(size)
        self.encode_seconds.inc(seconds)
        if waited:
            self.window_waits.inc()

    def render(self) -> bytes:
        """The current values in Prometheus' text exposition format."""
        return generate_latest(self.registry)

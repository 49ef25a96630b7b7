"""Observing runs: JSONL traces (:mod:`.jsonl`), OpenTelemetry spans (:mod:`.otel`, extra
``otel``), and reading traces back (:mod:`.reader`). Each is an event subscriber or reads what
one wrote; the loop knows none of them."""

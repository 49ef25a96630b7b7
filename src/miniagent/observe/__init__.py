"""Observing runs: OpenTelemetry spans (:mod:`.otel`, extra ``otel``), metrics
(:mod:`.metrics`), and reading JSONL traces back (:mod:`.reader`). Each is an event subscriber
or reads what one wrote; the loop knows none of them. The JSONL trace writer itself is the
core's (:mod:`miniagent.core.trace`)."""

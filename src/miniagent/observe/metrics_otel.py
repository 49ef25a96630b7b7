"""The OpenTelemetry backend of :class:`~miniagent.observe.metrics.Metrics` (extra ``otel``).

Each :data:`~miniagent.observe.figures.FIGURES` entry becomes an instrument of a meter named
``miniagent`` under its OpenTelemetry name and unit: a counter, a histogram whose bucket
boundaries are given as advice (the GenAI conventions' for the two ``gen_ai.client.*``
histograms), a gauge, or an observable gauge / up-down counter read from a callback when the
meter provider collects. Attributes whose value is None are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from miniagent._internal.version import installed_version
from miniagent.core.errors import ConfigError
from miniagent.observe.figures import FIGURES, Figure

__all__ = ["OtelSink"]

_MISSING = "OpenTelemetry is not installed: pip install 'miniagent[otel]'"


class OtelSink:
    """Records figures with the instruments of ``meter_provider``'s ``miniagent`` meter.

    Raises:
        ConfigError: the OpenTelemetry API is not installed.
    """

    def __init__(self, meter_provider: Any) -> None:
        try:
            from opentelemetry.metrics import Observation
        except ImportError:
            raise ConfigError(_MISSING) from None
        self._observation = Observation
        self.meter = meter_provider.get_meter("miniagent", installed_version())
        self._instruments: dict[str, tuple[Figure, Any]] = {
            key: (figure, self._build(figure)) for key, figure in FIGURES.items()
            if not figure.kind.startswith("observed_")}
        self._present: dict[tuple[str, tuple[Any, ...]], dict[str, Any]] = {}

    def _build(self, figure: Figure) -> Any:
        meter, name = self.meter, figure.otel
        options = {"unit": figure.unit, "description": figure.description}
        if figure.kind == "counter":
            return meter.create_counter(name, **options)
        if figure.kind == "histogram":
            return meter.create_histogram(
                name, explicit_bucket_boundaries_advisory=[float(b) for b in figure.buckets],
                **options)
        return meter.create_gauge(name, **options)

    def put(self, key: str, value: float, attributes: Mapping[str, Any]) -> None:
        """Add to a counter, record in a histogram or set a gauge."""
        figure, instrument = self._instruments[key]
        values = tuple([attributes.get(name) for name, _ in figure.attributes])
        present = self._present.get((key, values))
        if present is None:  # built once per label values: they are few
            present = self._present[(key, values)] = {
                name: value for (name, _), value in zip(figure.attributes, values, strict=True)
                if value is not None}
        if figure.kind == "counter":
            instrument.add(value, present)
        elif figure.kind == "histogram":
            instrument.record(value, present)
        else:
            instrument.set(value, present)

    def observe(self, key: str, read: Callable[[], float]) -> None:
        """Create the ``observed_*`` instrument of ``key``, read from ``read`` at collection."""
        figure = FIGURES[key]

        def callback(_options: Any) -> Iterable[Any]:
            return [self._observation(read())]

        create = (self.meter.create_observable_up_down_counter
                  if figure.kind == "observed_count" else self.meter.create_observable_gauge)
        create(figure.otel, callbacks=[callback], unit=figure.unit,
               description=figure.description)

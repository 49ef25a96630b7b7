"""The Prometheus backend of :class:`~miniagent.observe.metrics.Metrics` (extra ``metrics``).

Each :data:`~miniagent.observe.figures.FIGURES` entry becomes a prometheus-client counter,
histogram or gauge under its Prometheus name and labels, in a registry of its own unless one is
given; values arrive keyed by OpenTelemetry attribute names and are recorded under the labels
those map to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from miniagent.errors import ConfigError
from miniagent.observe.figures import FIGURES, Figure

__all__ = ["MISSING", "PrometheusSink", "new_registry"]

MISSING = "prometheus-client is not installed: pip install 'miniagent[metrics]'"


class PrometheusSink:
    """Records figures in a ``prometheus_client.CollectorRegistry``.

    Args:
        registry: Where to register; a new registry when None.

    Raises:
        ConfigError: prometheus-client is not installed.
    """

    def __init__(self, registry: Any = None) -> None:
        try:
            import prometheus_client as prom
        except ImportError:
            raise ConfigError(MISSING) from None
        self._prom = prom
        self.registry = prom.CollectorRegistry() if registry is None else registry
        self._metrics: dict[str, tuple[Figure, Any]] = {
            key: (figure, self._build(figure)) for key, figure in FIGURES.items()}

    def _build(self, figure: Figure) -> Any:
        prom, options = self._prom, {"registry": self.registry}
        if figure.kind == "counter":
            return prom.Counter(figure.prometheus, figure.description, figure.labels, **options)
        if figure.kind == "histogram":
            return prom.Histogram(figure.prometheus, figure.description, figure.labels,
                                  unit=figure.prometheus_unit, buckets=figure.buckets, **options)
        return prom.Gauge(figure.prometheus, figure.description, figure.labels, **options)

    def put(self, key: str, value: float, attributes: Mapping[str, Any]) -> None:
        """Add to a counter, record in a histogram or set a gauge."""
        figure, metric = self._metrics[key]
        if figure.attributes:
            metric = metric.labels(*[_label(attributes.get(name))
                                     for name, label in figure.attributes if label is not None])
        if figure.kind == "counter":
            metric.inc(value)
        elif figure.kind == "histogram":
            metric.observe(value)
        else:
            metric.set(value)

    def observe(self, key: str, read: Callable[[], float]) -> None:
        """Read an ``observed_*`` figure from ``read`` whenever the registry is collected."""
        self._metrics[key][1].set_function(read)


def _label(value: Any) -> str:
    return "" if value is None else str(value)


def new_registry() -> Any:
    """A new, empty ``prometheus_client.CollectorRegistry``.

    Raises:
        ConfigError: prometheus-client is not installed.
    """
    try:
        import prometheus_client as prom
    except ImportError:
        raise ConfigError(MISSING) from None
    return prom.CollectorRegistry()

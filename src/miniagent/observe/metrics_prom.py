"""The Prometheus backend of :class:`~miniagent.observe.metrics.Metrics` (extra ``metrics``).

Each :data:`~miniagent.observe.figures.FIGURES` entry becomes a prometheus-client counter,
histogram or gauge under its Prometheus name and labels, in a registry of its own unless one is
given; values arrive keyed by OpenTelemetry attribute names and are recorded under the labels
those map to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from miniagent.core.errors import ConfigError
from miniagent.observe.figures import FIGURES, Figure

__all__ = ["MISSING", "PrometheusSink", "new_registry"]

MISSING = "prometheus-client is not installed: pip install 'miniagent[metrics]'"


_METHODS = {"counter": "inc", "histogram": "observe"}  # else "set"


class _Metric:
    """A prometheus-client metric, how it records, and its children by label values."""

    __slots__ = ("children", "method", "metric", "names", "record")

    def __init__(self, figure: Figure, metric: Any) -> None:
        self.metric, self.method = metric, _METHODS.get(figure.kind, "set")
        self.names = [name for name, label in figure.attributes if label is not None]
        self.children: dict[tuple[Any, ...], Callable[[float], None]] = {}
        self.record: Callable[[float], None] = (
            _unused if self.names or figure.kind.startswith("observed_")
            else getattr(metric, self.method))


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
        self._metrics: dict[str, _Metric] = {
            key: _Metric(figure, self._build(figure)) for key, figure in FIGURES.items()}

    def _build(self, figure: Figure) -> Any:
        prom, options = self._prom, {"registry": self.registry}
        if figure.kind == "counter":
            return prom.Counter(figure.prometheus, figure.description, figure.labels, **options)
        if figure.kind == "histogram":
            return prom.Histogram(figure.prometheus, figure.description, figure.labels,
                                  unit=figure.prometheus_unit, buckets=figure.buckets, **options)
        return prom.Gauge(figure.prometheus, figure.description, figure.labels,
                          unit=figure.prometheus_unit, **options)

    def put(self, key: str, value: float, attributes: Mapping[str, Any]) -> None:
        """Add to a counter, record in a histogram or set a gauge."""
        metric = self._metrics[key]
        if metric.names:  # a child per label values, found once (labels() is the slow part)
            values = tuple([attributes.get(name) for name in metric.names])
            record = metric.children.get(values)
            if record is None:
                child = metric.metric.labels(*[_label(v) for v in values])
                record = metric.children[values] = getattr(child, metric.method)
        else:
            record = metric.record
        record(value)

    def observe(self, key: str, read: Callable[[], float]) -> None:
        """Read an ``observed_*`` figure from ``read`` whenever the registry is collected."""
        self._metrics[key].metric.set_function(read)


def _unused(value: float) -> None:
    """The recorder of a metric with labels (its children record) or a callback (it reads)."""


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

"""The /metrics endpoint over real sockets: only GET /metrics, only to Host names that no DNS
rebinding gives, and half-sent requests closed while a scrape is still served."""

from __future__ import annotations

import http.client
from collections.abc import Iterator

import pytest

pytest.importorskip("prometheus_client")

from miniagent import ScriptedModel
from miniagent.core.models.describe import describe_model
from miniagent.observe import metrics_http
from miniagent.observe.metrics import Metrics
from miniagent.observe.metrics_http import MetricsServer
from miniagent.testing.slow_clients import closed_by_server, stalled_requests

WAIT = 60.0
"""Seconds a half-sent request may stay open at most in these tests (a bound, not a measure:
the server's own limit is set to 2 s here)."""


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[MetricsServer]:
    monkeypatch.setattr(metrics_http, "REQUEST_SECONDS", 2.0)
    metrics = Metrics(model=describe_model(ScriptedModel([])))
    with metrics.serve("127.0.0.1:0", hosts=["prometheus-target.internal"]) as served:
        yield served


def ask(server: MetricsServer, method: str = "GET", path: str = "/metrics",
        host: str | None = None) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.putrequest(method, path, skip_host=True)
        connection.putheader("Host", host if host is not None else f"127.0.0.1:{server.port}")
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_only_get_of_metrics_is_answered(server: MetricsServer) -> None:
    status, text = ask(server)
    assert status == 200 and "miniagent_runs_total" in text
    assert ask(server, path="/metrics?name[]=x")[0] == 200
    assert ask(server, "HEAD")[0] == 200
    for path in ("/", "/metrics/", "/api/v1/query", "/../metrics"):
        status, text = ask(server, path=path)
        assert status == 404 and "miniagent" not in text, path
    for method in ("POST", "PUT", "DELETE"):
        assert ask(server, method)[0] == 405


@pytest.mark.parametrize("host", ["localhost:9464", "127.0.0.1", "[::1]:9464", "10.1.2.3:80",
                                  "prometheus-target.internal:9464"])
def test_addresses_localhost_and_given_names_may_be_named(server: MetricsServer,
                                                          host: str) -> None:
    assert ask(server, host=host)[0] == 200


@pytest.mark.parametrize("host", ["attacker.example:9464", "rebind.attacker.example",
                                  "localhost.attacker.example", "127.0.0.1.nip.io:9464"])
def test_another_host_name_reads_nothing(server: MetricsServer, host: str) -> None:
    status, text = ask(server, host=host)
    assert status == 421 and "miniagent" not in text


def test_half_sent_requests_are_closed_and_a_scrape_is_served_meanwhile(
        server: MetricsServer) -> None:
    with stalled_requests(server.port, 50, path="/metrics", wait=WAIT) as stalled:
        status, text = ask(server)  # while the 50 are open
        assert status == 200 and "miniagent_runs_total" in text
        assert all(closed_by_server(sock) for sock in stalled)
    assert ask(server)[0] == 200


def test_connections_over_the_limit_are_closed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_http, "MAX_CONNECTIONS", 5)
    monkeypatch.setattr(metrics_http, "REQUEST_SECONDS", 30.0)  # the 5 stay open meanwhile
    metrics = Metrics(model=describe_model(ScriptedModel([])))
    with metrics.serve("127.0.0.1:0") as server, stalled_requests(server.port, 5), \
            stalled_requests(server.port, 1) as [extra]:
        extra.settimeout(20)  # well before the others' 30 s are up
        assert closed_by_server(extra)

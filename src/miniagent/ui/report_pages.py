"""The inbox's report pages: a session's trace report and the eval reports under
``--evals`` (:mod:`miniagent.ui.evals`), each rendered by its module in
:mod:`miniagent.report` (the code that writes the report files), under that report's own
Content-Security-Policy (its ``POLICY``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from miniagent.report import evals as eval_report
from miniagent.report import trace as trace_report
from miniagent.report.session import session_report
from miniagent.ui import views
from miniagent.ui.evals import EvalRun, find, listed, report_html, trace_html


@dataclass(frozen=True, kw_only=True)
class ReportPages:
    """The routes of the report pages.

    Args:
        ctx: What every page needs, of a request (the inbox's).
        trace: The JSONL trace file of the sessions' runs, if any.
        evals: The folder of eval output folders, if any.
    """

    ctx: Callable[[Request], views.Ctx]
    trace: Path | None
    evals: Path | None

    async def session_report(self, request: Request) -> Response:
        """The trace report of a session's runs in the trace file."""
        sid = request.path_params["sid"]
        back = (self.ctx(request).url(views.path_of(sid)), "← Back to the session")
        html = (await run_in_threadpool(partial(session_report, back=back), self.trace, sid)
                if self.trace is not None else None)
        if html is None:
            return HTMLResponse(views.message_page(
                self.ctx(request), "No trace report",
                f"The trace file holds no run of session {sid}."), status_code=404)
        return report_page(html, trace_report.POLICY)

    async def evals_page(self, request: Request) -> Response:
        ctx = self.ctx(request)
        if self.evals is None:
            return HTMLResponse(views.message_page(
                ctx, "No eval reports", "This server shows no eval reports: start it with "
                "miniagent ui --evals DIR."), status_code=404)
        return HTMLResponse(views.evals_page(ctx, listed(self.evals)))

    async def eval_report(self, request: Request) -> Response:
        run = self._eval_run(request)
        if isinstance(run, Response):
            return run
        ctx = self.ctx(request)
        # files read and pages built off the event loop: other pages stay served meanwhile
        html = await run_in_threadpool(
            report_html, run, lambda key: ctx.url("/evals/trace", run=run.name, key=key))
        return report_page(html, eval_report.POLICY)

    async def eval_trace(self, request: Request) -> Response:
        run = self._eval_run(request)
        if isinstance(run, Response):
            return run
        key = request.query_params.get("key", "")
        back = (self.ctx(request).url("/evals/report", run=run.name), "← Back to the eval report")
        html = await run_in_threadpool(partial(trace_html, back=back), run, key)
        if html is None:
            return HTMLResponse(views.message_page(
                self.ctx(request), "No trace", f"The report {run.name} has no trace for {key}."),
                status_code=404)
        return report_page(html, trace_report.POLICY)

    def _eval_run(self, request: Request) -> EvalRun | Response:
        """The listed eval folder the request names (``run``), or the page saying there is
        none."""
        name = request.query_params.get("run", "")
        run = find(self.evals, name) if self.evals is not None else None
        if run is None:
            return HTMLResponse(views.message_page(
                self.ctx(request), "No such eval report",
                f"There is no eval report {name!r} here."), status_code=404)
        return run


def report_page(html: str, policy: str) -> Response:
    """A report rendered by the report's code, under its own policy (its script by hash),
    never framed."""
    return HTMLResponse(html, headers={"Content-Security-Policy":
                                       policy + "; frame-ancestors 'none'"})

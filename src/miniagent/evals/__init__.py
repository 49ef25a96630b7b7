"""The evaluation harness: task sets, checkers, metrics, fault injection, reports.

Every task runs through the normal :class:`~miniagent.Agent` (the one loop); this package
only prepares the tools and model for a run, scores what came back and summarises::

    from miniagent.evals import EvalConfig, load_tasks, run_eval

    tasks = load_tasks("tasks.jsonl")
    report = run_eval(tasks, config, model_for=..., tools=...)   # see runner.py
    report["accuracy"], report["by_category"]

The command line is ``miniagent eval`` (:mod:`miniagent.cli.eval_cmd`).
"""

from miniagent.evals.checks import check_answer
from miniagent.evals.metrics import summarize
from miniagent.evals.runner import EvalConfig, run_eval
from miniagent.evals.tasks import EvalTask, Expected, load_tasks

__all__ = ["EvalConfig", "EvalTask", "Expected", "check_answer", "load_tasks", "run_eval",
           "summarize"]

"""The shipped alert rules: valid for promtool, unit-tested by it, over metrics that exist."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from miniagent.observe.metrics import ALERT_RULES

TESTS = Path(__file__).with_name("alerts_test.yml")
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is missing: Debian's prometheus package has it "
    "(bash scripts/deps/prometheus.sh; CI installs it)")


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    done = subprocess.run([str(PROMTOOL), "check", "rules", str(ALERT_RULES)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 5 rules found" in done.stdout


@needs_promtool
def test_promtool_unit_tests_pass() -> None:
    done = subprocess.run([str(PROMTOOL), "test", "rules", str(TESTS)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_rule_names_a_metric_miniagent_serves() -> None:
    pytest.importorskip("prometheus_client")
    from miniagent import ScriptedModel
    from miniagent.core.models.describe import describe_model
    from miniagent.observe.metrics import Metrics

    registry = Metrics(model=describe_model(ScriptedModel([]))).registry
    served = {f"{family.name}{suffix}" for family in registry.collect()
              for suffix in ("", "_total", "_count", "_sum", "_bucket")}
    named = set(re.findall(r"\b(?:miniagent|gen_ai)_[a-z_]+", ALERT_RULES.read_text()))
    assert named and named <= served, named - served

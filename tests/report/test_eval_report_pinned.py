"""``eval --html`` writes the same bytes as before its rendering was split from its writing:
the report page and every trace page beside it are pinned (the folder's path replaced)."""

from __future__ import annotations

import json
from pathlib import Path

from test_eval_report_links import failed_run, write_trace

from miniagent.evals.metrics import summarize
from miniagent.report.evals import write_html

PINNED = Path(__file__).parent / "data" / "report_pinned"
HOSTILE = "</script><img src=x onerror=alert(1)>支付"


def written(tmp_path: Path) -> dict[str, str]:
    out = tmp_path / "o"
    write_trace(out / "traces" / "good.jsonl")
    (out / "traces" / "damaged.jsonl").write_text("not a trace\n", encoding="utf-8")
    runs = [failed_run("good", "traces/good.jsonl"),
            failed_run("damaged", "traces/damaged.jsonl"),
            failed_run("missing", "traces/missing.jsonl"),
            failed_run("outside", "../elsewhere.jsonl"), failed_run("none", None)]
    runs[0]["final_answer"] = HOSTILE
    report = json.loads(json.dumps(summarize(runs)))  # as report.json holds it
    write_html(report, out / "report.html", traces_root=out)
    return {path.relative_to(out).as_posix(): path.read_text(encoding="utf-8").replace(
        str(tmp_path), "TMP") for path in sorted(out.rglob("*.html"))}


def test_the_written_files_are_byte_for_byte_as_before(tmp_path: Path) -> None:
    files = written(tmp_path)
    pinned = {path.relative_to(PINNED).as_posix(): path.read_text(encoding="utf-8")
              for path in sorted(PINNED.rglob("*.html"))}
    assert sorted(files) == sorted(pinned)
    for name, text in files.items():
        assert text == pinned[name], name

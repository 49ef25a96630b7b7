"""miniagent's HTML reports, one module per report, each a self-contained page.

- :mod:`.html`: what every report is built from: escaping, the page shell and its
  Content-Security-Policy, tables, expandable blocks, the SVG bar chart.
- :mod:`.trace`: a JSONL trace (``miniagent trace html``), steps expandable to the exact prompt.
- :mod:`.session`: one session's runs in a trace file, followed as it grows (the inbox's
  trace page).
- :mod:`.evals`: an eval report (``miniagent eval --html``) with its failed runs' trace pages.

Each report module gives its page's policy (``POLICY``), which the inbox sends as a header
when it serves the page (:mod:`miniagent.ui.report_pages`).
"""

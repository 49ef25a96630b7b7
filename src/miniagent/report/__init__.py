"""HTML reports: :mod:`.html` holds the shared shell, escaping and charts; :mod:`.trace_html`
renders a JSONL trace."""

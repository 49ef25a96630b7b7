"""The run's trace file, part of the core because ``Agent(trace=...)`` writes it: each event as
one JSON line (:mod:`.jsonl`, each record made by :mod:`.records`, long texts cut by
:mod:`.cut`), with credentials kept out (:mod:`.redact`, which long-term memory and the CLI use
too). Reading traces back and other exports are extensions (:mod:`miniagent.observe`)."""

"""The run and its steps, the same on every driver.

:mod:`.run` is what a driver calls: the agent's spec made into rules, and the run shell (start,
deadline, statuses, the last checkpoint, the result); :mod:`.loop` the step logic, the only
place a step is decided; :mod:`.effects` what a driver implements; :mod:`.guards` the bounds
and what enters a session; :mod:`.calls` call records, approvals (and a person's edits) and
sub-runs; :mod:`.inprocess` the in-process driver. Around them: compression, tool selection,
recall, typed events, a run's events as a stream (:mod:`.stream`) and forks (:mod:`.fork`).
"""

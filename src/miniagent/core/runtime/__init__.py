"""The run and its steps, the same on every driver.

:mod:`.run` is the run shell (start, deadline, statuses, the last checkpoint, the result);
:mod:`.loop` the step logic, the only place a step is decided; :mod:`.effects` what a driver
implements; :mod:`.spec` the agent's description and the rules built from it; :mod:`.inprocess`
the in-process driver's effects. Around them: guards, approvals, call outcomes, compression,
tool selection, sub-runs, typed events and their delivery.
"""

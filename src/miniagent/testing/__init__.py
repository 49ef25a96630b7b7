"""For tests and benchmarks: a real OpenAI-compatible HTTP server that answers from a script
(:mod:`.stub_server`), a fault-injecting proxy for the model transport (:mod:`.fault_proxy`),
and half-sent requests for a server's time limits (:mod:`.slow_clients`).
"""

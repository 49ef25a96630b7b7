"""For tests and benchmarks: a real OpenAI-compatible HTTP server that answers from a script
(:mod:`.stub_server`) and a fault-injecting proxy for the model transport (:mod:`.fault_proxy`).
"""

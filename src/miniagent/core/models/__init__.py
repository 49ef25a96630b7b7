"""Model transports: ``generate(request) -> response`` and a capabilities profile. An
OpenAI-compatible HTTP client (:mod:`.openai_compat`, over :mod:`.http`), streaming
(:mod:`.sse`, :mod:`.streaming`), the embedded llama.cpp model (:mod:`.local`) and a scripted
model for tests (:mod:`.scripted`)."""

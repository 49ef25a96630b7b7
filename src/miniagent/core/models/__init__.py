"""Model transports: ``generate(request) -> response`` and a capabilities profile. An
OpenAI-compatible HTTP client (:mod:`.openai_compat`, over :mod:`.http`), streaming
(:mod:`.sse`, :mod:`.streaming`), the embedded llama.cpp model (:mod:`.local`), a scripted
model for tests (:mod:`.scripted`) and several models in order of preference
(:mod:`.fallback`)."""

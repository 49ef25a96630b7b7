"""Model transports: ``generate(request) -> response`` and a capabilities profile. An
OpenAI-compatible HTTP client (:mod:`.openai_compat`, over :mod:`.http`), the OpenAI reply
format every model reads (:mod:`.openai_wire`), streaming
(:mod:`.sse`, :mod:`.streaming`), the embedded llama.cpp model (:mod:`.local`), a scripted
model for tests (:mod:`.scripted`) and several models in order of preference
(:mod:`.fallback`)."""

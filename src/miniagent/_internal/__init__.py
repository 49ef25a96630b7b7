"""Internal helpers shared by the core and the extensions: ids, text, files, waits and
throttles, threads, defaults and bounds, and bounded JSON reading (:mod:`.jsonscan`,
:mod:`.lenient`). Not public API: names here may change freely."""

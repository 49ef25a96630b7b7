"""Context compression: tokens sent over a scripted run with and without it, and what a
compaction costs a llama.cpp prefix cache.

Prints:
  (a) tokens sent over a 30-step scripted ReAct run (29 tool calls with search-result-sized
      observations, then a final answer), without compression and with
      ``compress_at`` / ``keep_last``; counted with SmolLM2's tokenizer when llama.cpp and the
      model are installed (the estimate miniagent uses is printed beside it), as a ratio;
  (b) with llama.cpp (the embedded SmolLM2 model, in process, one thread): both runs' prompts
      replayed in order (the compressed run first) with ``max_tokens=1``, so the KV cache of
      the common prefix is reused as a server would (prompt-evaluation time and evaluated
      tokens, from llama.cpp's own counters), then the prompts of each compaction step and the
      two steps after it again from
      a cold cache: warm against cold is what the append-only history buys back after a
      compaction, and the compaction step itself shows what one compaction costs.

A script, not a test: it prints figures and asserts nothing.

Usage: python benchmarks/compression.py [--steps 30] [--observation-chars 400]
           [--compress-at 2000] [--keep-last 4] [--no-llama] [--model-path FILE.gguf]
           [--steps-after 2] [--compactions N] [--repeats 2] [--skip-plain-replay]
           [--pairs-only]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

from miniagent import Agent, Compression, Limits, ScriptedModel, tool
from miniagent.core.runtime.compress import estimate
from miniagent.core.session import AgentSession
from miniagent.core.types import ModelRequest

_WORDS = ("river", "delta", "harbour", "granite", "census", "tariff", "orbit", "lattice",
          "meadow", "quartz", "ledger", "beacon", "canyon", "vertex", "saffron", "tundra")


def page(n: int, chars: int) -> str:
    """A search result page of about ``chars`` characters, different for every ``n``."""
    rng = random.Random(n)
    lines: list[str] = []
    size = 0
    while size < chars:
        line = f"{len(lines) + 1}. " + " ".join(rng.choice(_WORDS) for _ in range(8)) + "."
        lines.append(line)
        size += len(line) + 1
    return f"results for query {n}:\n" + "\n".join(lines)


@dataclass
class Run:
    requests: list[ModelRequest]
    session: AgentSession


def scripted_run(args: argparse.Namespace, compress_at: int | None) -> Run:
    @tool
    def search(query: str) -> str:
        """Search the archive.

        Args:
            query: what to look for
        """
        return page(int(query.split()[-1]), args.observation_chars)

    calls = [f'Thought: I still need part {n}\nAction: search\n'
             f'Action Input: {{"query": "part {n}"}}' for n in range(1, args.steps)]
    model = ScriptedModel([*calls, "Thought: I have all parts\nFinal Answer: done"])
    agent = Agent(model=model, tools=[search], limits=Limits(max_steps=args.steps),
                  compression=Compression.of(compress_at, keep_last=args.keep_last))
    result = agent.run("Collect every part of the report")
    assert result.status == "completed", result.reason
    return Run(requests=model.requests, session=agent.session(result.session_id))


def chatml(request: ModelRequest) -> str:
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n"
                   for m in request.messages)


def token_counter(args: argparse.Namespace) -> tuple[str, Any]:
    """SmolLM2's tokenizer when it is installed, else miniagent's estimate."""
    if not args.no_llama:
        try:
            import llama_cpp

            from miniagent.core.models.local import resolve_model_path

            vocab = llama_cpp.Llama(model_path=str(resolve_model_path(args.model_path)),
                                    vocab_only=True, verbose=False)
            return "SmolLM2 tokens", lambda text: len(vocab.tokenize(
                text.encode("utf-8"), add_bos=False, special=True))
        except Exception as exc:  # no llama.cpp or no model: say so, go on
            print(f"(no SmolLM2 tokenizer: {type(exc).__name__}: {exc}; estimating)")
    return "estimated tokens", lambda text: estimate(text, "tokens")


def tokens_sent(plain: Run, compressed: Run, args: argparse.Namespace) -> None:
    label, count = token_counter(args)
    sent = [sum(count(chatml(r)) for r in run.requests) for run in (plain, compressed)]
    guessed = [sum(estimate(chatml(r), "tokens") for r in run.requests)
               for run in (plain, compressed)]
    compactions = compressed.session.compactions
    print(f"(a) tokens sent over a {args.steps}-step run ({args.steps - 1} tool calls, "
          f"~{args.observation_chars}-character observations)")
    print(f"    without compression: {sent[0]:>8,} {label} ({guessed[0]:,} estimated)")
    print(f"    compress_at={args.compress_at}, keep_last={args.keep_last}: {sent[1]:>8,} "
          f"{label} ({guessed[1]:,} estimated), {len(compactions)} compactions at steps "
          + ", ".join(str(c.step) for c in compactions))
    print(f"    ratio with/without: {sent[1] / sent[0]:.2f} ({1 - sent[1] / sent[0]:.0%} saved); "
          f"last prompt {count(chatml(plain.requests[-1])):,} -> "
          f"{count(chatml(compressed.requests[-1])):,} {label}")


async def replay(model: Any, requests: list[ModelRequest]) -> list[dict[str, float]]:
    """Each prompt in order, one token generated; llama.cpp's timings of each."""
    figures: list[dict[str, float]] = []
    for request in requests:
        response = await model.generate(ModelRequest(messages=request.messages, max_tokens=1,
                                                     temperature=0.0))
        timings = dict(response.raw["timings"])
        timings["prompt_tokens"] = response.usage.prompt_tokens
        figures.append(timings)
    return figures


async def cold(model: Any, request: ModelRequest) -> dict[str, float]:
    model._llama.reset()  # forget the cached prefix: the whole prompt is evaluated
    return (await replay(model, [request]))[0]


async def warm_and_cold(model: Any, requests: list[ModelRequest], step: int, repeats: int
                        ) -> tuple[dict[str, float], dict[str, float]]:
    """Step ``step``'s prompt after the previous step's (what the cache holds in a run), and
    the same prompt from a cold cache, back to back so that a busy machine weighs on both;
    the fastest of ``repeats`` of each."""
    hots, colds = [], []
    for _ in range(repeats):
        await cold(model, requests[step - 2])  # the cache as the previous step left it
        hots.append((await replay(model, [requests[step - 1]]))[0])
        colds.append(await cold(model, requests[step - 1]))
    return min(hots, key=lambda f: f["prompt_ms"]), min(colds, key=lambda f: f["prompt_ms"])


async def llama_cpp_figures(plain: Run, compressed: Run, args: argparse.Namespace) -> None:
    from miniagent.core.models.local import LocalModel

    model = LocalModel(args.model_path, n_ctx=args.n_ctx, n_threads=1, grammar=False)
    model.load()
    print(f"(b) llama.cpp in process ({model.model_path.name}, 1 thread, n_ctx {args.n_ctx}): "
          "prompt evaluation, prefix cache as a server keeps it")
    started = time.perf_counter()
    runs = (("with compression", compressed), ("without compression", plain))
    if args.skip_plain_replay:
        runs = runs[:1]
    replays: dict[str, list[dict[str, float]]] = {}
    compactions = compressed.session.compactions[:args.compactions]
    until = (compactions[-1].step + args.steps_after) if compactions else len(compressed.requests)
    for name, run in runs if not args.pairs_only else ():
        requests = run.requests[:until] if name == "with compression" else run.requests
        figures = replays[name] = await replay(model, requests)
        print(f"    {name}: {sum(f['prompt_ms'] for f in figures) / 1000:.1f} s prompt time over "
              f"{len(figures)} steps, {sum(f['prompt_n'] for f in figures):,.0f} of "
              f"{sum(f['prompt_tokens'] for f in figures):,.0f} prompt tokens evaluated",
              flush=True)
    print("    step  prompt tok  evaluated  warm ms  cold ms  warm/cold   (min of "
          f"{args.repeats}, warm and cold measured back to back)")
    after: list[tuple[float, float]] = []
    at_compaction: list[tuple[float, float]] = []
    for compaction in compactions:
        last = min(compaction.step + args.steps_after, len(compressed.requests))
        for step in range(compaction.step, last + 1):
            hot, frozen = await warm_and_cold(model, compressed.requests, step, args.repeats)
            pair = (hot["prompt_ms"], frozen["prompt_ms"])
            (at_compaction if step == compaction.step else after).append(pair)
            mark = " (compaction)" if step == compaction.step else ""
            print(f"    {step:>4}  {hot['prompt_tokens']:>10,.0f}  {hot['prompt_n']:>9,.0f}  "
                  f"{pair[0]:>7.0f}  {pair[1]:>7.0f}  {pair[0] / pair[1]:>9.2f}{mark}",
                  flush=True)
    for name, pairs in (("compaction steps", at_compaction),
                        (f"the {args.steps_after} steps after each", after)):
        if pairs:
            ratio = statistics.mean(p[0] / p[1] for p in pairs)
            print(f"    {name}: warm/cold prompt time {ratio:.2f} (mean of {len(pairs)})")
    print(f"    ({time.perf_counter() - started:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--observation-chars", type=int, default=400)
    parser.add_argument("--compress-at", type=int, default=2000, help="estimated tokens")
    parser.add_argument("--keep-last", type=int, default=4)
    parser.add_argument("--no-llama", action="store_true", help="skip (b)")
    parser.add_argument("--model-path", default=None)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--steps-after", type=int, default=2,
                        help="steps after each compaction measured cold too")
    parser.add_argument("--compactions", type=int, default=None,
                        help="measure only the first N compactions (and replay only that far)")
    parser.add_argument("--repeats", type=int, default=2, help="of each warm/cold pair")
    parser.add_argument("--pairs-only", action="store_true",
                        help="(b) only the warm/cold pairs, no replay of the whole runs")
    parser.add_argument("--skip-plain-replay", action="store_true",
                        help="(b) without replaying the uncompressed run")
    args = parser.parse_args()
    plain, compressed = scripted_run(args, None), scripted_run(args, args.compress_at)
    tokens_sent(plain, compressed, args)
    sys.stdout.flush()
    if not args.no_llama:
        asyncio.run(llama_cpp_figures(plain, compressed, args))


if __name__ == "__main__":
    main()

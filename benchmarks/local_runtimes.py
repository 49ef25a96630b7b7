"""The two llama.cpp bindings side by side on the packaged SmolLM2, in one process each run.

For ``xllamacpp`` (the embedded model's runtime: prebuilt wheels, llama.cpp's server in
process) and ``llama_cpp`` (llama-cpp-python, built from source), when installed: import and
load time, prompt evaluation and generation speed on a ReAct-sized prompt, how much of a
second request with the same prefix is reused, whether a GBNF grammar is honoured, and
whether ``tools`` reach the prompt with the model's own chat template (``prompt_tokens`` with
and without them). Ratios are against llama-cpp-python measured in the same run. A script,
not a test: it prints figures and asserts nothing. Each runtime runs in a child process of
its own (the two bundle their own libllama).

Usage: python benchmarks/local_runtimes.py [--threads 1] [--runs 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from typing import Any

from miniagent.core.models.local import resolve_model_path
from miniagent.core.protocol.react import render_system_prompt
from miniagent.core.tools.builtin import builtin_tools

TOOLS = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                           "parameters": t.parameters}}
         for t in builtin_tools(".")]
SYSTEM = render_system_prompt(builtin_tools("."))
GRAMMAR = 'root ::= "Thought: " [a-z ]{1,24} "\\nAction: calculator"'


def messages(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


class XLlama:
    def __init__(self, path: str, threads: int) -> None:
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path, params.n_ctx, params.n_parallel = path, 4096, 1
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
        params.warmup, params.verbosity = False, -1
        self.server = xllamacpp.Server(params)

    def chat(self, **body: Any) -> dict[str, Any]:
        reply: dict[str, Any] = self.server.handle_chat_completions(body)
        return reply


class LlamaCpp:
    def __init__(self, path: str, threads: int) -> None:
        import llama_cpp

        self.llama_cpp = llama_cpp
        self.llm = llama_cpp.Llama(model_path=path, n_ctx=4096, n_threads=threads,
                                   logits_all=False, verbose=False)

    def chat(self, **body: Any) -> dict[str, Any]:
        grammar = body.pop("grammar", None)
        if grammar:
            body["grammar"] = self.llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)
        reply: dict[str, Any] = self.llm.create_chat_completion(**body)
        return reply


def measure(name: str, threads: int, runs: int) -> dict[str, Any]:
    """One runtime's figures (run in a child process)."""
    path = str(resolve_model_path())
    started = time.perf_counter()
    runtime = (XLlama if name == "xllamacpp" else LlamaCpp)(path, threads)
    load = time.perf_counter() - started
    cold = []
    for n in range(runs):  # a different question each time: the system prompt is the prefix
        began = time.perf_counter()
        reply = runtime.chat(messages=messages(f"What is {n + 2} * 17?"), max_tokens=1,
                             temperature=0)
        cold.append((time.perf_counter() - began, reply["usage"]["prompt_tokens"]))
    began = time.perf_counter()
    reply = runtime.chat(messages=messages("Say hello."), max_tokens=64, temperature=0)
    gen_time, gen_tokens = time.perf_counter() - began, reply["usage"]["completion_tokens"]
    grammar = runtime.chat(messages=messages("Hi"), max_tokens=32, temperature=0,
                           grammar=GRAMMAR)["choices"][0]["message"]["content"] or ""
    plain = runtime.chat(messages=messages("Hi"), max_tokens=1)["usage"]["prompt_tokens"]
    tools = runtime.chat(messages=messages("Hi"), max_tokens=1, tools=TOOLS,
                         tool_choice="auto")["usage"]["prompt_tokens"]
    return {"load_s": load, "first_prompt_s": cold[0][0], "prompt_tokens": cold[0][1],
            "later_prompt_s": statistics.median(t for t, _ in cold[1:]) if runs > 1 else None,
            "gen_tok_s": gen_tokens / gen_time if gen_time else 0.0,
            "grammar_ok": grammar.startswith("Thought: ") and grammar.endswith("calculator"),
            "tools_in_prompt": tools > plain}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.threads, args.runs)))
        return
    figures = {}
    for name in ("llama_cpp", "xllamacpp"):
        if importlib.util.find_spec(name) is None:
            print(f"{name}: not installed")
            continue
        out = subprocess.run([sys.executable, __file__, "--child", name, "--threads",
                              str(args.threads), "--runs", str(args.runs)],
                             capture_output=True, text=True, check=True)
        figures[name] = json.loads(out.stdout.strip().splitlines()[-1])
    base = figures.get("llama_cpp")
    print(f"SmolLM2-135M, {args.threads} thread(s), ReAct prompt of the built-in tools")
    for name, f in figures.items():
        def ratio(key: str, f: dict[str, Any] = f) -> str:
            return f" ({f[key] / base[key]:.2f}x)" if base and base[key] else ""
        later = f"{f['later_prompt_s']:.3f} s" if f["later_prompt_s"] is not None else "n/a"
        print(f"{name:10} load {f['load_s']:.2f} s{ratio('load_s')} · first prompt "
              f"{f['prompt_tokens']} tokens {f['first_prompt_s']:.2f} s"
              f"{ratio('first_prompt_s')} · same prefix later {later} · generation "
              f"{f['gen_tok_s']:.1f} tok/s{ratio('gen_tok_s')} · grammar "
              f"{'honoured' if f['grammar_ok'] else 'NOT honoured'} · tools "
              f"{'in the prompt' if f['tools_in_prompt'] else 'left out of the prompt'}")


if __name__ == "__main__":
    main()

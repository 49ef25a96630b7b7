"""Concurrent POST throughput of miniagent's HttpClient against aiohttp and httpx.

The stub server runs in a subprocess (``python -m miniagent.testing.stub_server``) with a
fixed latency, so each burst of N concurrent requests ideally takes exactly that latency.
For each client and N, the script prints the wall time of a cold burst (connections
opened during the burst) and a warm one (pool already full), and the ratio
``ideal / wall``. It also prints import times. No asserts: the machine may be noisy.

Usage:
    python benchmarks/http_clients.py [--latency 0.1] [--sizes 200 1000] [--repeat 3]

aiohttp and httpx are optional (``pip install -e '.[bench]'``); missing ones are skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from miniagent.core.models.http import HttpClient

PAYLOAD = json.dumps(
    {"model": "bench", "messages": [{"role": "user", "content": "Say ok."}], "max_tokens": 8}
).encode()
HEADERS = {"Content-Type": "application/json"}

Post = Callable[[], Awaitable[bytes]]


async def burst(post: Post, n: int) -> float:
    """Wall time of ``n`` concurrent POSTs; checks every answer is a completion."""
    start = time.perf_counter()
    bodies = await asyncio.gather(*(post() for _ in range(n)))
    elapsed = time.perf_counter() - start
    bad = sum(b'"choices"' not in body for body in bodies)
    if bad:
        raise RuntimeError(f"{bad} of {n} answers were not completions")
    return elapsed


async def run_ours(url: str, n: int) -> tuple[float, float]:
    client = HttpClient(max_connections=n)

    async def post() -> bytes:
        return (await client.post_json(url, PAYLOAD, HEADERS, 60.0)).body

    try:
        return await burst(post, n), await burst(post, n)
    finally:
        await client.aclose()


async def run_aiohttp(url: str, n: int) -> tuple[float, float]:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=n)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def post() -> bytes:
            async with session.post(url, data=PAYLOAD, headers=HEADERS) as resp:
                return await resp.read()

        return await burst(post, n), await burst(post, n)


async def run_httpx(url: str, n: int) -> tuple[float, float]:
    import httpx

    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(limits=limits, timeout=60.0) as client:

        async def post() -> bytes:
            return (await client.post(url, content=PAYLOAD, headers=HEADERS)).content

        return await burst(post, n), await burst(post, n)


RUNNERS: dict[str, Callable[[str, int], Awaitable[tuple[float, float]]]] = {
    "miniagent HttpClient": run_ours,
    "aiohttp": run_aiohttp,
    "httpx.AsyncClient": run_httpx,
}
IMPORTS = {
    "miniagent HttpClient": "miniagent.core.models.openai_compat",
    "aiohttp": "aiohttp",
    "httpx.AsyncClient": "httpx",
}


def available(name: str) -> bool:
    module = IMPORTS[name]
    code = f"import {module}"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def import_ms(module: str) -> float:
    """Best of three cold imports of ``module`` in a fresh interpreter, in ms."""
    code = (
        "import time; t = time.perf_counter(); import " + module + "; "
        "print((time.perf_counter() - t) * 1000)"
    )
    runs = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
        for _ in range(3)
    ]
    return min(runs)


def start_stub(latency: float) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "miniagent.testing.stub_server", "--latency", str(latency)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    base_url = proc.stdout.readline().strip()
    if not base_url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"the stub server did not start: {base_url!r}")
    return proc, base_url


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--repeat", type=int, default=3, help="runs per client and size (best)")
    args = parser.parse_args(argv)
    names = [name for name in RUNNERS if available(name)]
    print("import time (best of 3, fresh interpreter):")
    for name in names:
        print(f"  {IMPORTS[name]:<34} {import_ms(IMPORTS[name]):7.1f} ms")
    proc, base_url = start_stub(args.latency)
    url = base_url + "/chat/completions"
    try:
        report(names, url, args.sizes, args.repeat, args.latency)
    finally:
        proc.terminate()
        proc.wait(10)


def report(names: list[str], url: str, sizes: list[int], repeat: int, ideal: float) -> None:
    print(f"\nstub latency {ideal * 1000:.0f} ms = the ideal wall time of one burst")
    columns = ("cold s", "ideal/cold", "warm s", "ideal/warm")
    print(f"{'client':<22} {'N':>5} " + " ".join(f"{c:>10}" for c in columns))
    for n in sizes:
        for name in names:
            results: list[Any] = [asyncio.run(RUNNERS[name](url, n)) for _ in range(max(1, repeat))]
            cold = min(r[0] for r in results)
            warm = min(r[1] for r in results)
            print(
                f"{name:<22} {n:>5} {cold:>10.3f} {ideal / cold:>10.0%} "
                f"{warm:>10.3f} {ideal / warm:>10.0%}"
            )


if __name__ == "__main__":
    main()

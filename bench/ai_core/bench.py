"""Added latency of the AI core's OpenAI-compatible door against the LiteLLM proxy.

One local mock provider streams a fixed reply. Three ways to reach it are measured in
interleaved rounds: directly, through our `POST /v1/chat/completions` (the ai-core service run
by `gateway serve`), and through the LiteLLM proxy (installed into its own venv, never into the
project). Each round runs a batch per target at the given concurrency and takes the median;
the figure is the median of the round medians. Added = target − direct. Prints the ratios.

    .venv/bin/python bench/ai_core/bench.py [--rounds 7] [--requests 40] [--concurrency 1 50]

Needs PostgreSQL: DATABASE_URL, or the embedded server (started in a temporary DATA_DIR).
LiteLLM: bench/ai_core/.venv-litellm (created with `pip install 'litellm[proxy]'` when missing).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: bench/ai_core is not on the path as a package

from bench.stub_model import StubReply, serve_stub_model  # noqa: E402
from bench.support import drop_database, free_port, scratch_database, wait_until_up  # noqa: E402
LITELLM_VENV = HERE / ".venv-litellm"
REPLY_WORDS = ("The quick brown fox jumps over the lazy dog while the assistant streams "
               "a fixed reply for the benchmark, word by word, until it ends.").split()
JWT_SECRET = "bench-jwt-secret-" + "z" * 32
SERVICE_TOKEN = "bench-service-token"


# ---------------------------------------------------------------- the mock provider

def run_mock(port: int) -> None:
    """The provider: REPLY_WORDS streamed one word a chunk (25), with no pause between them."""
    serve_stub_model(port, StubReply(pieces=tuple(word + " " for word in REPLY_WORDS), whole=" ".join(REPLY_WORDS),
                                     model="mock-model", id="chatcmpl-mock", usage=(1, 1)))


# ---------------------------------------------------------------- processes

def ensure_litellm() -> Path:
    binary = LITELLM_VENV / "bin" / "litellm"
    if not binary.exists():
        print("creating", LITELLM_VENV, "and installing litellm[proxy] ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True)
        subprocess.run([str(LITELLM_VENV / "bin" / "pip"), "install", "-q", "litellm[proxy]"], check=True)
    return binary


def access_token() -> str:
    import jwt

    now = int(time.time())
    return jwt.encode({"sub": "admin", "username": "admin", "nickname": "admin", "adm": True, "typ": "access",
                       "iat": now, "exp": now + 24 * 3600, "jti": uuid.uuid4().hex}, JWT_SECRET, algorithm="HS256")


def bench_database() -> str:
    """A fresh database on DATABASE_URL, or "" to let the service start its embedded one."""
    url = os.environ.get("DATABASE_URL", "")
    return scratch_database(url, "bench_ai_core") if url else ""


# ---------------------------------------------------------------- measuring

async def one_call(http: aiohttp.ClientSession, url: str, model: str, token: str) -> tuple[float, float]:
    """(total seconds, seconds to the first content token) of one streamed completion."""
    started = time.perf_counter()
    first = None
    text = ""
    async with http.post(url, headers={"Authorization": f"Bearer {token}"}, json={
            "model": model, "stream": True, "messages": [{"role": "user", "content": "benchmark"}]}) as response:
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}: {await response.text()}")
        async for line in response.content:
            if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            piece = (choices[0].get("delta") or {}).get("content")
            if piece:
                if first is None:
                    first = time.perf_counter()
                text += piece
    ended = time.perf_counter()
    if text.split() != REPLY_WORDS:
        raise RuntimeError(f"{url}: unexpected reply {text[:80]!r}")
    return ended - started, (first or ended) - started


async def batch(http, target: dict, requests: int, concurrency: int) -> tuple[float, float]:
    semaphore = asyncio.Semaphore(concurrency)

    async def guarded():
        async with semaphore:
            return await one_call(http, target["url"], target["model"], target["token"])

    results = await asyncio.gather(*(guarded() for _ in range(requests)))
    return statistics.median(r[0] for r in results), statistics.median(r[1] for r in results)


async def measure(targets: list[dict], rounds: int, requests: int, concurrency: int) -> dict:
    per_target = {t["name"]: {"total": [], "ttft": []} for t in targets}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as http:
        for target in targets:  # warm-up: connections, caches, lazy imports
            await batch(http, target, max(4, concurrency), concurrency)
        for _ in range(rounds):
            order = targets[:]
            random.shuffle(order)  # interleaved, in a new order each round
            for target in order:
                total, ttft = await batch(http, target, requests, concurrency)
                per_target[target["name"]]["total"].append(total)
                per_target[target["name"]]["ttft"].append(ttft)
    return {name: {kind: statistics.median(values) for kind, values in series.items()}
            for name, series in per_target.items()}


def report(concurrency: int, figures: dict) -> dict:
    direct = figures["direct"]
    added = {name: {kind: figures[name][kind] - direct[kind] for kind in ("total", "ttft")}
             for name in ("ours", "litellm")}
    print(f"\nconcurrency {concurrency}: median of round medians (ms)")
    print(f"  {'target':8} {'latency':>9} {'TTFT':>9} {'added':>9} {'added TTFT':>11}")
    for name in ("direct", "ours", "litellm"):
        extra = added.get(name, {"total": 0.0, "ttft": 0.0})
        print(f"  {name:8} {figures[name]['total'] * 1000:9.2f} {figures[name]['ttft'] * 1000:9.2f} "
              f"{extra['total'] * 1000:9.2f} {extra['ttft'] * 1000:11.2f}")
    ratios = {kind: (added["ours"][kind] / added["litellm"][kind]) if added["litellm"][kind] > 0 else float("nan")
              for kind in ("total", "ttft")}
    print(f"  added latency ours/LiteLLM = {ratios['total']:.3f}   added TTFT ours/LiteLLM = {ratios['ttft']:.3f}"
          f"   (target: latency ratio <= 0.05 -> {'met' if ratios['total'] <= 0.05 else 'NOT met'})")
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=40, help="requests per target per round")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 50])
    parser.add_argument("--mock", type=int, help=argparse.SUPPRESS)  # internal: run the mock on this port
    args = parser.parse_args()
    if args.mock:
        run_mock(args.mock)
        return

    litellm = ensure_litellm()
    processes: list[subprocess.Popen] = []
    data_dir = Path(tempfile.mkdtemp(prefix="bench-ai-core-"))
    database_url = bench_database()
    try:
        mock_port, ours_port, litellm_port = free_port(), free_port(), free_port()
        mock_url = f"http://127.0.0.1:{mock_port}/v1"
        processes.append(subprocess.Popen([sys.executable, __file__, "--mock", str(mock_port)]))
        wait_until_up(f"{mock_url}/models", processes[-1], 20)

        environment = {**os.environ, "DATA_DIR": str(data_dir), "JWT_SECRET": JWT_SECRET,
                       "SERVICE_TOKEN": SERVICE_TOKEN, "OPENAI_BASE_URL": mock_url, "OPENAI_API_KEY": "sk-mock",
                       "DEFAULT_MODEL": "mock-model", "DATABASE_URL": database_url}
        processes.append(subprocess.Popen(
            [str(Path(sys.executable).parent / "gateway"), "serve", "--service", "ai-core", "--port", str(ours_port)],
            env=environment, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(data_dir / "ours.log", "w")))
        processes[-1].log_path = data_dir / "ours.log"
        token = access_token()
        wait_until_up(f"http://127.0.0.1:{ours_port}/v1/models", processes[-1], 120,
                      {"Authorization": f"Bearer {token}"})

        litellm_key = "sk-" + secrets.token_hex(32)  # LiteLLM refuses weak master keys
        config = data_dir / "litellm.yaml"
        config.write_text(json.dumps({
            "model_list": [{"model_name": "mock-model", "litellm_params": {
                "model": "openai/mock-model", "api_base": mock_url, "api_key": "sk-mock"}}],
            "litellm_settings": {"telemetry": False, "set_verbose": False},
            "general_settings": {"master_key": litellm_key}}))
        processes.append(subprocess.Popen(
            [str(litellm), "--config", str(config), "--host", "127.0.0.1", "--port", str(litellm_port),
             "--num_workers", "1"], env={**{k: v for k, v in os.environ.items() if k != "DATABASE_URL"},  # no LiteLLM database
                  "LITELLM_LOG": "ERROR"},
            stdout=open(data_dir / "litellm.log", "w"), stderr=subprocess.STDOUT, cwd=data_dir))
        processes[-1].log_path = data_dir / "litellm.log"
        wait_until_up(f"http://127.0.0.1:{litellm_port}/health/liveliness", processes[-1], 180)

        targets = [
            {"name": "direct", "url": f"{mock_url}/chat/completions", "model": "mock-model", "token": "sk-mock"},
            {"name": "ours", "url": f"http://127.0.0.1:{ours_port}/v1/chat/completions", "model": "assistant",
             "token": token},
            {"name": "litellm", "url": f"http://127.0.0.1:{litellm_port}/v1/chat/completions",
             "model": "mock-model", "token": litellm_key},
        ]
        print(f"rounds={args.rounds} requests/target/round={args.requests} reply={len(REPLY_WORDS)} chunks")
        for concurrency in args.concurrency:
            report(concurrency, asyncio.run(measure(targets, args.rounds, args.requests, concurrency)))
    finally:
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
        if database_url:
            drop_database(database_url, os.environ["DATABASE_URL"])
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()

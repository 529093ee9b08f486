"""What checking a person's credential adds at the AI core's OpenAI-compatible door.

Since people can be disabled and personal API keys revoked, the AI core reads the person's
standing (a signed access token) or the key (an API key) from the shared database on each request
(docs/auth.md, "People"). This measures `GET /v1/models` on one real AI core (in this process,
on a real PostgreSQL whose auth tables a real gateway app created) with four credentials: the
service credential and the administrator's access token (no database read: the baselines; the
administrator comes from the configuration), a person's access token and a person's API key. Interleaved rounds; each round takes the median of a batch per credential; the figure is the
median of the round medians, with the p95 over all requests. Added = credential − the administrator's access token.

    .venv/bin/python bench/ai_core/credentials.py [--rounds 7] [--requests 200]

Needs PostgreSQL: DATABASE_URL, or the embedded server (started in a temporary directory).
"""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.support import drop_database, scratch_database  # noqa: E402

SERVICE_TOKEN = "bench-service-token"
ADMIN_PASSWORD = "bench-admin-password"


def config_for(database_url: str, data_dir: str):
    from gateway.config import Config

    return Config.load(overrides={
        "core.data_dir": data_dir, "database.url": database_url, "auth.admin_username": "admin",
        "auth.admin_password": ADMIN_PASSWORD, "auth.jwt_secret": "bench-jwt-secret-" + "y" * 32,
        "auth.service_token": SERVICE_TOKEN, "auth.chat_for_all_users": True,
        "plugins.auth": {"bcrypt_rounds": 4, "rate_limit_per_minute": 100000}}, environ={})


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


async def credentials(http: aiohttp.ClientSession, gateway: str) -> dict[str, str]:
    async def post(path, body, token=None):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with http.post(gateway + path, json=body, headers=headers) as answer:
            assert answer.status in (200, 201), await answer.text()
            return await answer.json()

    admin = (await post("/api/v1/auth/login", {"username": "admin", "password": ADMIN_PASSWORD}))["token"]
    person = await post("/api/v1/admin/users", {"username": "bench"}, admin)
    first = await post("/api/v1/auth/login", {"username": "bench", "password": person["one_time_password"]})
    # A one-time password's login opens nothing but choosing one's own (docs/auth.md, "People").
    login = await post("/api/v1/auth/password", {"current_password": person["one_time_password"],
                                                  "new_password": "bench-own-password"}, first["token"])
    key = await post("/api/v1/auth/api-keys", {"name": "bench", "scopes": ["chat"]}, login["token"])
    return {"service": SERVICE_TOKEN, "administrator's access token": admin,
            "person's access token": login["token"], "person's API key": key["key"]}


async def batch(http: aiohttp.ClientSession, url: str, token: str, requests: int) -> list[float]:
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        async with http.get(url, headers={"Authorization": f"Bearer {token}"}) as answer:
            await answer.read()
            assert answer.status == 200, answer.status
        times.append((time.perf_counter() - started) * 1000)
    return times


async def main(rounds: int, requests: int) -> None:
    from gateway.app import create_app
    from plugins.ai_core import plugin as ai_core_plugin
    from plugins.auth import AuthPlugin, TokensPlugin
    from tests.support.servers import PostgresForTests

    postgres = PostgresForTests()
    database = scratch_database(postgres.url, "bench_credentials")
    with tempfile.TemporaryDirectory() as data_dir:
        config = config_for(database, data_dir)
        gateway_runner, gateway = await serve(create_app("gateway", config, plugins=[TokensPlugin(), AuthPlugin()]))
        ai_core_runner, ai_core = await serve(create_app("ai-core", config, plugins=[TokensPlugin(), ai_core_plugin]))
        try:
            async with aiohttp.ClientSession() as http:
                tokens = await credentials(http, gateway)
                for token in tokens.values():
                    await batch(http, ai_core + "/v1/models", token, 20)  # warm up
                medians: dict[str, list[float]] = {name: [] for name in tokens}
                every: dict[str, list[float]] = {name: [] for name in tokens}
                for _ in range(rounds):
                    order = list(tokens)
                    random.shuffle(order)
                    for name in order:
                        times = await batch(http, ai_core + "/v1/models", tokens[name], requests)
                        medians[name].append(statistics.median(times))
                        every[name].extend(times)
        finally:
            await ai_core_runner.cleanup()
            await gateway_runner.cleanup()
    drop_database(database, postgres.url)
    postgres.close()
    base = statistics.median(medians["administrator's access token"])
    print(f"GET /v1/models, {rounds} rounds x {requests} requests, milliseconds")
    print("| credential | median | p95 | added (median) |")
    print("|---|---|---|---|")
    for name in tokens:
        median = statistics.median(medians[name])
        p95 = statistics.quantiles(every[name], n=20)[-1]
        print(f"| {name} | {median:.2f} | {p95:.2f} | {median - base:+.2f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=200)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.requests))

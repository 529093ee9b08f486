"""Message search on a 100,000-message history: the plans PostgreSQL chooses for the two search
statements and the time of whole searches through the `conversations` service.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python -m bench.search.run

Without DATABASE_URL an embedded PostgreSQL is started in a temporary directory. A scratch
database is created and dropped."""
from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from aiohttp import web

from bench.search.history import fill
from bench.support import drop_database, scratch_database
from gateway.app import create_app
from gateway.config import Config
from gateway.context import get_context
from gateway.database import fetch_all
from gateway.embedded_database import start_embedded
from plugins.auth import tokens_plugin
from plugins.sessions import plugin as sessions_plugin
from plugins.sessions.queries import SEARCH_COUNT_SQL, SEARCH_PAGE_SQL, escape_like
from plugins.sessions.contract import CONVERSATIONS

QUERIES = ["紫色的长颈鹿", "长颈鹿", "quarterly budget", "budget", "喝水", "relaxing music", "the"]
USER = "user_bench"


async def measure(url: str, messages: int, repeats: int) -> None:
    scratch_url = scratch_database(url, "bench_search")
    runner = None
    try:
        config = Config.load(overrides={"database.url": scratch_url, "core.data_dir": tempfile.mkdtemp(),
                                        "auth.jwt_secret": "bench-" + "x" * 40, "auth.admin_password": "bench",
                                        "auth.service_token": "bench", "plugins.webhooks.webhook_key": "bench",
                                        "auth.registration_verify_code": "BENCH1"}, environ={})
        app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin])
        runner = web.AppRunner(app)
        await runner.setup()  # opens the pool and applies the migrations
        context = get_context(app)
        started = time.monotonic()
        await fill(context.db, USER, messages)
        print(f"filled {messages} messages (with the trigram index) in {time.monotonic() - started:.1f} s\n")
        conversations = context.contracts.require(CONVERSATIONS)
        table = ["| query | matches | median ms | plan of the count | plan of the page |", "|---|---|---|---|---|"]
        for query in QUERIES:
            pattern = f"%{escape_like(query)}%"
            plans = []
            for sql, arguments in ((SEARCH_COUNT_SQL, (USER, pattern)), (SEARCH_PAGE_SQL, (USER, pattern, 50, 0))):
                rows = await fetch_all(context.db, "EXPLAIN (ANALYZE, BUFFERS) " + sql, arguments)
                plan = [row["QUERY PLAN"] for row in rows]
                plans.append(next((line.strip().lstrip("-> ").split("  (")[0] for line in plan
                                   if "chat_messages" in line and "Scan" in line), "?"))
                if query == QUERIES[0]:
                    print("\n".join(["```", sql, *plan, "```"]), end="\n\n")
            timings = []
            for _ in range(repeats):
                begun = time.perf_counter()
                _, total = await conversations.search_messages(USER, query)
                timings.append((time.perf_counter() - begun) * 1000)
            table.append(f"| {query} | {total} | {statistics.median(timings):.1f} | {plans[0]} | {plans[1]} |")
        print("\n".join(table))
    finally:
        if runner is not None:
            await runner.cleanup()
        drop_database(scratch_url, url)


def main() -> None:
    import os

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=7)
    arguments = parser.parse_args()
    url, handle = os.environ.get("DATABASE_URL", ""), None
    if not url:
        url, handle = start_embedded(Path(tempfile.mkdtemp(prefix="bench-search-pg-")))
    try:
        asyncio.run(measure(url, arguments.messages, arguments.repeats))
    finally:
        if handle is not None:
            handle.cleanup()


if __name__ == "__main__":
    main()

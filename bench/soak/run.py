"""The soak (issue 43): the whole stack under a day's mixed use, for 30 minutes by default.

The console (`python -m console serve`) runs the eight services of the real service table on free
ports, a scratch database of DATABASE_URL (else their embedded PostgreSQL) and a local stub
model (an OpenAI-compatible streaming server in its own process, OPENAI_BASE_URL). Against it:

- `--clients` WebSocket devices (500; `--users` people with several devices each) chatting at a
  person's pace: a message, its reply read, then a pause of 20 to 60 s;
- `--rest-rate` REST requests a second (50): sessions, history, message search, files (list,
  upload, download), reminders, devices, knowledge search;
- a streamed voice message a minute (`voice_stream_*` at the pace of speech, a real recording);
- a knowledge upload at the start and every five minutes, searched by the REST mix;
- a reminder due every minute, and an automation rule firing every minute (cron `* * * * *`).

Every `--sample` seconds it records each service's resident memory and open files (its whole
process tree but the database server) and its database connections (the server's count in
pg_stat_activity, by the application_name each service's pool gives itself). At the end it prints
per-kind p50/p95/p99 and errors, the samples over time, and the targets: no error; REST p95 under
300 ms; memory growth under 10 % from minute 5 to the end (from a third of the run when it is
shorter than 15 minutes); no growth of open files or database connections. Open files are judged
net of database connections and of established connections the service accepted (its clients'
keep-alive pools and WebSockets, in the clients' own files): pools that fill are not a leak of the
service they lead to.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python -m bench.soak [--minutes 30]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import aiohttp

from bench.soak.history import seed_history
from bench.soak.load import Device, Load, Person, Recorder, VoiceDevice, tokens_for
from bench.soak.model import REPLY, serve_model
from bench.soak.report import report
from bench.soak.sampling import DatabaseConnections, embedded_url, sample_loop
from bench.soak.stack import Stack, start_stack, stop_stack
from bench.support import drop_database, scratch_database


async def soak(stack: Stack, args: argparse.Namespace,
               database: DatabaseConnections) -> tuple[Recorder, list[dict], dict, Load]:
    recorder = Recorder()
    duration = args.minutes * 60
    user_ids = [f"soak_user_{number}" for number in range(args.users)]
    tokens = tokens_for(user_ids, int(duration) + 3600)
    per_person = max(1, args.clients // args.users)
    people = [Person(user_id, token, [f"soak-{user_id}-{device}" for device in range(per_person)])
              for user_id, token in zip(user_ids, tokens)]
    sessions = [(person.user_id, session) for person in people for session in person.sessions][:args.clients]
    seeded = await asyncio.to_thread(seed_history, database.url, sessions, args.history,  # bench/soak/history.py
                                     "Earlier soak message {n}, please answer.", REPLY)
    print(f"soak: {seeded} messages of history in {len(sessions)} sessions", flush=True)
    stop = asyncio.Event()
    samples: list[dict] = []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        load = Load(stack.gateway, people, http, recorder)
        started = time.monotonic()
        sampler = asyncio.ensure_future(sample_loop(stack, database, args.sample, stop, started, samples))
        await load.make_rule()
        devices = [Device(person, session, load) for person in people for session in person.sessions][:args.clients]
        voice = VoiceDevice(load, people[-1])
        tasks = [asyncio.ensure_future(device.run(stop)) for device in devices]
        tasks.append(asyncio.ensure_future(load.rest(args.rest_rate, stop)))
        tasks.append(asyncio.ensure_future(load.every_minute(stop, voice)))
        print(f"soak: {len(devices)} devices of {len(people)} people, {args.rest_rate:g} REST requests/s, "
              f"{args.minutes:g} minutes", flush=True)
        await asyncio.sleep(duration)
        load.stopping = True
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        async with voice.busy:
            pass
        schedules = await load.check_schedules(datetime.now(timezone.utc))
        await sampler
    return recorder, samples, schedules, load



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--rest-rate", type=float, default=50.0)
    parser.add_argument("--sample", type=float, default=None, help="seconds between samples (default: 30, "
                                                                     "10 for runs under 10 minutes)")
    parser.add_argument("--history", type=int, default=50, help="messages each session holds before the load "
                                                                   "starts (bench/soak/history.py; 0: none)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs)")
    parser.add_argument("--serve-model", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_model is not None:
        serve_model(args.serve_model)
        return
    args.users = max(1, min(args.users, args.clients))
    args.sample = args.sample or (10.0 if args.minutes < 10 else 30.0)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    admin_url = os.environ.get("DATABASE_URL")
    database_url = scratch_database(admin_url, "bench_soak") if admin_url else None
    directory = Path(tempfile.mkdtemp(prefix="soak-"))
    stack = None
    try:
        print("soak: starting the console and its eight services…", flush=True)
        stack = start_stack(directory, database_url)
        database = DatabaseConnections(database_url or embedded_url(directory / "data"))
        import uvloop  # the load generator's own CPU is the machine's too: the cheaper loop

        try:
            recorder, samples, schedules, load = uvloop.run(soak(stack, args, database))
        finally:
            database.close()  # before the scratch database is dropped
        met = report(recorder, samples, schedules, load, args)
    finally:
        if stack is not None:
            stop_stack(stack)
        if database_url:
            drop_database(database_url, admin_url)
        if args.keep:
            print(f"logs kept in {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()

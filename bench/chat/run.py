"""Chat channel benchmarks (issue 5): the relay's added latency, and memory per idle WebSocket.

1. Relay. A mock AI core (`POST /api/v1/chat/stream`, 64 `delta` events 20 ms apart, then
   `done`) runs in its own process; the real gateway app (tokens, sessions, files, chat; real
   PostgreSQL, in-process bus) in another. The client process measures, at concurrency 1 and
   200, in interleaved rounds (a new random order each round; `--turns` sequential turns per
   round at concurrency 1, `--turns-per-round` batches of simultaneous turns above it):
   - direct: a POST to the mock's SSE, time from the request to the first `delta` and the gaps
     between `delta`s;
   - gateway: a `message` frame on an open `/ws/chat` connection (one per session, distinct
     users so a device only receives its own session), time from the send to the first
     `stream_chunk` and the gaps between `stream_chunk`s.
   Percentiles are over all samples of all rounds. Added = gateway - direct. Targets: added
   first-token p50 <= 1 ms and p99 <= 5 ms; added gap p99 <= 1 ms.
2. Idle connections. 10,000 WebSockets held open against (a) a bare aiohttp WebSocket server
   and (b) the real gateway with the chat plugin (authenticated, one session each). Each server
   is its own process; its RSS growth (psutil) over its RSS before the connections, once idle,
   divided by the count. Target: gateway <= 1.3x bare.
3. Workers (`--only workers`). The gateway as an operator runs it, `gateway serve --service
   gateway --workers N` (the chat plugins' service table, no REDIS_URL: the embedded bus),
   against the bare relay in N processes on one port (SO_REUSEPORT), for each N of
   `--workers`: first-token latency and turns per second (a batch of `--concurrency` turns at
   once; turns / the batch's wall time) and CPU per turn over each side's whole process tree,
   interleaved rounds as in 1. How both scale with N is the point: the same command on a
   machine with more cores gives more N. The service table's "auto" runs beside them (`gateway
   serve` with no `--workers`; where it resolves to a count already run, that run's rows), with
   every row's ratios to one worker, and each row's CPU per turn on the whole machine by role
   (the gateway's workers, parent and bus; the mock AI core, PostgreSQL, the load generator).
4. Burst starts (`--only burst`). Batches of `--concurrency` simultaneous turns whose reply is
   one delta, then 64, against the gateway and the bare relay: each side's user and system CPU
   per turn (what a turn costs besides its deltas, and what a delta costs: the difference over
   63), and when the batch's first and last requests reached the mock after the batch's first
   message (what stands between a burst and its last first token).
5. Two revisions side by side (`--only compare --base REV`). The gateway of the working tree and
   the gateway of revision REV (checked out into a temporary git worktree) run beside the bare
   relay, and the bursts of 4 run against all three interleaved, `--repeats` times: CPU per turn
   of each, each as a ratio of the bare relay's, and each one's first token p50. This machine's
   speed drifts by a third within an hour, and one change to a turn moves its cost by a few
   percent: two separate runs cannot tell such a change from the drift, one paired run can.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python -m bench.chat.run

Without DATABASE_URL an embedded PostgreSQL is started in a temporary directory. A scratch
database is created and dropped; every process is stopped at the end.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path

import aiohttp

from bench.chat.burst import run_burst, run_compare
from bench.chat.idle import run_idle
from bench.chat.processes import Processes
from bench.chat.relay import run_relay
from bench.chat.servers import serve_bare, serve_bare_relay, serve_gateway, serve_mock
from bench.chat.workers import run_workers
from bench.support import database_server, scratch


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=20, help="sequential turns per round at concurrency 1")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 200])
    parser.add_argument("--connections", type=int, default=10000)
    parser.add_argument("--only", choices=["relay", "idle", "workers", "burst", "compare"])
    parser.add_argument("--base", default="HEAD", help="the revision the compare run sets beside the working tree")
    parser.add_argument("--repeats", type=int, default=4, help="interleaved repeats of the compare run")
    parser.add_argument("--workers", type=int, nargs="+", default=None,
                        help="worker counts of the workers run (default: 1 and every core, at most 8); the "
                             "service table's \"auto\" is run beside them")
    parser.add_argument("--turns-per-round", type=int, default=3,
                        help="counted batches per round at a concurrency above 1 (relay and workers runs)")
    # internal: run one server in this process
    parser.add_argument("--serve", choices=["mock", "gateway", "bare", "bare-relay"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help=argparse.SUPPRESS)
    parser.add_argument("--ai-core-url", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)
    parser.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def serve(args: argparse.Namespace) -> None:
    """Run the one server `--serve` names in this process (the benchmarks start each so)."""
    if args.serve == "mock":
        serve_mock(args.port)
    elif args.serve == "bare":
        serve_bare(args.port)
    elif args.serve == "bare-relay":
        serve_bare_relay(args.port, args.ai_core_url, args.reuse_port)
    else:
        serve_gateway(args.port, args.database_url, args.ai_core_url, args.data_dir)


def main() -> None:
    args = arguments()
    raise_fd_limit()
    if args.serve:
        return serve(args)
    data_dir = Path(tempfile.mkdtemp(prefix="bench-chat-"))
    processes = Processes(data_dir)
    with database_server("bench-chat") as admin_url, scratch(admin_url, "bench_chat") as database_url:
        try:
            print(f"python {sys.version.split()[0]}, aiohttp {aiohttp.__version__}, {os.cpu_count()} cores; "
                  f"RLIMIT_NOFILE {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}")
            if args.only in (None, "relay"):
                asyncio.run(run_relay(args, processes, database_url, data_dir))
            if args.only in (None, "idle"):
                asyncio.run(run_idle(args, processes, database_url, data_dir))
            if args.only == "burst":  # a diagnosis of the relay's figures, not part of the full run
                asyncio.run(run_burst(args, processes, database_url, data_dir))
            if args.only == "compare":  # a change measured against another revision, not part of the full run
                asyncio.run(run_compare(args, processes, database_url, data_dir))
            if args.only in (None, "workers"):
                args.workers = args.workers or sorted({1, min(os.cpu_count() or 1, 8)})
                asyncio.run(run_workers(args, processes, database_url, data_dir))
        finally:
            processes.stop_all()
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()

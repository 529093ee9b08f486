"""The soak's load: devices chatting on /ws/chat at a person's pace, REST requests at a steady
rate, a voice message, a reminder and a knowledge upload on the minute; every outcome recorded."""
from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import random
import sys
import time
import wave
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import aiohttp

from bench.soak.stack import JWT_SECRET, ROOT

RECORDING = ROOT / "bench" / "voice" / "recordings" / "sense_and_sensibility_01_austen_64kb-0880.wav"
REST_KINDS = {  # kind: weight in the REST mix
    "sessions": 10, "history": 10, "search": 6, "files": 6, "file upload": 1, "file download": 2,
    "reminders": 6, "devices": 6, "knowledge search": 3,
}
KNOWLEDGE_TEXT = """The soak test keeps the whole assistant busy for half an hour. Devices chat, people
search their history, upload files, and ask for reminders. The tea plantation in Hangzhou grows
Longjing green tea on terraced hills near the West Lake. Quarterly budget reviews happen in March,
June, September and December. The living-room air conditioner is set to 25 degrees in summer."""



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

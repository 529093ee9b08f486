"""The `thinking` plugin (gateway service): a scheduled job that, for each recently active person,
reflects over their recent conversations and memories and writes what it noticed, and what it
might suggest, to the memory service's thinking log (docs/memory.md, "Thinking and timeline").

Each run, every `interval` seconds of the job's clock:

1. nothing happens unless a language model is configured (the AI core's routing rule for
   `thinking`, models tagged `thinking`, else the chat chain; the offline agent never thinks);
2. one gateway instance runs at a time (a lock on the bus, shared by every instance with Redis);
3. the people whose sessions changed within `lookback_hours` (the CONVERSATIONS contract) are
   taken, most recently active first, skipping those with nothing new since their last thought
   and those who reached `max_per_user_per_day` entries today (UTC, counted by the memory
   service, so every instance and a restart agree);
4. for each: `background_thinking` (`started`) to the person's devices, their recent sessions'
   messages and highest-priority memories (MEMORY) to the AI core (purpose `thinking`, no
   tools), the answer written as an entry, then `thinking` (the thought) and
   `background_thinking` (`finished`, or `failed` with the error).

The clock is injected (`ThinkingPlugin(clock=...)`), so tests move time instead of waiting."""
from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

import marshmallow
from aiohttp import web
from marshmallow import fields, validate

from gateway.context import Context
from gateway.identity import require_user
from gateway.openapi import api_doc
from gateway.peers import PeerTimeout
from gateway.plugins import Plugin, Registrar
from plugins.ai_core.contract import AI_CORE, AiCore, AiCoreError
from plugins.sessions.contract import CONVERSATIONS, Conversations

from .client import MemoryTransport
from .contract import MEMORY, MemoryServiceError, MemoryStore
from .settings import ThinkingSettings

log = logging.getLogger("plugins.memory.thinking")

PURPOSE = "thinking"
OFFLINE_AGENT = "offline-agent"  # the AI core's answer without a model (plugins/ai_core/agent.py)
LOCK_KEY = "thinking:run"
CURSOR_KEY = "thinking:handled:"
# The thinking log is written with the same time limit as the memory client's default.
MEMORY_TIMEOUT = 10.0
STATUSES = ("started", "finished", "failed")
MAX_THOUGHT_CHARS = 2000  # each of what it noticed and what it suggests (the log takes up to 4000)

INSTRUCTIONS = """You are the person's assistant, thinking privately between conversations.
Below are your recent conversations with them and what you remember about them. Notice what
matters: a recurring topic, a need, a plan, a change, something to follow up. Then say what you
might suggest to them next time, if anything.

Answer with one JSON object and nothing else:
{"noticed": "<what you noticed, one to three sentences>", "suggestion": "<what you might suggest, or empty>"}
Write in the language the person writes in. If nothing is worth noting, answer {"noticed": "", "suggestion": ""}."""


# ---------------------------------------------------------------- the clock

class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


# ---------------------------------------------------------------- the frames (spec: ServerMessage)

class BackgroundThinkingFrame(marshmallow.Schema):
    msg_type = fields.String(required=True, validate=validate.Equal("thinking"))
    thinking_status = fields.String(required=True, validate=validate.OneOf(STATUSES), metadata={
        "description": "`started`, `finished` (a `thinking` frame with the thought came just before, unless "
                       "there was nothing worth noting) or `failed` (see `error`)."})
    message_id = fields.String(required=True, metadata={
        "description": "`thinking_<entry id>`, the same for every frame of one thought."})
    timestamp = fields.Integer(required=True, metadata={"description": "Milliseconds since the epoch."})
    error = fields.String(metadata={"description": "Why it failed (`failed` only)."})


# ---------------------------------------------------------------- one thought

@dataclass
class Thought:
    noticed: str
    suggestion: str


@dataclass
class Material:
    """What a thought reads about one person."""
    sessions: list[dict] = field(default_factory=list)      # {id, title, messages: [{role, content}]}
    memories: list[dict] = field(default_factory=list)

    def render(self, max_chars: int) -> str:
        memory_lines = [f"- [{m.get('category', 'other')}] {m['content']}" for m in self.memories]
        parts = ["What you remember about them:", *(memory_lines or ["(nothing yet)"]), ""]
        budget = max_chars - sum(len(line) + 1 for line in parts) - len(INSTRUCTIONS)
        conversations: list[str] = []
        for session in self.sessions:
            lines = [f"Conversation “{session.get('title') or session['id']}”:"]
            for message in session["messages"]:
                lines.append(f"{'Person' if message['role'] == 'user' else 'You'}: {message['content']}")
            # The newest messages are kept; older ones go first when the text is too long.
            while len(lines) > 1 and sum(len(line) + 1 for line in lines) > budget:
                del lines[1]
            if len(lines) > 1:
                conversations.append("\n".join(lines))
                budget -= sum(len(line) + 1 for line in lines)
            if budget <= 0:
                break
        return "\n".join(parts) + "\n" + "\n\n".join(conversations) + "\n\n" + INSTRUCTIONS


def parse_thought(text: str) -> Thought:
    """The model's JSON answer; a plain-text answer is taken as what it noticed."""
    cleaned = text.strip()
    found = re.search(r"\{.*\}", cleaned, re.DOTALL)
    if found:
        try:
            answer = json.loads(found.group(0))
        except ValueError:
            answer = None
        if isinstance(answer, dict):
            return Thought(str(answer.get("noticed") or "").strip()[:MAX_THOUGHT_CHARS],
                           str(answer.get("suggestion") or "").strip()[:MAX_THOUGHT_CHARS])
    return Thought(cleaned[:MAX_THOUGHT_CHARS], "")


class ThinkingFailed(Exception):
    pass


# ---------------------------------------------------------------- the job

class Thinker:
    def __init__(self, context: Context, settings: ThinkingSettings, clock: Clock):
        self.context = context
        self.settings = settings
        self.clock = clock
        self.thinking_log = MemoryTransport(context, PeerTimeout.from_config(context.config, total=MEMORY_TIMEOUT))
        self.instance = uuid.uuid4().hex

    @property
    def ai_core(self) -> AiCore:
        return self.context.contracts.require(AI_CORE)

    @property
    def conversations(self) -> Conversations:
        return self.context.contracts.require(CONVERSATIONS)

    @property
    def memories(self) -> MemoryStore | None:
        return self.context.contracts.get(MEMORY)

    async def loop(self, context: Context) -> None:
        while True:
            await self.clock.sleep(self.settings.interval)
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - one bad run must not end the job
                log.exception("a thinking run failed")

    # ------------------------------------------------------------ a run

    async def model_configured(self) -> bool:
        """Whether the AI core would answer `thinking` with a model (its rule, models tagged
        `thinking`, else the chat chain), not with the offline agent."""
        try:
            models = {m["id"]: m for m in await self.ai_core.models()}
            routes = {r["purpose"]: r for r in await self.ai_core.routes()}
            providers = {p["name"] for p in await self.ai_core.providers()}
        except AiCoreError as error:
            log.warning("thinking skipped: the AI core's models cannot be read (%s)", error)
            return False

        def usable(model_id: str) -> bool:
            model = models.get(model_id)
            return bool(model and model["enabled"] and model["provider"] in providers)

        for purpose in (PURPOSE, "chat"):
            if purpose in routes:
                chain = list(routes[purpose]["fallback_chain"])
            elif purpose == "chat":
                chain = [m["id"] for m in models.values() if "vision" not in m["tags"] or "chat" in m["tags"]]
            else:
                chain = [m["id"] for m in models.values() if purpose in m["tags"]]
            if any(usable(model_id) for model_id in chain):
                return True
        return False

    async def run_once(self) -> int:
        """One run; how many thoughts were written."""
        if not await self.model_configured():
            log.debug("thinking skipped: no language model is configured")
            return 0
        bus = self.context.bus
        lock_ttl = self.settings.timeout * 2 + 60
        if not await bus.set(LOCK_KEY, self.instance, ttl=lock_ttl, only_if_absent=True):
            log.info("thinking skipped: another gateway instance is thinking")
            return 0
        written = 0
        try:
            now = self.clock.now()
            since_ms = int((now - self.settings.lookback_hours * 3600) * 1000)
            day_start = datetime.fromtimestamp(now, timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
            day_start_ms = int(day_start.timestamp() * 1000)
            people = await self.conversations.active_users(since_ms, limit=self.settings.max_users_per_run)
            for person in people:
                await bus.renew_if(LOCK_KEY, self.instance, lock_ttl)
                try:
                    if await self.think_about(person["user_id"], int(person["last_active"]), since_ms, day_start_ms):
                        written += 1
                except MemoryServiceError as error:
                    log.warning("thinking about %s skipped: %s", person["user_id"], error)
        finally:
            await bus.delete_if(LOCK_KEY, self.instance)
        return written

    async def latest_entries(self, user_id: str, since_ms: int | None) -> dict:
        answer = await self.thinking_log.ask("GET", "/api/v1/thinking", params={
            "user_id": user_id, "since": since_ms, "limit": 1})
        if answer.status != 200:
            raise MemoryServiceError(f"the thinking log answered {answer.status}: {answer.body.get('error')}",
                                     status=answer.status)
        return answer.body

    async def think_about(self, user_id: str, last_active: int, since_ms: int, day_start_ms: int) -> bool:
        """Think about one person when something is new and today's bound allows; True when a
        thought was written."""
        today = await self.latest_entries(user_id, day_start_ms)
        if today["total"] >= self.settings.max_per_user_per_day:
            return False
        latest = today if today["entries"] else await self.latest_entries(user_id, None)
        handled = int(await self.context.bus.get(CURSOR_KEY + user_id) or 0)
        newest_seen = max([handled, *(entry["created_at"] for entry in latest["entries"])])
        if last_active <= newest_seen:
            return False
        cursor_ttl = self.settings.lookback_hours * 3600 + 86400
        material = await self.gather(user_id, max(since_ms, newest_seen))
        if not material.sessions:  # sessions touched without messages (cleared, say): nothing to think about
            await self.context.bus.set(CURSOR_KEY + user_id, str(last_active), ttl=cursor_ttl)
            return False
        entry_id = str(uuid.uuid4())
        message_id = f"thinking_{entry_id}"
        await self.push_state(user_id, message_id, "started")
        try:
            thought, model = await asyncio.wait_for(self.reflect(user_id, material), self.settings.timeout)
        except (ThinkingFailed, AiCoreError, asyncio.TimeoutError) as error:
            reason = str(error) or "the model did not answer in time"
            log.warning("thinking about %s failed: %s", user_id, reason)
            await self.push_state(user_id, message_id, "failed", error=reason)
            return False
        if not thought.noticed:
            await self.context.bus.set(CURSOR_KEY + user_id, str(last_active), ttl=cursor_ttl)
            await self.push_state(user_id, message_id, "finished")
            return False
        try:
            answer = await self.thinking_log.ask("POST", "/api/v1/thinking", body={
                "user_id": user_id, "id": entry_id, "kind": "reflection", "content": thought.noticed,
                "suggestion": thought.suggestion, "model": model,
                "source_session_ids": [session["id"] for session in material.sessions],
                "source_memory_ids": [memory["id"] for memory in material.memories if memory.get("id")]})
            if answer.status not in (200, 201):
                raise MemoryServiceError(f"the thinking log refused the entry ({answer.status}: "
                                         f"{answer.body.get('error')})", status=answer.status)
        except MemoryServiceError as error:  # not written: tried again next run
            await self.push_state(user_id, message_id, "failed", error=str(error))
            raise
        await self.context.bus.set(CURSOR_KEY + user_id, str(last_active), ttl=cursor_ttl)
        content = thought.noticed + (f"\n\n{thought.suggestion}" if thought.suggestion else "")
        await self.context.hub.send_to_user(user_id, {
            "type": "thinking", "role": "assistant", "msg_type": "thinking", "message_id": message_id,
            "thinking_status": "finished", "thinking_content": content, "timestamp": millis()})
        await self.push_state(user_id, message_id, "finished")
        return True

    async def push_state(self, user_id: str, message_id: str, status: str, error: str | None = None) -> None:
        frame: dict[str, Any] = {"type": "background_thinking", "msg_type": "thinking", "thinking_status": status,
                                 "message_id": message_id, "timestamp": millis()}
        if error:
            frame["error"] = error[:500]
        await self.context.hub.send_to_user(user_id, frame)

    async def gather(self, user_id: str, since_ms: int) -> Material:
        """The person's sessions changed since `since_ms` (their latest messages), and memories."""
        sessions = [s for s in await self.conversations.list_sessions(user_id) if s["updated_at"] >= since_ms]
        material = Material()
        for session in sessions[:self.settings.sessions_per_user]:
            messages = await self.conversations.recent_history(user_id, session["id"],
                                                               self.settings.messages_per_session)
            if messages:
                material.sessions.append({"id": session["id"], "title": session.get("title"), "messages": messages})
        if not material.sessions:
            return material
        memories = self.memories
        if memories is not None and self.settings.memories_per_user:
            try:
                material.memories = await memories.top(user_id, self.settings.memories_per_user)
            except MemoryServiceError as error:  # memories are a help, not a condition
                log.warning("thinking about %s without memories: %s", user_id, error)
        return material

    async def reflect(self, user_id: str, material: Material) -> tuple[Thought, str]:
        text, model, failed = "", "", ""
        async for event in self.ai_core.stream_chat({
                "user_id": user_id, "session_id": None, "text": material.render(self.settings.max_prompt_chars),
                "history": [], "purpose": PURPOSE, "use_tools": False}):
            if event["type"] == "delta":
                text += event["content"]
            elif event["type"] == "error":
                raise ThinkingFailed(f"the model failed: {event['error']}")
            elif event["type"] == "done":
                text, model = event["text"] or text, event["model"]
                failed = "; ".join(f"{f['model']} ({f['kind']}: {f['error']})" for f in event.get("fallbacks") or [])
                break
        if model == OFFLINE_AGENT or not model:
            raise ThinkingFailed(f"every model failed: {failed}" if failed else "no language model answered")
        return parse_thought(text), model


def millis() -> int:
    return int(time.time() * 1000)


class ThinkingStatus(marshmallow.Schema):
    model_configured = fields.Boolean(required=True, metadata={
        "description": "Whether a language model answers the `thinking` purpose (its rule, models tagged "
                       "`thinking`, else the chat chain). Without one no thought is ever written."})
    interval_seconds = fields.Float(required=True, metadata={"description": "Seconds between two runs."})
    message = fields.String(required=True, metadata={"description": "The state in plain words, for a person."})


THINKER_KEY: web.AppKey["Thinker"] = web.AppKey("thinking.thinker")
status_routes = web.RouteTableDef()


@status_routes.get("/api/v1/thinking-status", name="thinking.status")
@api_doc("Whether background thinking can run here (it needs a language model); any signed-in person may ask",
         responses={200: ThinkingStatus})
async def thinking_status(request: web.Request) -> web.Response:
    await require_user(request)
    thinker = request.config_dict[THINKER_KEY]
    configured = await thinker.model_configured()
    interval = float(thinker.settings.interval)
    message = (f"Background thinking runs every {interval / 60:g} minutes about recently active people."
               if configured else
               "Background thinking needs a language model, and none is configured for it: the assistant "
               "does not reflect on conversations until one is connected in the console's Model Config.")
    return web.json_response({"model_configured": configured, "interval_seconds": interval, "message": message})


class ThinkingPlugin(Plugin):
    name = "thinking"
    depends = ("ai_core_client", "sessions")
    optional_depends = ("memory_client", "chat")
    description = "Scheduled thinking about each recently active person, written to the thinking log"
    settings_class = ThinkingSettings

    def __init__(self, clock: Clock | None = None):
        self.clock: Clock = clock or SystemClock()

    def setup(self, registrar: Registrar[ThinkingSettings]) -> None:
        thinker = Thinker(registrar.context, registrar.settings, self.clock)
        registrar.ws_server_message("background_thinking", BackgroundThinkingFrame,
                                    "The thinking job started, finished or failed a thought about the person.")
        # The finished thought goes out as a `thinking` frame, declared by chat (its ThinkingFrame,
        # the background form: no turn_id, seq or session_id).
        registrar.job("think", thinker.loop)
        registrar.app_state(THINKER_KEY, thinker)
        registrar.routes(status_routes)


plugin = ThinkingPlugin()

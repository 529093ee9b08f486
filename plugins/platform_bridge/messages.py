"""One message from any platform, answered: who may talk, the commands (/start, /new,
/link), relaying the message into the gateway as the person's turn and the reply back, and the
message log. Messages of one chat are answered in order."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from dataclasses import dataclass
from typing import AsyncIterator

import aiopg

from gateway.context import Context
from gateway.peers import PeerFailed

from . import store
from .gateway_turns import CHAT_REFUSED, GatewayTurns, TurnOutcome
from .replies import DeliveryFailed, Replier
from .telegram import TelegramError
from .settings import BridgeSettings

log = logging.getLogger("plugins.platform_bridge")

PLATFORM_NAMES = {"telegram": "Telegram", "discord": "Discord", "webhook": "Webhook"}
REFUSAL = ("Sorry, I only talk to people I know. If you have an account, ask for a link code "
           "and send /link <code>.")
GREETING = "Hello! Send me a message and I will answer. /new starts a new conversation."
FAILED = "Sorry, I could not answer that just now. Please try again in a moment."
CHAT_NOT_ENABLED = ("Sorry, chatting with the assistant is not enabled for your account. "
                    "Ask the operator if you need it.")
# The gateway's answer for a person the rule of who may chat refuses (docs/chat.md).
CHAT_REFUSED_ERROR = CHAT_REFUSED


@dataclass
class Incoming:
    bot: dict
    chat_id: str
    platform_user_id: str
    text: str
    received: float  # time.monotonic() at arrival


class Messages:
    """Answers the messages the bridge receives, whatever their platform."""

    def __init__(self, context: Context, settings: BridgeSettings):
        self.context, self.settings = context, settings
        self.chat_locks: dict[tuple[str, str], tuple[asyncio.Lock, list[int]]] = {}  # lock, users
        self.gateway: GatewayTurns | None = None

    @property
    def db(self) -> aiopg.Pool:
        return self.context.db

    @contextlib.asynccontextmanager
    async def chat_lock(self, bot_id: str, chat_id: str) -> AsyncIterator[None]:
        """Messages of one chat are answered in order (an asyncio lock serves its waiters in
        order); the lock is forgotten once no message of the chat needs it."""
        key = (bot_id, chat_id)
        lock, users = self.chat_locks.setdefault(key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                self.chat_locks.pop(key, None)

    async def handle(self, incoming: Incoming, replier: Replier) -> None:
        bot, text = incoming.bot, incoming.text.strip()
        command, _, argument = text.partition(" ")
        command = command.split("@", 1)[0].lower() if command.startswith("/") else ""
        user_id = await store.user_for(self.db, bot["id"], incoming.platform_user_id)
        if command == "/link":
            await self.log_message(bot, "in", incoming.chat_id, incoming.platform_user_id, "/link ••••••", user_id,
                                   None)
            await self._link(incoming, replier, argument.strip())
            return
        await self.log_message(bot, "in", incoming.chat_id, incoming.platform_user_id, text, user_id, None)
        if user_id is None:
            await self.answer_plainly(bot, incoming.chat_id, incoming.platform_user_id, replier, REFUSAL,
                                      incoming.received, error="sender_not_allowed")
            return
        if command == "/start":
            await self.answer_plainly(bot, incoming.chat_id, incoming.platform_user_id, replier, GREETING,
                                      incoming.received, user_id=user_id)
            return
        if command == "/new":
            session_id = await store.session_for(self.db, bot["id"], incoming.chat_id, user_id, new=True)
            await self.answer_plainly(bot, incoming.chat_id, incoming.platform_user_id, replier,
                                      "Started a new conversation.", incoming.received, user_id=user_id,
                                      session_id=session_id)
            return
        session_id = await store.session_for(self.db, bot["id"], incoming.chat_id, user_id)
        await self._relay(incoming, replier, user_id, session_id, text)

    async def _relay(self, incoming: Incoming, replier: Replier, user_id: str, session_id: str, text: str) -> None:
        bot = incoming.bot
        assert self.gateway is not None, "the bridge relays only while its service runs"
        outcome = TurnOutcome()
        streamer = replier.streamer()
        error: str | None = None
        try:
            async for piece in self.gateway.turn(user_id=user_id, session_id=session_id, text=text,
                                                 platform=bot["platform"],
                                                 title=f"{PLATFORM_NAMES[bot['platform']]} · {bot['name']}",
                                                 outcome=outcome):
                await streamer.add(piece)
            await streamer.finish(outcome.text)
        except PeerFailed as failure:
            if failure.error_type == CHAT_REFUSED_ERROR:  # a short plain answer, no turn
                await self.answer_plainly(bot, incoming.chat_id, incoming.platform_user_id, replier,
                                          CHAT_NOT_ENABLED, incoming.received, user_id=user_id,
                                          session_id=session_id, error="chat_not_allowed")
                return
            error = failure.error_type
            log.warning("bot %s: the turn failed (%s)", bot["id"], failure.error_type)
            with contextlib.suppress(Exception):
                await replier.say(FAILED)
        except (TelegramError, DeliveryFailed) as failure:
            error = str(failure)
            log.warning("bot %s: the reply could not be delivered: %s", bot["id"], failure)
        await self.log_message(bot, "out", incoming.chat_id, incoming.platform_user_id, outcome.text, user_id,
                               session_id, latency=incoming.received, error=error)

    async def answer_plainly(self, bot: dict, chat_id: str, platform_user_id: str, replier: Replier, text: str,
                             received: float, *, user_id: str | None = None, session_id: str | None = None,
                             error: str | None = None) -> None:
        try:
            await replier.say(text)
        except (TelegramError, DeliveryFailed) as failure:
            error = str(failure)
        await self.log_message(bot, "out", chat_id, platform_user_id, text, user_id, session_id, latency=received,
                               error=error)

    async def _link(self, incoming: Incoming, replier: Replier, code: str) -> None:
        """A code is six digits: guessing is held off per sender (`link_failures_per_sender` a
        window, counted on the bus so every worker and instance counts together) and per code
        (burnt after `link_failures_per_code` wrong codes sent to the bot in its life)."""
        bot = incoming.bot
        user_id = None
        if not bot["allow_linking"]:
            answer, error = REFUSAL, "linking_disabled"
        else:
            # Counted before the check, so concurrent attempts cannot slip past the limit; a
            # right code clears the count.
            attempts_key = f"platform_bridge:link_attempts:{bot['id']}:{incoming.platform_user_id}"
            attempts, retry_after = await self.context.bus.incr(attempts_key, self.settings.link_failure_window)
            if attempts > self.settings.link_failures_per_sender:
                minutes = max(1, math.ceil(retry_after / 60))
                answer = (f"Too many wrong link codes. Try again in {minutes} minute{'s' if minutes != 1 else ''} "
                          "(ask for a new code if yours has expired).")
                error = "link_rate_limited"
            else:
                if code.isdigit() and len(code) == 6:
                    user_id = await store.redeem_link_code(self.db, bot["id"], code, incoming.platform_user_id,
                                                           self.settings.link_failures_per_code)
                if user_id is None:
                    answer, error = ("That code is not valid (codes work once, for a short time). Ask for a new one.",
                                     "invalid_link_code")
                else:
                    await self.context.bus.delete(attempts_key)
                    answer, error = f"Linked: you are talking to the assistant as {user_id}.", None
        await self.answer_plainly(bot, incoming.chat_id, incoming.platform_user_id, replier, answer,
                                  incoming.received, user_id=user_id, error=error)

    async def log_message(self, bot: dict, direction: str, chat_id: str, platform_user_id: str, text: str,
                          user_id: str | None, session_id: str | None, *, latency: float | None = None,
                          error: str | None = None) -> None:
        try:
            await store.log_message(
                self.db, bot["id"], self.settings.log_limit, direction=direction, chat_id=chat_id,
                platform_user_id=platform_user_id, user_id=user_id, session_id=session_id, text=text,
                latency_ms=round((time.monotonic() - latency) * 1000) if latency is not None else None, error=error)
        except Exception as failure:  # the log must never cost a reply
            log.warning("bot %s: the message log could not be written (%s)", bot["id"], type(failure).__name__)

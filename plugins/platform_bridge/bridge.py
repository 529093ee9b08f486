"""The bridge at work: who may talk, the commands, relaying a message into the gateway as the
person's turn and the reply back to the platform, Telegram's pollers, and the message log."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from dataclasses import dataclass
from typing import AsyncIterator, Awaitable

import aiohttp

from gateway.context import Context
from gateway.fetch import GuardedFetcher
from gateway.peers import PeerClient, PeerFailed, PeerTimeout

from . import store
from .discord import DiscordReplier
from .gateway_turns import CHAT_REFUSED, GatewayTurns, TurnOutcome
from .outgoing import post_reply
from .replies import CollectedReply, DeliveryFailed, Replier, Streamer
from .telegram import BotApi, StreamedMessage, TelegramError

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
VOICE_UNAVAILABLE = "Sorry, I cannot understand voice notes right now. Please type your message."
NO_SPEECH = "Sorry, I could not make out any words in that voice note."


@dataclass
class Incoming:
    bot: dict
    chat_id: str
    platform_user_id: str
    text: str
    received: float  # time.monotonic() at arrival


async def cancel_all(tasks: list[asyncio.Task], patience: float = 5.0) -> None:
    """Cancels `tasks` and waits for them, cancelling again while one runs on: a cancellation
    that lands as a timeout or a connection error is caught by the code it interrupts, and the
    task would then run on (and the service never stop). Bounded by `patience` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    pending = {task for task in tasks if not task.done()}
    while pending and loop.time() < deadline:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.5)
    if pending:
        log.warning("%d bridge task(s) did not stop within %g s", len(pending), patience)


class Bridge:
    def __init__(self, context: Context, settings: dict):
        self.context, self.settings = context, settings
        self.states: dict[str, tuple[str, str | None]] = {}
        self.pollers: dict[str, asyncio.Task] = {}
        self.tasks: set[asyncio.Task] = set()
        self.chat_locks: dict[tuple[str, str], tuple[asyncio.Lock, list[int]]] = {}  # lock, users
        self.gateway: GatewayTurns | None = None
        self.voice = PeerClient(context, "voice_service", service="voice service",
                                timeout=PeerTimeout.from_config(context.config, total=settings["transcribe_timeout"]))
        self.stopping = False

    @property
    def db(self):
        return self.context.db

    @property
    def http(self) -> aiohttp.ClientSession:
        return self.context.http

    # ------------------------------------------------------------ start, stop, status

    async def lifespan(self, context: Context):
        self.gateway = GatewayTurns(context, self.settings["reply_timeout"])
        for bot in await store.list_bots(self.db):
            await self._start(bot)
        try:
            yield
        finally:
            self.stopping = True  # a task cancelled inside a database call may fail instead
            await self._stop()

    async def _stop(self) -> None:
        """No new updates; the answers under way get `stop_timeout` seconds to finish (one cut
        off is not sent again after a restart: see store.pending_updates)."""
        await cancel_all(list(self.pollers.values()))
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=self.settings["stop_timeout"])
        await cancel_all(list(self.tasks))

    def status_of(self, bot: dict) -> dict:
        if not bot["enabled"]:
            return {"state": "stopped", "error": None}
        state, error = self.states.get(bot["id"], ("error" if bot["last_error"] else "running", bot["last_error"]))
        return {"state": state, "error": error}

    async def _set_state(self, bot_id: str, state: str, error: str | None = None) -> None:
        self.states[bot_id] = (state, error)
        with contextlib.suppress(Exception):
            await store.set_error(self.db, bot_id, error)

    async def bot_changed(self, bot_id: str) -> None:
        """Apply a bot's new configuration: stop what runs for it and start it again."""
        poller = self.pollers.pop(bot_id, None)
        if poller is not None:
            poller.remove_done_callback(self._done)  # cancelled inside a database call, it may fail instead
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await poller
        self.states.pop(bot_id, None)
        await store.set_error(self.db, bot_id, None)  # a new configuration is judged afresh
        bot = await store.get_bot(self.db, bot_id)
        if bot is not None:
            await self._start(bot)

    async def _start(self, bot: dict) -> None:
        if not bot["enabled"]:
            return
        if bot["platform"] == "telegram":
            if bot["config"].get("mode") == "webhook":
                for update in await store.pending_updates(self.db, bot["id"]):
                    self.spawn(self._telegram_update(bot, update))
            else:
                poller = asyncio.create_task(self._poll(bot), name=f"telegram-poll-{bot['id']}")
                poller.add_done_callback(self._done)
                self.pollers[bot["id"]] = poller

    def spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and not self.stopping:
            # Not the exception's text: a Telegram URL in it would carry the bot's token.
            log.error("a bridge task failed: %s", type(task.exception()).__name__)

    # ------------------------------------------------------------ Telegram

    def telegram_api(self, bot: dict) -> BotApi:
        return BotApi(self.http, self.settings["telegram_api_url"], str(bot["config"]["bot_token"]))

    async def _poll(self, bot: dict) -> None:
        """getUpdates from the stored offset, for as long as the bot is enabled."""
        api = self.telegram_api(bot)
        for update in await store.pending_updates(self.db, bot["id"]):
            self.spawn(self._telegram_update(bot, update))
        timeout = self.settings["poll_timeout"]
        while not self.stopping:
            offset = await store.offset_of(self.db, bot["id"])
            try:
                updates = await api.call("getUpdates", {"offset": offset, "timeout": timeout,
                                                        "allowed_updates": ["message"]}, timeout=timeout + 15)
            except TelegramError as error:
                if error.status in (401, 403, 404):  # the token is wrong or revoked: polling cannot help
                    await self._set_state(bot["id"], "error", str(error))
                    log.warning("telegram bot %s stopped: %s", bot["id"], error)
                    return
                await self._set_state(bot["id"], "waiting", str(error))
                await asyncio.sleep(error.retry_after if error.status == 429 and error.retry_after
                                    else self.settings["retry_delay"])
                continue
            if self.states.get(bot["id"], ("", None))[0] != "running":
                await self._set_state(bot["id"], "running")
            updates = [update for update in updates or [] if isinstance(update, dict)
                       and isinstance(update.get("update_id"), int)]
            # Stored, with the offset past them, before any is answered: see docs, "Telegram".
            await store.record_updates(self.db, bot["id"], updates)
            for update in updates:
                self.spawn(self._telegram_update(bot, update))

    async def telegram_update(self, bot: dict, update: dict) -> None:
        """An update from the webhook route."""
        if await store.record_update(self.db, bot["id"], update):
            self.spawn(self._telegram_update(bot, update))

    async def _telegram_update(self, bot: dict, update: dict) -> None:
        message = update.get("message") if isinstance(update.get("message"), dict) else None
        chat_id = str(((message or {}).get("chat") or {}).get("id") or "")
        async with self._chat_lock(bot["id"], chat_id):
            if not await store.claim_update(self.db, bot["id"], int(update["update_id"])):
                return
            try:
                if message and chat_id:
                    await self._telegram_message(bot, chat_id, message)
            finally:
                await store.finish_update(self.db, bot["id"], int(update["update_id"]))

    async def _telegram_message(self, bot: dict, chat_id: str, message: dict) -> None:
        received = time.monotonic()
        api = self.telegram_api(bot)
        sender = str((message.get("from") or {}).get("id") or chat_id)
        replier = TelegramReplier(api, chat_id, self.settings["edit_interval"], message.get("message_id"))
        text = message.get("text")
        voice = message.get("voice") or message.get("audio")
        if not isinstance(text, str) and isinstance(voice, dict) and voice.get("file_id"):
            user_id = await store.user_for(self.db, bot["id"], sender)
            if user_id is None:
                text = "[voice note]"  # refused below, without transcribing a stranger's audio
            else:
                transcript, problem = await self._transcribe(api, str(voice["file_id"]), user_id)
                if transcript is None:
                    await self._log(bot, "in", chat_id, sender, "[voice note]", None, None, error=problem)
                    await self._answer_plainly(bot, chat_id, sender, replier,
                                               VOICE_UNAVAILABLE if problem != "no_speech" else NO_SPEECH,
                                               received, error=problem)
                    return
                text = transcript
        if not isinstance(text, str) or not text.strip():
            return  # stickers, photos, joins: nothing to relay
        await self.handle(Incoming(bot, chat_id, sender, text, received), replier)

    async def _transcribe(self, api: BotApi, file_id: str, user_id: str) -> tuple[str | None, str | None]:
        """(transcript, None) or (None, why not)."""
        try:
            audio = await api.download(file_id, self.settings["max_voice_bytes"])
        except TelegramError as error:
            return None, f"voice note download failed: {error}"
        form = aiohttp.FormData()
        form.add_field("audio", audio, filename="voice.ogg", content_type="audio/ogg")
        form.add_field("format", "ogg")
        form.add_field("user_id", user_id)
        try:
            answer = await self.voice.request("POST", "/api/v1/transcribe", data=form)
        except PeerFailed as failure:
            return None, failure.error_type or "voice_service_unreachable"
        body = answer.json() or {}
        if answer.status == 200 and str(body.get("text") or "").strip():
            return str(body["text"]).strip(), None
        error_type = body.get("errorType")
        return None, "no_speech" if error_type in ("no_speech", None) and answer.status in (200, 422) \
            else str(error_type or f"voice service answered {answer.status}")

    # ------------------------------------------------------------ the generic webhook

    async def webhook_message(self, bot: dict, message: dict) -> None:
        chat_id = message["chat_id"] or message["user_id"]
        incoming = Incoming(bot, chat_id, message["user_id"], message["text"], time.monotonic())
        replier = WebhookReplier(self, bot, chat_id, message["user_id"], message["message_id"])

        async def run() -> None:
            async with self._chat_lock(bot["id"], chat_id):
                await self.handle(incoming, replier)

        self.spawn(run())

    # ------------------------------------------------------------ Discord

    def discord_command(self, bot: dict, interaction: dict, text: str, sender: str) -> None:
        """Answer a command through its follow-up webhook; the route has answered type 5."""
        chat_id = str(interaction.get("channel_id") or sender)
        replier = DiscordReplier(self.http, self.settings["discord_api_url"], str(bot["config"]["application_id"]),
                                 str(interaction.get("token") or ""))
        incoming = Incoming(bot, chat_id, sender, text, time.monotonic())

        async def run() -> None:
            async with self._chat_lock(bot["id"], chat_id):
                await self.handle(incoming, replier)

        self.spawn(run())

    # ------------------------------------------------------------ one message, any platform

    @contextlib.asynccontextmanager
    async def _chat_lock(self, bot_id: str, chat_id: str) -> AsyncIterator[None]:
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
            await self._log(bot, "in", incoming.chat_id, incoming.platform_user_id, "/link ••••••", user_id, None)
            await self._link(incoming, replier, argument.strip())
            return
        await self._log(bot, "in", incoming.chat_id, incoming.platform_user_id, text, user_id, None)
        if user_id is None:
            await self._answer_plainly(bot, incoming.chat_id, incoming.platform_user_id, replier, REFUSAL,
                                       incoming.received, error="sender_not_allowed")
            return
        if command == "/start":
            await self._answer_plainly(bot, incoming.chat_id, incoming.platform_user_id, replier, GREETING,
                                       incoming.received, user_id=user_id)
            return
        if command == "/new":
            session_id = await store.session_for(self.db, bot["id"], incoming.chat_id, user_id, new=True)
            await self._answer_plainly(bot, incoming.chat_id, incoming.platform_user_id, replier,
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
                await self._answer_plainly(bot, incoming.chat_id, incoming.platform_user_id, replier,
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
        await self._log(bot, "out", incoming.chat_id, incoming.platform_user_id, outcome.text, user_id, session_id,
                        latency=incoming.received, error=error)

    async def _answer_plainly(self, bot: dict, chat_id: str, platform_user_id: str, replier: Replier, text: str,
                              received: float, *, user_id: str | None = None, session_id: str | None = None,
                              error: str | None = None) -> None:
        try:
            await replier.say(text)
        except (TelegramError, DeliveryFailed) as failure:
            error = str(failure)
        await self._log(bot, "out", chat_id, platform_user_id, text, user_id, session_id, latency=received, error=error)

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
            attempts, retry_after = await self.context.bus.incr(attempts_key, self.settings["link_failure_window"])
            if attempts > self.settings["link_failures_per_sender"]:
                minutes = max(1, math.ceil(retry_after / 60))
                answer = (f"Too many wrong link codes. Try again in {minutes} minute{'s' if minutes != 1 else ''} "
                          "(ask for a new code if yours has expired).")
                error = "link_rate_limited"
            else:
                if code.isdigit() and len(code) == 6:
                    user_id = await store.redeem_link_code(self.db, bot["id"], code, incoming.platform_user_id,
                                                           self.settings["link_failures_per_code"])
                if user_id is None:
                    answer, error = ("That code is not valid (codes work once, for a short time). Ask for a new one.",
                                     "invalid_link_code")
                else:
                    await self.context.bus.delete(attempts_key)
                    answer, error = f"Linked: you are talking to the assistant as {user_id}.", None
        await self._answer_plainly(bot, incoming.chat_id, incoming.platform_user_id, replier, answer,
                                   incoming.received, user_id=user_id, error=error)

    async def message_user(self, user_id: str, text: str) -> list[dict]:
        """Send `text` to every platform account linked to `user_id` on an enabled bot (a fired
        reminder): Telegram in the private chat with the bot, the generic webhook to its
        outgoing URL. One entry per account, `error` null when the platform took it."""
        deliveries = []
        for account in await store.accounts_of(self.db, user_id):
            bot = await store.get_bot(self.db, account["bot_id"])
            if bot is None:
                continue
            chat_id = account["platform_user_id"]
            replier: Replier | None = None
            if bot["platform"] == "telegram":
                replier = TelegramReplier(self.telegram_api(bot), chat_id, self.settings["edit_interval"], None)
            elif bot["platform"] == "webhook":
                replier = WebhookReplier(self, bot, chat_id, chat_id, None)
            error = None
            if replier is None:
                # A Discord bot here only answers interactions; it has no way to start a conversation.
                error = "this platform's bots only answer; they cannot send a message first"
            else:
                try:
                    await replier.say(text)
                except (TelegramError, DeliveryFailed) as failure:
                    error = str(failure)
                await self._log(bot, "out", chat_id, chat_id, text, user_id, None, error=error)
            deliveries.append({"bot_id": bot["id"], "platform": bot["platform"], "platform_user_id": chat_id,
                               "error": error})
        return deliveries

    async def _log(self, bot: dict, direction: str, chat_id: str, platform_user_id: str, text: str,
                   user_id: str | None, session_id: str | None, *, latency: float | None = None,
                   error: str | None = None) -> None:
        try:
            await store.log_message(
                self.db, bot["id"], self.settings["log_limit"], direction=direction, chat_id=chat_id,
                platform_user_id=platform_user_id, user_id=user_id, session_id=session_id, text=text,
                latency_ms=round((time.monotonic() - latency) * 1000) if latency is not None else None, error=error)
        except Exception as failure:  # the log must never cost a reply
            log.warning("bot %s: the message log could not be written (%s)", bot["id"], type(failure).__name__)


class TelegramReplier:
    def __init__(self, api: BotApi, chat_id: str, interval: float, reply_to: object):
        self.api, self.chat_id, self.interval = api, chat_id, interval
        self.reply_to = reply_to if isinstance(reply_to, int) else None

    async def say(self, text: str) -> None:
        await self.api.send(self.chat_id, text, self.reply_to)

    def streamer(self) -> Streamer:
        return StreamedMessage(self.api, self.chat_id, self.interval, self.reply_to)


class WebhookReplier:
    """Posts the whole answer, signed, to the bot's outgoing URL."""

    def __init__(self, bridge: Bridge, bot: dict, chat_id: str, platform_user_id: str, reply_to: str | None):
        self.bridge, self.bot, self.chat_id = bridge, bot, chat_id
        self.platform_user_id, self.reply_to = platform_user_id, reply_to

    async def say(self, text: str) -> None:
        fetcher = GuardedFetcher.for_context(self.bridge.context)
        payload = {"bot_id": self.bot["id"], "chat_id": self.chat_id, "user_id": self.platform_user_id,
                   "text": text, "reply_to": self.reply_to}
        problem = await post_reply(fetcher, str(self.bot["config"]["outgoing_url"]),
                                   str(self.bot["config"]["signing_secret"]), payload)
        if problem:
            raise DeliveryFailed(problem)

    def streamer(self) -> Streamer:
        return CollectedReply(self.say)


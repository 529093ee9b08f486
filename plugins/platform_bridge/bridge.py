"""The bridge at work: its bots started and stopped, Telegram's pollers and updates (a voice note
transcribed by the voice service), the generic webhook's and Discord's messages handed to
messages.py, which answers them, and a message sent first to a person's linked accounts."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import AsyncIterator, Awaitable

import aiohttp
import aiopg

from gateway.context import Context
from gateway.jobs import JobGroup, cancel_all
from gateway.peers import PeerClient, PeerFailed, PeerTimeout

from . import store
from .discord import DiscordReplier
from .gateway_turns import GatewayTurns
from .messages import Incoming, Messages
from .outgoing import WebhookReplier
from .replies import DeliveryFailed, Replier
from .telegram import BotApi, TelegramError, TelegramReplier
from .settings import BridgeSettings

log = logging.getLogger("plugins.platform_bridge")

VOICE_UNAVAILABLE = "Sorry, I cannot understand voice notes right now. Please type your message."
NO_SPEECH = "Sorry, I could not make out any words in that voice note."


class Bridge:
    def __init__(self, context: Context, settings: BridgeSettings, pollers: JobGroup):
        self.context, self.settings = context, settings
        self.states: dict[str, tuple[str, str | None]] = {}
        # A Telegram poller per bot in polling mode, by bot id.
        self.pollers = pollers
        self.tasks: set[asyncio.Task] = set()
        self.messages = Messages(context, settings)
        self.voice = PeerClient(context, "voice_service", service="voice service",
                                timeout=PeerTimeout.from_config(context.config, total=settings.transcribe_timeout))
        self.stopping = False

    @property
    def db(self) -> aiopg.Pool:
        return self.context.db

    @property
    def http(self) -> aiohttp.ClientSession:
        return self.context.http

    # ------------------------------------------------------------ start, stop, status

    async def lifespan(self, context: Context) -> AsyncIterator[None]:
        self.messages.gateway = GatewayTurns(context, self.settings.reply_timeout)
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
        await self.pollers.close()
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=self.settings.stop_timeout)
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
        await self.pollers.stop(bot_id)  # cancelled inside a database call, it may fail: not logged
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
                self.pollers.start(bot["id"], self._poll(bot))

    def spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and not self.stopping:
            # Not the exception's text: a Telegram URL in it would carry the bot's token (the
            # pollers' job group is redacted for the same reason).
            log.error("a bridge task failed: %s", type(task.exception()).__name__)

    # ------------------------------------------------------------ Telegram

    def telegram_api(self, bot: dict) -> BotApi:
        return BotApi(self.http, self.settings.telegram_api_url, str(bot["config"]["bot_token"]))

    async def _poll(self, bot: dict) -> None:
        """getUpdates from the stored offset, for as long as the bot is enabled."""
        api = self.telegram_api(bot)
        for update in await store.pending_updates(self.db, bot["id"]):
            self.spawn(self._telegram_update(bot, update))
        timeout = self.settings.poll_timeout
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
                                    else self.settings.retry_delay)
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
        async with self.messages.chat_lock(bot["id"], chat_id):
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
        replier = TelegramReplier(api, chat_id, self.settings.edit_interval, message.get("message_id"))
        text = message.get("text")
        voice = message.get("voice") or message.get("audio")
        if not isinstance(text, str) and isinstance(voice, dict) and voice.get("file_id"):
            user_id = await store.user_for(self.db, bot["id"], sender)
            if user_id is None:
                text = "[voice note]"  # refused below, without transcribing a stranger's audio
            else:
                transcript, problem = await self._transcribe(api, str(voice["file_id"]), user_id)
                if transcript is None:
                    await self.messages.log_message(bot, "in", chat_id, sender, "[voice note]", None, None,
                                                    error=problem)
                    await self.messages.answer_plainly(bot, chat_id, sender, replier,
                                                       VOICE_UNAVAILABLE if problem != "no_speech" else NO_SPEECH,
                                                       received, error=problem)
                    return
                text = transcript
        if not isinstance(text, str) or not text.strip():
            return  # stickers, photos, joins: nothing to relay
        await self.messages.handle(Incoming(bot, chat_id, sender, text, received), replier)

    async def _transcribe(self, api: BotApi, file_id: str, user_id: str) -> tuple[str | None, str | None]:
        """(transcript, None) or (None, why not)."""
        try:
            audio = await api.download(file_id, self.settings.max_voice_bytes)
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
        replier = WebhookReplier(self.context, bot, chat_id, message["user_id"], message["message_id"])

        async def run() -> None:
            async with self.messages.chat_lock(bot["id"], chat_id):
                await self.messages.handle(incoming, replier)

        self.spawn(run())

    # ------------------------------------------------------------ Discord

    def discord_command(self, bot: dict, interaction: dict, text: str, sender: str) -> None:
        """Answer a command through its follow-up webhook; the route has answered type 5."""
        chat_id = str(interaction.get("channel_id") or sender)
        replier = DiscordReplier(self.http, self.settings.discord_api_url, str(bot["config"]["application_id"]),
                                 str(interaction.get("token") or ""))
        incoming = Incoming(bot, chat_id, sender, text, time.monotonic())

        async def run() -> None:
            async with self.messages.chat_lock(bot["id"], chat_id):
                await self.messages.handle(incoming, replier)

        self.spawn(run())

    # ------------------------------------------------------------ one message, any platform

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
                replier = TelegramReplier(self.telegram_api(bot), chat_id, self.settings.edit_interval, None)
            elif bot["platform"] == "webhook":
                replier = WebhookReplier(self.context, bot, chat_id, chat_id, None)
            error = None
            if replier is None:
                # A Discord bot here only answers interactions; it has no way to start a conversation.
                error = "this platform's bots only answer; they cannot send a message first"
            else:
                try:
                    await replier.say(text)
                except (TelegramError, DeliveryFailed) as failure:
                    error = str(failure)
                await self.messages.log_message(bot, "out", chat_id, chat_id, text, user_id, None, error=error)
            deliveries.append({"bot_id": bot["id"], "platform": bot["platform"], "platform_user_id": chat_id,
                               "error": error})
        return deliveries



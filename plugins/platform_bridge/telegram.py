"""Telegram's Bot API, spoken as Telegram documents it (https://core.telegram.org/bots/api):
`POST <root>/bot<token>/<method>` with a JSON body, answered `{"ok": true, "result": ...}` or
`{"ok": false, "error_code", "description", "parameters": {"retry_after"}}`; files from
`<root>/file/bot<token>/<file_path>`. The token is part of every URL, so no error text that
leaves this module carries a URL. A Telegram chat's replier is here too."""
from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from .replies import Streamer
from .store import mask

MAX_MESSAGE_CHARS = 4096
SEND_ATTEMPTS = 3


class TelegramError(Exception):
    """A refused call (`status` Telegram's error_code; 0 when Telegram could not be reached)."""

    def __init__(self, status: int, description: str, retry_after: float | None = None):
        super().__init__(description)
        self.status, self.description, self.retry_after = status, description, retry_after

    def __str__(self) -> str:
        return f"Telegram answered {self.status}: {self.description}" if self.status else self.description


class BotApi:
    def __init__(self, http: aiohttp.ClientSession, root: str, token: str):
        self.http, self.root, self.token = http, root.rstrip("/"), token

    def scrub(self, text: str) -> str:
        """`text` with the token masked: what may be logged or kept."""
        return text.replace(self.token, mask(self.token)) if self.token else text

    async def call(self, method: str, payload: dict, timeout: float = 30.0) -> Any:
        try:
            async with asyncio.timeout(timeout):
                async with self.http.post(f"{self.root}/bot{self.token}/{method}", json=payload) as response:
                    try:
                        answer = await response.json(content_type=None)
                    except ValueError:
                        answer = None
                    status = response.status
        except TimeoutError:
            raise TelegramError(0, f"Telegram did not answer {method} within {timeout:g}s") from None
        except aiohttp.ClientError as error:
            raise TelegramError(0, self.scrub(f"cannot reach Telegram ({type(error).__name__}: {error})")) from None
        if not isinstance(answer, dict):
            raise TelegramError(status, f"{method} did not answer JSON")
        if answer.get("ok") is True:
            return answer.get("result")
        parameters = answer.get("parameters")
        retry_after = parameters.get("retry_after") if isinstance(parameters, dict) else None
        raise TelegramError(int(answer.get("error_code") or status), self.scrub(str(answer.get("description") or "")),
                            float(retry_after) if isinstance(retry_after, (int, float)) else None)

    async def download(self, file_id: str, max_bytes: int) -> bytes:
        """A file by its id: `getFile`, then the file itself, at most `max_bytes`."""
        info = await self.call("getFile", {"file_id": file_id})
        path = str((info or {}).get("file_path") or "")
        if not path:
            raise TelegramError(400, "getFile gave no file_path")
        if int((info or {}).get("file_size") or 0) > max_bytes:
            raise TelegramError(413, f"the file is larger than {max_bytes} bytes")
        try:
            async with asyncio.timeout(60):
                async with self.http.get(f"{self.root}/file/bot{self.token}/{path}") as response:
                    if response.status != 200:
                        raise TelegramError(response.status, "the file could not be downloaded")
                    body = await response.content.read(max_bytes + 1)
        except TimeoutError:
            raise TelegramError(0, "the file download took too long") from None
        except aiohttp.ClientError as error:
            raise TelegramError(0, self.scrub(f"cannot download the file ({type(error).__name__})")) from None
        if len(body) > max_bytes:
            raise TelegramError(413, f"the file is larger than {max_bytes} bytes")
        return body

    async def send(self, chat_id: str, text: str, reply_to: int | None = None) -> int:
        """sendMessage, waiting out a 429's retry_after; the new message's id."""
        payload: dict = {"chat_id": chat_id, "text": text}
        if reply_to is not None:
            payload["reply_parameters"] = {"message_id": reply_to, "allow_sending_without_reply": True}
        for attempt in range(SEND_ATTEMPTS):
            try:
                result = await self.call("sendMessage", payload)
                return int(result["message_id"])
            except TelegramError as error:
                if error.status != 429 or attempt == SEND_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(error.retry_after or 1.0)
        raise AssertionError("unreachable")


class StreamedMessage:
    """A reply shown as it grows: sent once, then edited in place, at most once per `interval`
    seconds; a reply longer than one Telegram message goes on in the next."""

    def __init__(self, api: BotApi, chat_id: str, interval: float, reply_to: int | None = None):
        self.api, self.chat_id, self.interval, self.reply_to = api, chat_id, interval, reply_to
        self.text = ""
        self.start = 0            # where the current message's part of the text begins
        self.message_id: int | None = None
        self.shown = ""           # what the current message shows now
        self.last_edit = 0.0
        self.not_before = 0.0     # a 429 asked to wait until then

    async def add(self, piece: str) -> None:
        self.text += piece
        await self._show(final=False)

    async def finish(self, text: str) -> None:
        self.text = text or self.text
        await self._show(final=True)

    async def _show(self, *, final: bool) -> None:
        while len(self.text) - self.start > MAX_MESSAGE_CHARS:  # the current message is full
            part = self.text[self.start:self.start + MAX_MESSAGE_CHARS]
            await self._put(part, force=True)
            self.start += MAX_MESSAGE_CHARS
            self.message_id, self.shown = None, ""
        part = self.text[self.start:]
        if part.strip():
            await self._put(part, force=final)

    async def _put(self, part: str, *, force: bool) -> None:
        if part == self.shown:
            return
        if self.message_id is None:
            self.message_id = await self.api.send(self.chat_id, part, self.reply_to)
            self.shown, self.last_edit = part, time.monotonic()
            return
        now = time.monotonic()
        if not force and (now - self.last_edit < self.interval or now < self.not_before):
            return  # the next piece, or the end, carries this text
        if force:
            await asyncio.sleep(max(0.0, self.not_before - now, self.last_edit + self.interval - now))
        for _ in range(SEND_ATTEMPTS):
            try:
                await self.api.call("editMessageText", {"chat_id": self.chat_id, "message_id": self.message_id,
                                                        "text": part})
                break
            except TelegramError as error:
                if error.status == 400 and "not modified" in error.description:
                    break
                if error.status != 429:
                    raise
                self.not_before = time.monotonic() + (error.retry_after or 1.0)
                if not force:
                    return
                await asyncio.sleep(error.retry_after or 1.0)
        self.shown, self.last_edit = part, time.monotonic()


class TelegramReplier:
    """Answers in a Telegram chat, the reply streamed into one message edited as it grows."""

    def __init__(self, api: BotApi, chat_id: str, interval: float, reply_to: object):
        self.api, self.chat_id, self.interval = api, chat_id, interval
        self.reply_to = reply_to if isinstance(reply_to, int) else None

    async def say(self, text: str) -> None:
        await self.api.send(self.chat_id, text, self.reply_to)

    def streamer(self) -> Streamer:
        return StreamedMessage(self.api, self.chat_id, self.interval, self.reply_to)

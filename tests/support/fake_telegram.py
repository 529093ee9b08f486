"""A small Telegram Bot API on a loopback port, speaking the real wire protocol
(https://core.telegram.org/bots/api): `POST /bot<token>/<method>` with JSON, answered
`{"ok": true, "result": ...}` or `{"ok": false, "error_code", "description", "parameters"}`;
files at `GET /file/bot<token>/<file_path>`.

Methods: `getUpdates` (long poll: `offset` confirms every update below it, `timeout` seconds of
waiting when none is new), `sendMessage`, `editMessageText`, `getFile`. A test queues what
people send with `say(...)`/`voice(...)`, scripts refusals with `fail(method, status,
retry_after)`, and reads `chats[chat_id]` (the messages as they stand, edits applied), `calls`
(every call, in order) and `edits` (each editMessageText, with its time)."""
from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class Sent:
    message_id: int
    chat_id: str
    text: str
    reply_to: int | None = None
    versions: list[str] = field(default_factory=list)  # every text it showed, in order


class FakeTelegram:
    def __init__(self, token: str):
        self.token = token
        self.url = ""  # set by `serve`: the Bot API root
        self.updates: list[dict] = []
        self.next_update_id = 1000
        self.new_update = asyncio.Event()
        self.chats: dict[str, list[Sent]] = {}
        self.calls: list[tuple[str, dict]] = []
        self.edits: list[tuple[float, str, int, str]] = []
        self.failures: dict[str, list[tuple[int, float | None]]] = {}
        self.files: dict[str, bytes] = {}
        self.message_ids = itertools.count(1)
        self.polling = asyncio.Event()  # set while a getUpdates waits
        self.app = web.Application()
        self.app.router.add_post("/bot{token}/{method}", self.method)
        self.app.router.add_get("/file/bot{token}/{path:.+}", self.file)

    # ------------------------------------------------------------ what people do

    def say(self, chat_id: int, text: str, *, user_id: int | None = None) -> int:
        """A person sends `text` in a private chat (their user id is the chat's id by default)."""
        return self._add({"message": self._message(chat_id, user_id, text=text)})

    def voice(self, chat_id: int, audio: bytes, *, user_id: int | None = None) -> int:
        file_id = f"voice-{len(self.files) + 1}"
        self.files[file_id] = audio
        return self._add({"message": self._message(chat_id, user_id, voice={
            "file_id": file_id, "file_unique_id": file_id, "duration": 1, "mime_type": "audio/ogg",
            "file_size": len(audio)})})

    def _message(self, chat_id: int, user_id: int | None, **content) -> dict:
        sender = user_id if user_id is not None else chat_id
        return {"message_id": next(self.message_ids), "date": int(time.time()),
                "chat": {"id": chat_id, "type": "private", "first_name": "Person"},
                "from": {"id": sender, "is_bot": False, "first_name": "Person"}, **content}

    def _add(self, update: dict) -> int:
        update_id = self.next_update_id
        self.next_update_id += 1
        self.updates.append({"update_id": update_id, **update})
        self.new_update.set()
        return update_id

    def update(self, chat_id: int, text: str, *, user_id: int | None = None) -> dict:
        """An update as Telegram would post it to a webhook (not queued for getUpdates)."""
        update_id = self.next_update_id
        self.next_update_id += 1
        return {"update_id": update_id, "message": self._message(chat_id, user_id, text=text)}

    def fail(self, method: str, status: int, retry_after: float | None = None) -> None:
        """The next call of `method` is refused with `status` (429 with retry_after)."""
        self.failures.setdefault(method, []).append((status, retry_after))

    def texts(self, chat_id: int) -> list[str]:
        return [sent.text for sent in self.chats.get(str(chat_id), [])]

    async def wait_for_texts(self, chat_id: int, count: int, timeout: float = 15.0,
                             final: str | None = None) -> list[str]:
        """The chat's messages once there are `count` (and the last reads `final`, when given)."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    texts = self.texts(chat_id)
                    if len(texts) >= count and (final is None or texts[-1] == final):
                        return texts
                    await asyncio.sleep(0.02)
        except TimeoutError:
            raise AssertionError(f"chat {chat_id} shows {self.texts(chat_id)} after {timeout}s; "
                                 f"calls: {self.calls}") from None

    # ------------------------------------------------------------ the Bot API

    @staticmethod
    def answer(result) -> web.Response:
        return web.json_response({"ok": True, "result": result})

    @staticmethod
    def refuse(status: int, description: str, retry_after: float | None = None) -> web.Response:
        body: dict = {"ok": False, "error_code": status, "description": description}
        if retry_after is not None:
            body["parameters"] = {"retry_after": retry_after}
        return web.json_response(body, status=status)

    async def method(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return self.refuse(401, "Unauthorized")
        name = request.match_info["method"]
        body = await request.json() if request.can_read_body else {}
        self.calls.append((name, body))
        if self.failures.get(name):
            status, retry_after = self.failures[name].pop(0)
            return self.refuse(status, f"Too Many Requests: retry after {retry_after}" if status == 429
                               else "Bad Request", retry_after)
        handler = getattr(self, "api_" + name, None)
        if handler is None:
            return self.refuse(404, "Not Found: method not found")
        return await handler(body)

    async def api_getUpdates(self, body: dict) -> web.Response:
        offset = int(body.get("offset") or 0)
        self.updates = [update for update in self.updates if update["update_id"] >= offset]  # confirmed
        if not self.updates:
            self.new_update.clear()
            self.polling.set()
            try:
                await asyncio.wait_for(self.new_update.wait(), float(body.get("timeout") or 0))
            except TimeoutError:
                pass
            finally:
                self.polling.clear()
        return self.answer([update for update in self.updates if update["update_id"] >= offset])

    async def api_sendMessage(self, body: dict) -> web.Response:
        chat_id, text = str(body["chat_id"]), body.get("text") or ""
        if not text.strip():
            return self.refuse(400, "Bad Request: message text is empty")
        if len(text) > 4096:
            return self.refuse(400, "Bad Request: message is too long")
        reply_to = (body.get("reply_parameters") or {}).get("message_id")
        sent = Sent(next(self.message_ids), chat_id, text, reply_to, [text])
        self.chats.setdefault(chat_id, []).append(sent)
        return self.answer({"message_id": sent.message_id, "date": int(time.time()), "text": text,
                            "chat": {"id": int(chat_id), "type": "private"}})

    async def api_editMessageText(self, body: dict) -> web.Response:
        chat_id, text = str(body["chat_id"]), body.get("text") or ""
        sent = next((s for s in self.chats.get(chat_id, []) if s.message_id == body.get("message_id")), None)
        if sent is None:
            return self.refuse(400, "Bad Request: message to edit not found")
        if sent.text == text:
            return self.refuse(400, "Bad Request: message is not modified: specified new message content and "
                                    "reply markup are exactly the same as a current content and reply markup of "
                                    "the message")
        sent.text = text
        sent.versions.append(text)
        self.edits.append((time.monotonic(), chat_id, sent.message_id, text))
        return self.answer({"message_id": sent.message_id, "text": text, "chat": {"id": int(chat_id)}})

    async def api_getFile(self, body: dict) -> web.Response:
        file_id = str(body.get("file_id"))
        if file_id not in self.files:
            return self.refuse(400, "Bad Request: invalid file_id")
        return self.answer({"file_id": file_id, "file_unique_id": file_id, "file_size": len(self.files[file_id]),
                            "file_path": f"voice/{file_id}.oga"})

    async def file(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        file_id = request.match_info["path"].rpartition("/")[2].removesuffix(".oga")
        if file_id not in self.files:
            return web.Response(status=404)
        return web.Response(body=self.files[file_id], content_type="audio/ogg")


async def serve_fake_telegram(aiohttp_server, token: str) -> FakeTelegram:
    telegram = FakeTelegram(token)
    server = await aiohttp_server(telegram.app)
    telegram.url = f"http://127.0.0.1:{server.port}"
    return telegram

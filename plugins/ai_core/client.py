"""The one client of the AI core, for the services that call it (the gateway): the streaming
chat call, image descriptions and the model tables, all with the service credential.

One error: every failure is an `AiCoreError` (contract.py). One timeout policy: 10 s to
connect, then a read timeout per kind of call from `[plugins.ai_core_client]`."""
from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncGenerator, NamedTuple

import aiohttp
import orjson
import yarl

from gateway.sse import MAX_LINE, EventTooLarge, SseDecoder
from gateway.text import loads_utf8_safe

from .contract import AiCoreError, ChatEvent, ChatRequest, ImageDescription, StreamStop

CONNECT_TIMEOUT = 10.0
# The AI core takes a probe's own time limit to answer; the read waits a little longer.
PROBE_MARGIN = 5.0


class Target(NamedTuple):
    base_url: str
    stream_url: yarl.URL
    json_headers: dict[str, str]
    stream_headers: dict[str, str]


class AiCoreClient:
    def __init__(self, context, settings: dict):
        self.context = context
        self.chat_read_timeout = settings["chat_read_timeout"]
        self.vision_timeout = _timeout(settings["vision_timeout"])
        self.admin_read_timeout = settings["admin_timeout"]
        self._target: Target | None = None

    def target(self) -> Target:
        """The URLs, parsed once, and the headers of every call, built once (the configuration
        does not change while the service runs): a turn's request goes out a little sooner."""
        if self._target is None:
            base_url = self.context.peer_url("ai_core")
            headers = {**self.context.peer_headers(), "Content-Type": "application/json"}
            self._target = Target(base_url, yarl.URL(base_url + "/api/v1/chat/stream"), headers,
                                  {**headers, "Accept": "text/event-stream"})
        return self._target

    # ------------------------------------------------------------ the streaming chat call

    async def stream_chat(self, body: ChatRequest, stop: StreamStop | None = None) -> AsyncGenerator[ChatEvent, None]:
        """The AI core's events. `chat_read_timeout` bounds each silence: until the answer
        starts, then between two reads of its body (a `SilenceWatch`, not aiohttp's read
        timeout, which moves a timer for every piece of the body that arrives). `stop` wakes
        the read with `StreamStopped` (aiohttp's reader takes an exception from outside): the
        stream ends there and its connection is closed, which the AI core sees and stops the model."""
        try:
            target = self.target()
            loop = asyncio.get_running_loop()
            async with asyncio.timeout(self.chat_read_timeout):  # the answer's start
                response = await self.context.http.post(target.stream_url, data=encode_body(body),
                                                        headers=target.stream_headers, timeout=CONNECT_ONLY)
            async with response:
                if response.status != 200:
                    raise answer_error(response.status, await response.text())
                # The decoder fed here rather than through sse_data: one generator less per event
                # (this runs per delta of every reply).
                decoder = SseDecoder(errors="replace")
                content = response.content
                if stop is not None:
                    stop.on_request(lambda: content.set_exception(StreamStopped()))
                silence = SilenceWatch(loop, self.chat_read_timeout, content)
                try:
                    while True:
                        silence.waiting_since = loop.time()
                        try:
                            chunk = await content.readany()
                        except StreamStopped:
                            response.close()  # the AI core sees its caller go, and stops the model
                            return
                        silence.waiting_since = None
                        if not chunk:
                            break
                        for data in decoder.feed(chunk):
                            try:
                                event = loads_utf8_safe(data)
                            except ValueError:
                                raise AiCoreError("the AI core sent an unreadable event") from None
                            if isinstance(event, dict):
                                yield event  # type: ignore[misc]  # a dict as the AI core wrote it
                finally:
                    silence.stop()
        except (aiohttp.ClientError, asyncio.TimeoutError, RuntimeError) as error:  # RuntimeError: aiohttp's
            # "Connection closed." when the AI core closes the response while it is read
            raise self.unreachable(error) from None
        except EventTooLarge:  # one event larger than a reply may be (docs/chat.md, "Limits")
            raise AiCoreError(f"the AI core sent an event longer than {MAX_LINE} bytes",
                              error_type="reply_too_large") from None
        except ValueError as error:  # a stream that is not server-sent events
            raise AiCoreError(f"the AI core sent an unreadable stream: {error}") from None

    # ------------------------------------------------------------ images

    async def describe_image(self, image: str, *, prompt: str, user_id: str | None = None) -> ImageDescription:
        answer = await self.call("POST", "/api/v1/vision/describe",
                                 {"image": image, "prompt": prompt, "user_id": user_id}, self.vision_timeout)
        if not isinstance(answer, dict) or not isinstance(answer.get("description"), str):
            raise AiCoreError("the AI core's description has no text")
        return {"description": answer["description"], "model": str(answer.get("model") or "")}

    # ------------------------------------------------------------ the model tables

    async def providers(self) -> list[dict]:
        return (await self.call_models("GET", "/providers"))["providers"]

    async def save_provider(self, name: str, base_url: str, api_key: str | None = None) -> None:
        body = {"name": name, "base_url": base_url}
        if api_key is not None:
            body["api_key"] = api_key
        await self.call_models("POST", f"/providers/{name}", body)

    async def delete_provider(self, name: str) -> None:
        await self.call_models("DELETE", f"/providers/{name}")

    async def models(self) -> list[dict]:
        return (await self.call_models("GET", "/models"))["models"]

    async def save_model(self, model_id: str, fields: dict) -> None:
        await self.call_models("POST", f"/models/{model_id}", {**fields, "id": model_id})

    async def delete_model(self, model_id: str) -> None:
        await self.call_models("DELETE", f"/models/{model_id}")

    async def routes(self) -> list[dict]:
        return await self.call_models("GET", "/routing")

    async def save_route(self, purpose: str, fallback_chain: list[str], required: bool) -> None:
        await self.call_models("POST", f"/routing/{purpose}", {"fallback_chain": fallback_chain, "required": required})

    async def delete_route(self, purpose: str) -> None:
        await self.call_models("DELETE", f"/routing/{purpose}")

    async def probe(self, provider: str, *, url: str | None = None, method: str = "GET",
                    payload: dict | None = None, timeout: float) -> dict:
        body: dict[str, Any] = {"method": method, "timeout": timeout}
        if url is not None:
            body["url"] = url
        if payload is not None:
            body["json"] = payload
        return await self.call_models("POST", f"/providers/{provider}/probe", body,
                                      read_timeout=timeout + PROBE_MARGIN)

    async def call_models(self, method: str, path: str, body: Any = None,
                          read_timeout: float | None = None) -> Any:
        return await self.call(method, "/api/v1/models" + path, body,
                               _timeout(read_timeout or self.admin_read_timeout))

    # ------------------------------------------------------------ one JSON call

    async def call(self, method: str, path: str, body: Any, timeout: aiohttp.ClientTimeout) -> Any:
        """The AI core's decoded JSON answer."""
        target = self.target()
        try:
            async with self.context.http.request(
                    method, target.base_url + path, data=None if body is None else encode_body(body),
                    headers=target.json_headers, timeout=timeout) as response:
                raw = await response.read()
                status = response.status
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            raise self.unreachable(error) from None
        if status >= 400:
            raise answer_error(status, raw.decode("utf-8", "replace"))
        try:
            return loads_utf8_safe(raw)
        except ValueError:
            raise AiCoreError("the AI core answered something other than JSON") from None

    def unreachable(self, error: BaseException) -> AiCoreError:
        detail = str(error)
        return AiCoreError(f"the AI core cannot be reached or stopped answering ({error.__class__.__name__}"
                           f"{': ' + detail if detail else ''})", error_type="ai_core_unreachable",
                           hint=f"Check that the ai-core service runs at {self.target().base_url or '(unset)'} "
                                f"(AI_CORE_URL).")


def answer_error(status: int, text: str) -> AiCoreError:
    """An error answer of the AI core, passed on as it said it: its text, errorType, hint and status
    (a refused service credential is this service's fault, so 502 rather than 401)."""
    try:
        answer = json.loads(text)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and answer.get("error"):
        return AiCoreError(str(answer["error"]), error_type=str(answer.get("errorType") or "ai_core_failed"),
                           hint=answer.get("hint"), status=502 if status == 401 else status)
    detail = text.strip()[:500]
    return AiCoreError(f"the AI core answered {status}{': ' + detail if detail else ''}")


def encode_body(body: Any) -> bytes:
    """The request body; orjson writes a turn's history several times faster than json, which
    counts on the way to the first token. orjson refuses a lone surrogate (a client may send
    one escaped in JSON); json writes it escaped, as before."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body).encode()


def _timeout(read: float) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT, sock_read=read)


CONNECT_ONLY = aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT)


class StreamStopped(Exception):
    """Set on a chat stream's reader by its `StreamStop`: the read ends at once."""


class SilenceWatch:
    """Ends a stream's read once it has waited `limit` seconds for the next piece: the read
    raises aiohttp's `SocketTimeoutError`, as with aiohttp's own read timeout. The reader sets
    `waiting_since` (the loop's time) before each read and None after it, and one timer looks
    every `limit` seconds, where aiohttp's timeout moves a timer for every piece that arrives
    (dozens a second for each streamed reply)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: float, content: aiohttp.StreamReader):
        self.loop, self.limit, self.content = loop, limit, content
        self.waiting_since: float | None = None
        self._timer = loop.call_later(limit, self._look)

    def _look(self) -> None:
        waited = self.loop.time() - self.waiting_since if self.waiting_since is not None else 0.0
        if waited >= self.limit:
            self.content.set_exception(aiohttp.SocketTimeoutError("Timeout on reading data from socket"))
            return
        self._timer = self.loop.call_later(self.limit - waited, self._look)

    def stop(self) -> None:
        self._timer.cancel()

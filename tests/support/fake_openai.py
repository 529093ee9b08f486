"""One small OpenAI-compatible provider on a loopback port for every test that needs a language
model. It answers each way a real provider does, picked by the first segment of the path, so one
server serves several "providers" (`{url}/<behaviour>/v1`):

- `/<behaviour>/v1/chat/completions`, streamed (or one `chat.completion` when the request says
  `"stream": false`): any name not below answers "Hello from <model>."; `thinker` streams
  reasoning first; `tools` calls `get_current_time`, then answers with its result; `vision`
  describes the image it was sent (its size kept in `images_seen`); `caller` calls the client's
  function (`tool_choice`'s, else the first of `tools`) with `{"location": "Paris"}` sent in
  fragments, then answers "The tool said: <its result>."; any answer asked for
  `response_format` `json_object` is `{"greeting": "Hello from <model>."}`, and one asked for
  `stream_options.include_usage` ends with a usage chunk; `ratelimited` is 429,
  `broken` 500; `stalled` waits for `release`; `slow` streams the default answer word by word,
  `slow_delay` seconds (0.15) apart; `dies` drops the connection mid-answer;
  `replay-<name>` replays a captured stream byte for byte; `call-<tool>` calls the tool `<tool>`
  with the arguments `tool_arguments[<tool>]` ({} when none), then answers "The tool said: "
  and the tool's result as the model read it;
- model lists: `/live/v1/models` (OpenAI form; 401 unless the request carries `api_key`),
  `/ollama/api/tags` (Ollama form), `/moved/v1/models` (a redirect to the cloud metadata
  address), `/text/v1/models` (not JSON);
- `/files/pixel.png` (a PNG) and `/files/moved` (a redirect to the metadata address).

A request for a conversation's title (its system message is the `title` purpose's prompt,
plugins/sessions/titles.py) is answered `title_answer` by any behaviour that answers, after
`title_gate` is set when a test gives one.

Every request a route answers is kept in `requests`: `{path, behaviour, body, authorization}`."""
from __future__ import annotations

import asyncio
import base64
import io
import json
from pathlib import Path
from typing import Any

from aiohttp import web

CAPTURES = Path("/work/shared/eval/openai_sse")
if not CAPTURES.exists():
    CAPTURES = Path(__file__).resolve().parents[3] / "shared" / "eval" / "openai_sse"

PIXEL_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")
VISION_DESCRIPTION = ("A green meadow ", "under a pale blue sky.")
TITLE_PROMPT = "You name conversations"  # how the session_titles plugin's request begins
MODELS = [{"id": "gpt-small", "object": "model", "created": 1700000000, "owned_by": "fake"},
          {"id": "gpt-large", "object": "model", "created": 1700000001, "owned_by": "fake"}]


def chunk(model: str, delta: dict, finish_reason: str | None = None) -> bytes:
    payload = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


class FakeProvider:
    def __init__(self, api_key: str = ""):
        self.api_key = api_key
        self.url = ""  # set by `serve`
        self.port = 0
        self.requests: list[dict] = []
        self.images_seen: list[tuple[int, int]] = []
        self.release = asyncio.Event()
        self.slow_delay = 0.15
        self.title_answer = "Title: \"A chat with the fake model.\""
        self.title_gate: asyncio.Event | None = None
        self.tool_arguments: dict[str, dict] = {}
        self.app = web.Application()
        self.app.router.add_post("/{behaviour}/v1/chat/completions", self.completions)
        self.app.router.add_get("/live/v1/models", self.models)
        self.app.router.add_get("/ollama/api/tags", self.tags)
        self.app.router.add_get("/moved/v1/models", self.to_metadata)
        self.app.router.add_get("/text/v1/models", self.text)
        self.app.router.add_get("/files/pixel.png", self.pixel)
        self.app.router.add_get("/files/moved", self.to_metadata)

    async def record(self, request: web.Request) -> Any:
        body = await request.json() if request.can_read_body else None
        self.requests.append({"path": request.path, "behaviour": request.path.split("/")[1], "body": body,
                              "authorization": request.headers.get("Authorization")})
        return body

    # ------------------------------------------------------------ model lists and files

    async def models(self, request: web.Request) -> web.Response:
        await self.record(request)
        if self.api_key and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response({"error": {"message": "Incorrect API key provided",
                                                "type": "invalid_request_error"}}, status=401)
        return web.json_response({"object": "list", "data": MODELS})

    async def tags(self, request: web.Request) -> web.Response:
        await self.record(request)
        return web.json_response({"models": [{"name": "llama3:8b"}, {"name": "qwen2:7b"}]})

    async def text(self, request: web.Request) -> web.Response:
        await self.record(request)
        return web.Response(text="not json")

    async def to_metadata(self, request: web.Request) -> web.Response:
        await self.record(request)
        raise web.HTTPFound("http://169.254.169.254/latest/meta-data/")

    async def pixel(self, request: web.Request) -> web.Response:
        return web.Response(body=PIXEL_PNG, content_type="image/png")

    # ------------------------------------------------------------ chat completions

    async def completions(self, request: web.Request) -> web.StreamResponse:
        behaviour = request.match_info["behaviour"]
        body = await self.record(request)
        model = body["model"]
        if behaviour == "ratelimited":
            return web.json_response({"error": {"message": "Rate limit reached", "type": "requests"}}, status=429)
        if behaviour == "broken":
            return web.json_response({"error": {"message": "upstream exploded"}}, status=500)
        if behaviour == "stalled":
            try:
                await asyncio.wait_for(self.release.wait(), 10)
            except TimeoutError:
                pass
            return web.json_response({"error": "too late"}, status=504)
        if body.get("stream") is False:
            return web.json_response({
                "id": "chatcmpl-fake", "object": "chat.completion", "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": f"Hello from {model}."},
                             "finish_reason": "stop"}]})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if behaviour.startswith("replay-"):
            await response.write((CAPTURES / f"{behaviour[len('replay-'):]}.sse").read_bytes())
            await response.write_eof()
            return response
        if behaviour == "dies":
            await response.write(chunk(model, {"role": "assistant", "content": "Partial "}))
            await response.write(chunk(model, {"content": "answer"}))
            await asyncio.sleep(0.05)
            request.transport.close()  # the connection drops before the answer is finished
            return response
        if behaviour == "tools" and not any(m.get("role") == "tool" for m in body["messages"]):
            # The arguments arrive in fragments, as real providers send them.
            await response.write(chunk(model, {"role": "assistant", "content": None, "tool_calls": [
                {"index": 0, "id": "call_time1", "type": "function",
                 "function": {"name": "get_current_time", "arguments": ""}}]}))
            for fragment in ['{"time', 'zone": "Asia/', 'Shanghai"}']:
                await response.write(chunk(model, {"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]}))
            await response.write(chunk(model, {}, "tool_calls"))
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
            return response
        if behaviour.startswith("call-") and not any(m.get("role") == "tool" for m in body["messages"]):
            name = behaviour[len("call-"):]
            await response.write(chunk(model, {"role": "assistant", "content": None, "tool_calls": [
                {"index": 0, "id": "call_named1", "type": "function", "function": {
                    "name": name, "arguments": json.dumps(self.tool_arguments.get(name, {}))}}]}))
            await response.write(chunk(model, {}, "tool_calls"))
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
            return response
        if behaviour == "caller" and body.get("tools") and not any(m.get("role") == "tool" for m in body["messages"]):
            await self.call_client_function(response, model, body)
            return response
        if behaviour == "vision":
            self.images_seen.append(self.image_size(body))
            pieces = list(VISION_DESCRIPTION)
        else:
            if behaviour.startswith("call-"):
                text = "The tool said: " + [m for m in body["messages"] if m.get("role") == "tool"][-1]["content"]
            elif behaviour == "tools":
                result = json.loads([m for m in body["messages"] if m.get("role") == "tool"][-1]["content"])
                text = f"In Shanghai it is {result['time']}."
            elif behaviour == "thinker":
                await response.write(chunk(model, {"role": "assistant", "reasoning_content": "Let me think."}))
                text = "Thought it through."
            elif behaviour == "caller":
                result = [m for m in body["messages"] if m.get("role") == "tool"][-1]["content"]
                text = f"The tool said: {result}."
            elif (body.get("response_format") or {}).get("type") == "json_object":
                text = json.dumps({"greeting": f"Hello from {model}."})
            elif self.asks_title(body):
                if self.title_gate is not None:
                    await asyncio.wait_for(self.title_gate.wait(), 20)
                text = self.title_answer
            else:
                text = f"Hello from {model}."
            pieces = [word + (" " if not word.endswith(".") else "") for word in text.split(" ")]
        await response.write(chunk(model, {"role": "assistant", "content": ""}))
        for piece in pieces:
            if behaviour == "slow":
                await asyncio.sleep(self.slow_delay)
            await response.write(chunk(model, {"content": piece}))
        await response.write(chunk(model, {}, "stop"))
        await self.finish(response, model, body)
        return response

    async def call_client_function(self, response: web.StreamResponse, model: str, body: dict) -> None:
        choice = body.get("tool_choice")
        name = (choice["function"]["name"] if isinstance(choice, dict)
                else body["tools"][0]["function"]["name"])
        await response.write(chunk(model, {"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": "call_client1", "type": "function", "function": {"name": name, "arguments": ""}}]}))
        for fragment in ['{"loca', 'tion": ', '"Paris"}']:
            await response.write(chunk(model, {"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]}))
        await response.write(chunk(model, {}, "tool_calls"))
        await self.finish(response, model, body)

    @staticmethod
    async def finish(response: web.StreamResponse, model: str, body: dict) -> None:
        if (body.get("stream_options") or {}).get("include_usage"):
            await response.write(b"data: " + json.dumps({
                "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": model,
                "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}}).encode()
                + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()

    @staticmethod
    def asks_title(body: dict) -> bool:
        first = body["messages"][0]
        return first.get("role") == "system" and str(first.get("content", "")).startswith(TITLE_PROMPT)

    @staticmethod
    def image_size(body: dict) -> tuple[int, int]:
        from PIL import Image

        parts = body["messages"][-1]["content"]
        image_url = next(part["image_url"]["url"] for part in parts if part["type"] == "image_url")
        with Image.open(io.BytesIO(base64.b64decode(image_url.partition(",")[2]))) as image:
            return image.size


async def serve_fake_provider(aiohttp_server, api_key: str = "") -> FakeProvider:
    """A FakeProvider listening on a loopback port; `url` is its root, without a trailing slash."""
    provider = FakeProvider(api_key)
    server = await aiohttp_server(provider.app)
    provider.url = f"http://127.0.0.1:{server.port}"
    provider.port = server.port
    return provider


async def route_to_model(ai_core_url: str, model_url: str, headers: dict, name: str = "scripted", *,
                         purposes: tuple[str, ...] = ("chat",)) -> None:
    """Make the OpenAI-compatible server at `model_url` (its `/v1` root) the AI core's provider
    `name` with one model `<name>-model`, the only one in the fallback chain of each purpose, as
    an administrator would on the Models page. `headers`: the service credential."""
    import aiohttp

    steps = [(f"/api/v1/models/providers/{name}", {"base_url": model_url, "api_key": "key"}),
             (f"/api/v1/models/models/{name}-model", {"name": name, "provider": name, "tags": list(purposes)})]
    steps += [(f"/api/v1/models/routing/{purpose}", {"fallback_chain": [f"{name}-model"], "required": True})
              for purpose in purposes]
    async with aiohttp.ClientSession(headers=headers) as session:
        for path, body in steps:
            async with session.post(ai_core_url.rstrip("/") + path, json=body) as response:
                assert response.status == 200, await response.text()

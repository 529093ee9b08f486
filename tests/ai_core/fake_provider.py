"""A small OpenAI-compatible server on a loopback port that can answer each way a real
provider does: a streamed reply, a streamed tool call, 429, 500, a stall, a stream that dies
mid-answer, and byte-for-byte replays of captured streams. Each behaviour is a path prefix,
so one server serves several "providers": `{url}/<behaviour>/v1`."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

from aiohttp import web

CAPTURES = Path("/work/shared/eval/openai_sse")
if not CAPTURES.exists():
    CAPTURES = Path(__file__).resolve().parents[3] / "shared" / "eval" / "openai_sse"


PIXEL_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


def chunk(model: str, delta: dict, finish_reason: str | None = None) -> bytes:
    payload = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


class FakeProvider:
    def __init__(self):
        self.requests: list[dict] = []  # (behaviour, body) of every call, in order
        self.release = asyncio.Event()
        self.app = web.Application()
        self.app.router.add_post("/{behaviour}/v1/chat/completions", self.completions)
        self.app.router.add_get("/files/pixel.png", self.pixel)
        self.app.router.add_get("/files/moved", self.moved)

    async def pixel(self, request: web.Request) -> web.Response:
        return web.Response(body=PIXEL_PNG, content_type="image/png")

    async def moved(self, request: web.Request) -> web.Response:
        raise web.HTTPFound("http://169.254.169.254/latest/meta-data")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        behaviour = request.match_info["behaviour"]
        body = await request.json()
        self.requests.append({"behaviour": behaviour, "body": body,
                              "authorization": request.headers.get("Authorization")})
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
        if behaviour == "tools":
            result = json.loads([m for m in body["messages"] if m.get("role") == "tool"][-1]["content"])
            text = f"In Shanghai it is {result['time']}."
        elif behaviour == "thinker":
            await response.write(chunk(model, {"role": "assistant", "reasoning_content": "Let me think."}))
            text = "Thought it through."
        else:
            text = f"Hello from {model}."
        await response.write(chunk(model, {"role": "assistant", "content": ""}))
        for word in text.split(" "):
            await response.write(chunk(model, {"content": word + (" " if not word.endswith(".") else "")}))
        await response.write(chunk(model, {}, "stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

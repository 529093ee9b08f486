"""The benches' stub model: an OpenAI-compatible server (`/v1/chat/completions`, `/v1/models`)
that streams a fixed reply, run in a process of its own so that its CPU is not the load
generator's. Each bench says what it streams (`StubReply`): the soak a few pieces 30 ms apart,
like a model; the AI core's bench 25 one-word chunks at once, so that what it measures is the
doors in front of the model."""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class StubReply:
    """`pieces`: the streamed reply's content, one chunk each, `pause` seconds before each;
    `whole`: the content of a reply not streamed (session titles, tool decisions); `model`: the
    model's name in the answers and in `/v1/models`; `id`: the completions' id."""
    pieces: tuple[str, ...]
    whole: str
    model: str
    pause: float = 0.0
    id: str = "chatcmpl-stub"
    usage: tuple[int, int] = (10, 2)  # prompt and completion tokens of a reply not streamed


def serve_stub_model(port: int, reply: StubReply) -> None:
    """Serve `reply` on 127.0.0.1:`port` until the process is stopped."""
    from aiohttp import web

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return b"data: " + json.dumps({"id": reply.id, "object": "chat.completion.chunk", "created": 1,
                                       "model": reply.model, "choices": [
                                           {"index": 0, "delta": delta, "finish_reason": finish}]}).encode() + b"\n\n"

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not body.get("stream"):
            prompt, completion = reply.usage
            return web.json_response({"id": reply.id, "object": "chat.completion", "created": 1, "model": reply.model,
                                      "choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant", "content": reply.whole}}],
                                      "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                                "total_tokens": prompt + completion}})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(chunk({"role": "assistant", "content": ""}))
        for piece in reply.pieces:
            if reply.pause:
                await asyncio.sleep(reply.pause)
            await response.write(chunk({"content": piece}))
        await response.write(chunk({}, "stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": reply.model, "object": "model"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/v1/models", models)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)

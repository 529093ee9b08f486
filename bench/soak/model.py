"""The soak's stub model, in a process of its own so that its CPU is not the load generator's:
an OpenAI-compatible server whose reply streams like a model's."""
from __future__ import annotations

import asyncio
import json

REPLY = "Of course. Here is a short answer, streamed in a few pieces like a model would do it."


def serve_model(port: int) -> None:
    """An OpenAI-compatible `/v1/chat/completions`: REPLY in pieces 30 ms apart when streamed,
    whole otherwise (session titles, tool decisions)."""
    from aiohttp import web

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return b"data: " + json.dumps({"id": "soak", "object": "chat.completion.chunk", "created": 1,
                                       "model": "soak-model", "choices": [
                                           {"index": 0, "delta": delta, "finish_reason": finish}]}).encode() + b"\n\n"

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not body.get("stream"):
            return web.json_response({"id": "soak", "object": "chat.completion", "created": 1, "model": "soak-model",
                                      "choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant", "content": "Soak chat"}}],
                                      "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(chunk({"role": "assistant", "content": ""}))
        words = REPLY.split(" ")
        for start in range(0, len(words), 4):
            await asyncio.sleep(0.03)
            await response.write(chunk({"content": " ".join(words[start:start + 4]) + " "}))
        await response.write(chunk({}, "stop"))
        await response.write(b"data: [DONE]\n\n")
        return response

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "soak-model", "object": "model"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/v1/models", models)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)

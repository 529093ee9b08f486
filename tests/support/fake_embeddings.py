"""An OpenAI-compatible `POST /v1/embeddings` on a loopback port: deterministic vectors from a
hash of each text, items answered out of order (as the wire format allows), every request
recorded; `behaviour` makes it fail the ways a real provider does."""
from __future__ import annotations

import hashlib

from aiohttp import web


def fake_vector(text: str, dimension: int) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [digest[i % len(digest)] - 128.0 for i in range(dimension)]


class EmbeddingsServer:
    """An OpenAI-compatible `/v1/embeddings`, answering data items out of order as allowed."""

    def __init__(self, dimension: int = 8, api_key: str = "sk-test"):
        self.dimension = dimension
        self.api_key = api_key
        self.requests: list[dict] = []
        self.behaviour = "ok"
        self.url = ""

    async def embeddings(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response({"error": {"message": "Incorrect API key", "type": "invalid_request_error"}},
                                     status=401)
        body = await request.json()
        self.requests.append(body)
        if self.behaviour == "broken":
            return web.json_response({"error": {"message": "overloaded", "type": "server_error"}}, status=500)
        if self.behaviour == "not-json":
            return web.Response(text="<html>gateway timeout</html>", content_type="text/html")
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if self.behaviour == "short":
            texts = texts[:-1]
        data = [{"object": "embedding", "index": i, "embedding": fake_vector(text, self.dimension)}
                for i, text in enumerate(texts)]
        return web.json_response({"object": "list", "data": list(reversed(data)), "model": body["model"],
                                  "usage": {"prompt_tokens": 3, "total_tokens": 3}})

    def texts(self) -> list[str]:
        """Every text embedded so far, in order."""
        return [text for body in self.requests
                for text in (body["input"] if isinstance(body["input"], list) else [body["input"]])]


async def serve_embeddings(aiohttp_server, **options) -> EmbeddingsServer:
    fake = EmbeddingsServer(**options)
    app = web.Application()
    app.router.add_post("/v1/embeddings", fake.embeddings)
    server = await aiohttp_server(app)
    fake.url = f"http://127.0.0.1:{server.port}/v1"
    return fake

"""Discord's interaction webhooks on a loopback port, as Discord's API answers them
(https://discord.com/developers/docs/interactions/receiving-and-responding): `PATCH
/webhooks/{application_id}/{interaction_token}/messages/@original` edits the deferred answer
(200 with the message). Each edit is kept in `edits` as (application_id, token, body)."""
from __future__ import annotations

import asyncio

from aiohttp import web


class FakeDiscord:
    def __init__(self) -> None:
        self.url = ""
        self.edits: list[tuple[str, str, dict]] = []
        self.edited = asyncio.Event()
        self.app = web.Application()
        self.app.router.add_patch("/webhooks/{application_id}/{token}/messages/@original", self.edit_original)

    async def edit_original(self, request: web.Request) -> web.Response:
        body = await request.json()
        if not isinstance(body, dict) or len(str(body.get("content") or "")) > 2000:
            return web.json_response({"message": "Invalid Form Body", "code": 50035}, status=400)
        self.edits.append((request.match_info["application_id"], request.match_info["token"], body))
        self.edited.set()
        return web.json_response({"id": "1", "type": 0, "content": body.get("content", ""),
                                  "channel_id": "41771983423143937"})


async def serve_fake_discord(aiohttp_server) -> FakeDiscord:
    discord = FakeDiscord()
    server = await aiohttp_server(discord.app)
    discord.url = f"http://127.0.0.1:{server.port}"
    return discord

"""A caller that closes a turn's stream mid-reply (a person stopped it): the AI core stops
reading the model, logs it as a normal end, not an error, and keeps answering.

Served as `gateway serve` serves it: aiohttp's test server cancels a handler whose client went
away (`handler_cancellation=True`), which production does not; there the handler learns of it
at its next write, and that path is the one this test takes."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from gateway.app import create_app
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import tokens_plugin
from tests.ai_core.conftest import ALICE, OPERATOR_SETTINGS, configure, read_events


class ServedAsInProduction(TestServer):
    async def _make_runner(self, **kwargs: Any) -> web.AppRunner:
        return web.AppRunner(self.app, **{**kwargs, "handler_cancellation": False})


async def test_a_stream_its_caller_closes_stops_the_model_without_an_error(make_config, database_url, ai_settings,
                                                                           provider, caplog):
    caplog.set_level(logging.INFO)
    config = make_config({"database.url": database_url, "plugins.ai_core": ai_settings, **OPERATOR_SETTINGS})
    async with TestClient(ServedAsInProduction(create_app("ai-core", config,
                                                          plugins=[tokens_plugin, ai_core_plugin]))) as ai_core:
        await configure(ai_core, provider, {"slowly": "slow"}, chain=["slowly"])
        response = await ai_core.post("/api/v1/chat/stream", headers=ALICE,
                                      json={"text": "Tell me", "session_id": "s"})
        assert response.status == 200
        while b"content" not in await response.content.readline():  # the model has begun
            pass
        response.close()
        loop = asyncio.get_running_loop()
        started_at = loop.time()
        while not any("the caller closed the stream" in record.getMessage() for record in caplog.records):
            assert loop.time() - started_at < 10, "the AI core never noticed its caller had gone"
            await asyncio.sleep(0.05)
        errors = [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]
        assert not errors, errors
        # The next turn is answered as usual.
        events = await read_events(await ai_core.post("/api/v1/chat/stream", headers=ALICE,
                                                      json={"text": "Again", "session_id": "s"}))
        assert events[-1]["type"] == "done" and events[-1]["finish_reason"] == "stop"

"""The console's AsyncAPI document (`GET /api/v1/asyncapi.json`) is valid AsyncAPI 3.0 and every
push of a real start and stop of a supervised service, and of the speech-recognition log, fits
the payload documented for its `type`."""
from __future__ import annotations

import asyncio

import pytest

from console.app import create_console_app
from console.typedefs import STT_LOG
from tests.support.asyncapi import FrameChecker, validate_document


@pytest.mark.slow
async def test_every_push_fits_the_documented_schema(aiohttp_client, service_table, make_config):
    specs = service_table([{"id": "alpha", "name": "Alpha"}])
    app = create_console_app(make_config({"console.stop_timeout": 5}), specs=specs)
    client = await aiohttp_client(app)
    response = await client.get("/api/v1/asyncapi.json")
    assert response.status == 200
    document = await response.json()
    validate_document(document)
    channel = document["channels"]["ws"]
    assert channel["address"] == "/ws" and "security" not in document["operations"]["ws.send"]  # loopback
    assert "ws.receive" not in document["operations"]  # push only
    checker = FrameChecker(document)
    pushes: list[dict] = []
    socket = await client.ws_connect("/ws")
    try:
        assert (await client.post("/api/services/start-all")).status == 200
        app[STT_LOG].add("turn on the light", 123.456, engine="test")
        assert (await client.post("/api/services/stop-all")).status == 200

        async def collect() -> None:
            while not {("log", "service"), ("log", "console"), ("status", "stopped"), ("stt-log", None)} <= {
                    (p["type"], p.get("source") or (p.get("status") or {}).get("status")) for p in pushes}:
                pushes.append(await socket.receive_json())
        await asyncio.wait_for(collect(), 20)
    finally:
        await socket.close()
    for push in pushes:
        checker.check(push)
    assert set(checker.seen) == {"log", "status", "stt-log"}


async def test_a_console_that_asks_a_credential_documents_it(aiohttp_client, service_table, make_config):
    app = create_console_app(make_config({"console.token": "operator-token"}), host="0.0.0.0",
                             specs=service_table([{"id": "alpha"}]))
    client = await aiohttp_client(app)
    assert (await client.get("/api/v1/asyncapi.json")).status == 401
    response = await client.get("/api/v1/asyncapi.json", headers={"Authorization": "Bearer operator-token"})
    document = await response.json()
    validate_document(document)
    assert document["operations"]["ws.send"]["security"] == [
        {"$ref": f"#/components/securitySchemes/{name}"} for name in ("bearer", "tokenQuery", "basic")]

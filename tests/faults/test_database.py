"""The embedded PostgreSQL's postmaster killed in the middle of a reply."""
from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

from gateway.app import create_app
from gateway.database import fetch_value
from gateway.embedded_database import embedded_status, restart_embedded
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.auth import tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.files import files_plugin
from plugins.sessions import plugin as sessions_plugin
from plugins.sessions.contract import CONVERSATIONS
from tests.chat.conftest import ADMIN, context_of, eventually, receive_until, token_for
from tests.faults.conftest import RECOVERED_WITHIN, TOLD_WITHIN, assert_cut_off_cleanly, until_reply_ends

pytestmark = pytest.mark.slow


@pytest.fixture
async def gateway_on_embedded_database(ai_core_url, aiohttp_client, make_config, chat_settings, fault_settings):
    """The gateway on an embedded PostgreSQL of its own, which it owns: the server the other
    tests share is not the one killed here (the AI core keeps that one). DATA_DIR is made as
    tests/support/servers.py makes the shared server's: run as root, the server runs as another
    user, which must reach it (pytest keeps its own temporary directories owner-only)."""
    data_dir = Path(tempfile.mkdtemp(prefix="gateway-fault-pg-"))
    config = make_config({"core.data_dir": str(data_dir), "database.url": "", "peers.ai_core_url": ai_core_url,
                          "plugins.chat": {**chat_settings, **fault_settings}})
    client = await aiohttp_client(create_app(
        "gateway", config, plugins=[tokens_plugin, sessions_plugin, files_plugin, ai_core_client_plugin, chat_plugin]))
    server = context_of(client).embedded_database
    yield client
    await client.close()
    # A test that failed may leave the server dead: the handle then has nothing to stop.
    await asyncio.get_running_loop().run_in_executor(None, restart_embedded, server)
    await asyncio.get_running_loop().run_in_executor(None, server.cleanup)  # stopped: no other process uses it
    shutil.rmtree(data_dir, ignore_errors=True)


async def test_postgres_killed_mid_reply(gateway_on_embedded_database, provider):
    gateway = gateway_on_embedded_database
    context = context_of(gateway)
    token = token_for(gateway, ADMIN)
    query = f"/ws/chat?token={token}&session_id=db-fault"

    async with gateway.ws_connect(query) as phone, gateway.ws_connect(query) as laptop:
        await phone.send_json({"type": "message", "content": "before", "client_msg_id": "before"})
        await receive_until(phone, "stream_end")
        await receive_until(laptop, "stream_end")

        provider.gate.clear()  # the model holds the next reply after two pieces
        await phone.send_json({"type": "message", "content": "during", "client_msg_id": "during"})
        frames = await receive_until(phone, "stream_chunk")
        echo = (await receive_until(laptop, "response"))[-1]  # stored: the laptop is shown its id
        assert echo["content"] == "during" and echo["message_id"]

        status = embedded_status(context.config.data_dir)
        os.kill(status["pid"], signal.SIGKILL)
        killed_at = time.monotonic()

        async def refused() -> bool:  # what the HTTP API says meanwhile: 503, not 500
            answer = await gateway.get("/api/v1/sessions", headers={"Authorization": f"Bearer {token}"})
            if answer.status == 200:  # a pooled connection whose backend has not noticed yet
                return False
            assert answer.status == 503, await answer.text()
            assert (await answer.json())["errorType"] == "database_unavailable"
            assert answer.headers["Retry-After"]
            return True

        await eventually(refused, timeout=TOLD_WITHIN)
        provider.gate.set()  # the model finishes the reply while the server is down
        rest, _ = await until_reply_ends(phone)
        frames += rest
        assert time.monotonic() - killed_at < TOLD_WITHIN
        # Cut off with `database_unavailable` when the reply could not be stored; a normal end
        # when the watchdog had the server back already.
        reply_stored = frames[-1]["finish_reason"] == "stop"
        if not reply_stored:
            assert_cut_off_cleanly(frames, {"database_unavailable"})

        # The gateway starts its server again by itself, and its pool reconnects.
        async def answers() -> bool:
            with contextlib.suppress(Exception):
                return await fetch_value(context.db, "SELECT 1") == 1
            return False

        await eventually(answers, timeout=RECOVERED_WITHIN)
        assert embedded_status(context.config.data_dir)["pid"] != status["pid"]
        back = time.monotonic()
        await phone.send_json({"type": "message", "content": "after", "client_msg_id": "after"})
        frames = await receive_until(phone, "stream_end", timeout=RECOVERED_WITHIN)
        assert frames[-1]["finish_reason"] == "stop" and frames[-1]["text"] == provider.reply, frames
        assert not [frame for frame in frames if frame["type"] == "error"]
        assert time.monotonic() - back < RECOVERED_WITHIN

    # Every acknowledged message once; the reply that could not be stored is not there.
    stored = await context.contracts.require(CONVERSATIONS).all_messages(ADMIN.user_id, "db-fault")
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "before"), ("assistant", provider.reply), ("user", "during"),
        *([("assistant", provider.reply)] if reply_stored else []),
        ("user", "after"), ("assistant", provider.reply)]

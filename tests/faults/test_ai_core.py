"""The AI core, and the model server behind it, killed in the middle of a reply."""
from __future__ import annotations

import json
import time

import pytest

from tests.chat.conftest import ADMIN, receive_until, token_for
from tests.faults.conftest import (AI_CORE_MAIN, MODEL_MAIN, MODEL_REPLY, RECOVERED_WITHIN, TOLD_WITHIN,
                                   assert_cut_off_cleanly, configure_ai_core, run_a_turn, stored_messages,
                                   until_reply_ends)
from tests.support.servers import free_port

pytestmark = pytest.mark.slow


@pytest.fixture
def start_ai_core(child_services, make_config, database_url):
    async def start(model_url: str):
        config = make_config({"database.url": database_url, "plugins.ai_core": {
            "first_token_timeout": 5, "idle_timeout": 20, "timezone": "UTC"}})
        ai_core = await child_services(AI_CORE_MAIN, [json.dumps(config._values), str(port := free_port())], port,
                                       "/api/v1/health")
        await configure_ai_core(ai_core.url, model_url)
        return ai_core

    return start


async def cut_off_mid_reply(gateway, session_id: str, kill, error_types: set[str], hold=None) -> None:
    """A turn answered; the next one (`hold` makes the model hold it) killed mid-reply by
    `kill`; what the devices see."""
    query = f"/ws/chat?token={token_for(gateway, ADMIN)}&session_id={session_id}"
    async with gateway.ws_connect(query) as phone, gateway.ws_connect(query) as laptop:
        assert (await run_a_turn(phone, "before"))[-1]["finish_reason"] == "stop"
        await receive_until(laptop, "stream_end")
        if hold is not None:
            hold()
        await phone.send_json({"type": "message", "content": "hold", "client_msg_id": "hold"})
        frames = await receive_until(phone, "stream_chunk")
        frames += await receive_until(phone, "stream_chunk")  # the model holds after two pieces
        echo = (await receive_until(laptop, "response"))[-1]
        assert echo["content"] == "hold" and echo["message_id"]  # stored: acknowledged to the devices
        killed_at = time.monotonic()
        await kill()
        rest, _ = await until_reply_ends(phone)
        assert time.monotonic() - killed_at < TOLD_WITHIN
        assert_cut_off_cleanly(frames + rest, error_types)
        assert (await receive_until(laptop, "stream_end", timeout=TOLD_WITHIN))[-1]["finish_reason"] == "error"


async def answers_again(gateway, session_id: str) -> None:
    query = f"/ws/chat?token={token_for(gateway, ADMIN)}&session_id={session_id}"
    back = time.monotonic()
    async with gateway.ws_connect(query) as phone:
        frames = await run_a_turn(phone, "after", timeout=RECOVERED_WITHIN)
    assert not [frame for frame in frames if frame["type"] == "error"], frames
    assert frames[-1]["finish_reason"] == "stop" and frames[-1]["text"] == MODEL_REPLY
    assert time.monotonic() - back < RECOVERED_WITHIN


async def test_ai_core_killed_mid_reply(start_ai_core, make_gateway, provider, fault_settings):
    provider.reply = MODEL_REPLY
    ai_core = await start_ai_core(provider.url)
    gateway = await make_gateway(overrides={"peers.ai_core_url": ai_core.url}, settings=fault_settings)
    # tests/chat's model, in this process, holds the second reply.
    await cut_off_mid_reply(gateway, "ai-core-fault", ai_core.kill, {"ai_core_unreachable"}, hold=provider.gate.clear)
    provider.gate.set()
    await ai_core.start()  # the same port, the configuration it keeps in the database
    await answers_again(gateway, "ai-core-fault")
    assert await stored_messages(gateway, "ai-core-fault") == [
        ("user", "before"), ("assistant", MODEL_REPLY), ("user", "hold"), ("user", "after"), ("assistant", MODEL_REPLY)]


async def test_model_server_killed_mid_reply(start_ai_core, child_services, make_gateway, fault_settings):
    model = await child_services(MODEL_MAIN, [str(port := free_port())], port, "/v1/models")
    ai_core = await start_ai_core(model.url + "/v1")
    gateway = await make_gateway(overrides={"peers.ai_core_url": ai_core.url}, settings=fault_settings)
    await cut_off_mid_reply(gateway, "model-fault", model.kill, {"model_failed"})
    await model.start()
    await answers_again(gateway, "model-fault")
    assert await stored_messages(gateway, "model-fault") == [
        ("user", "before"), ("assistant", MODEL_REPLY), ("user", "hold"), ("user", "after"), ("assistant", MODEL_REPLY)]

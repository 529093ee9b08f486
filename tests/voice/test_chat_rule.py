"""The one rule of who may chat (docs/chat.md, "Who may chat") for voice: recognised speech
becomes a turn through the chat plugin's `CHAT_TURNS.submit_turn`, which asks the rule for the
turn's person whatever handed it in, and the frames that carry speech arrive on `/ws/chat`,
whose handshake asks it too. With chat limited to the administrator, a person is refused at
both; the administrator's speech, and with `[auth] chat_for_all_users` anyone's, is answered."""
from __future__ import annotations

import aiohttp
import pytest

from gateway.errors import Forbidden
from plugins.chat.contract import CHAT_TURNS
from plugins.sessions.contract import CONVERSATIONS
from tests.support.voice_gateway import (ADMIN, ALICE, ai_core_url, b64, chat_settings, context_of,  # noqa: F401
                                         fake_voice, frames_until, gateway_port, make_voice_gateway, provider,
                                         ws_path)


async def test_a_person_who_may_not_chat_gets_no_turn_from_speech(make_voice_gateway, fake_voice):
    gateway = await make_voice_gateway(fake_voice.url)  # chat limited to the administrator (the default)
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await gateway.ws_connect(ws_path(gateway, ALICE, session_id="talk"))
    assert refused.value.status == 403
    turns = context_of(gateway).contracts.require(CHAT_TURNS)
    with pytest.raises(Forbidden) as forbidden:
        await turns.submit_turn(ALICE.user_id, "talk", "what time is it", "voice_assistant")
    assert forbidden.value.error_type == "admin_only"
    conversations = context_of(gateway).contracts.require(CONVERSATIONS)
    assert await conversations.list_messages(ALICE.user_id, "talk") == []

    fake_voice.transcripts[b"recording"] = ("What time is it?", "en")
    async with gateway.ws_connect(ws_path(gateway, ADMIN, session_id="talk")) as ws:
        await ws.send_json({"type": "voice_input", "audio_data": b64(b"recording"), "mode": "voice_msg"})
        frames = await frames_until(ws, "stream_end")
    assert frames[-1]["text"]


async def test_with_chat_for_all_users_a_persons_speech_is_answered(make_voice_gateway, fake_voice):
    gateway = await make_voice_gateway(fake_voice.url, overrides={"auth.chat_for_all_users": True})
    fake_voice.transcripts[b"recording"] = ("What time is it?", "en")
    async with gateway.ws_connect(ws_path(gateway, ALICE, session_id="talk")) as ws:
        await ws.send_json({"type": "voice_input", "audio_data": b64(b"recording"), "mode": "voice_msg"})
        frames = await frames_until(ws, "stream_end")
    assert frames[-1]["text"]

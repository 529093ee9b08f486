"""Telegram voice notes (getFile, the download, the voice service's one-shot transcription, or a
clear answer when it does not run), and bot secrets kept out of logs and answers."""
from __future__ import annotations

import asyncio
import logging

from tests.platform_bridge.conftest import SERVICE, TOKEN, stored_messages
from tests.support.fake_voice import FakeVoiceService
from tests.support.servers import free_port

ANSWER = "Hello from scripted."
ALICE = 4242
ALLOWED = [{"platform_user_id": str(ALICE), "user_id": "alice"}]


async def test_a_voice_note_is_transcribed_and_answered(make_bridge, telegram, gateway, aiohttp_server):
    voice = FakeVoiceService()
    server = await aiohttp_server(voice.app)
    voice.transcripts[b"OggS-note-1"] = ("what is the weather", "en")
    bridge = await make_bridge({"peers.voice_service_url": str(server.make_url("")).rstrip("/")})
    bot = await bridge.add_bot(users=ALLOWED)
    telegram.voice(ALICE, b"OggS-note-1")
    await telegram.wait_for_texts(ALICE, 1, final=ANSWER)
    assert voice.users == ["alice"]
    stored = await stored_messages(gateway.conversations, "alice", f"{bot['id']}_{ALICE}_1", 2)
    assert [m["content"] for m in stored] == ["what is the weather", ANSWER]

    telegram.voice(ALICE, b"OggS-silence")  # nothing recognised: said so, nothing invented
    await telegram.wait_for_texts(ALICE, 2)
    assert telegram.texts(ALICE)[1] == "Sorry, I could not make out any words in that voice note."


async def test_without_the_voice_service_a_voice_note_gets_a_clear_answer(make_bridge, telegram, gateway):
    bridge = await make_bridge({"peers.voice_service_url": f"http://127.0.0.1:{free_port()}"})
    bot = await bridge.add_bot(users=ALLOWED)
    telegram.voice(ALICE, b"OggS-note-1")
    await telegram.wait_for_texts(ALICE, 1)
    assert telegram.texts(ALICE) == ["Sorry, I cannot understand voice notes right now. Please type your message."]
    await asyncio.sleep(0.1)
    entries = await bridge.log(bot["id"])
    assert entries[0]["error"] == "voice_service_unreachable"


async def test_secrets_never_reach_logs_or_answers(make_bridge, telegram, caplog):
    caplog.set_level(logging.DEBUG)
    bridge = await make_bridge(telegram_api_url=f"http://127.0.0.1:{free_port()}")  # Telegram unreachable
    bot = await bridge.add_bot()
    async with asyncio.timeout(5):
        while True:
            shown = await (await bridge.client.get(f"/api/v1/bots/{bot['id']}", headers=SERVICE)).text()
            if '"waiting"' in shown:
                break
            await asyncio.sleep(0.05)
    await bridge.client.patch(f"/api/v1/bots/{bot['id']}", headers=SERVICE, json={"enabled": False})
    secret_part = TOKEN.split(":")[1]
    assert secret_part not in shown
    assert "cannot reach Telegram" in shown
    assert secret_part not in caplog.text
    listed = await (await bridge.client.get("/api/v1/bots", headers=SERVICE)).text()
    assert secret_part not in listed

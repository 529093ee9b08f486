"""Voice over the chat socket: `voice_input`, and the streaming session exactly as the spec's
state table and docs/voice.md's error rows say; the turn goes the way a typed message does."""
from __future__ import annotations

import asyncio

from plugins.sessions.contract import CONVERSATIONS
from plugins.voice.gateway_streams import REORDER_WINDOW
from tests.support.asyncapi import FrameChecker
from tests.support.voice_gateway import (ADMIN, ai_core_url, b64, chat_settings, context_of,  # noqa: F401
                                         fake_voice, frames_until, gateway_port, make_voice_gateway,
                                         no_frame_within, provider, voice_gateway, ws_path)
from tests.support.voice_gateway import unreachable_url

SPOKEN = b"\x1aE\xdf\xa3" + bytes(range(256)) * 20  # the stand-in knows this recording
CHUNK = 512


def chunks(audio: bytes = SPOKEN) -> list[bytes]:
    return [audio[i:i + CHUNK] for i in range(0, len(audio), CHUNK)]


async def stream(ws, audio: bytes = SPOKEN, interim: bool = True, **start) -> list[dict]:
    """Start, send every chunk, (see an interim,) end; the frames up to voice_final."""
    await ws.send_json({"type": "voice_stream_start", "format": "webm", "language": "en", "mode": "text", **start})
    frames = await frames_until(ws, "voice_interim")
    for sequence, piece in enumerate(chunks(audio)):
        await ws.send_json({"type": "voice_stream_chunk", "audio_data": b64(piece), "sequence": sequence})
    if interim:  # interims come while chunks do; after the end only the final text counts
        frames += await frames_until(ws, "voice_interim")
    await ws.send_json({"type": "voice_stream_end"})
    return frames + await frames_until(ws, "voice_final")


async def test_a_streamed_question_is_confirmed_recognised_and_answered(voice_gateway, fake_voice, provider):
    fake_voice.transcripts[SPOKEN] = ("What time is it?", "en")
    conversations = context_of(voice_gateway).contracts.require(CONVERSATIONS)
    async with voice_gateway.ws_connect(ws_path(voice_gateway, session_id="voice-1")) as ws:
        frames = await stream(ws)
        confirmation, *interims, final = frames
        assert confirmation["type"] == "voice_interim" and confirmation["text"] == ""
        assert confirmation["message_id"].startswith("voice_") and len(confirmation["message_id"]) > 6
        assert interims and all(f["type"] == "voice_interim" for f in interims)
        assert "What time is it?".startswith(interims[0]["text"])
        assert {f["message_id"] for f in frames} == {confirmation["message_id"]}
        assert final["type"] == "voice_final" and final["text"] == "What time is it?" and final["language"] == "en"
        reply = await frames_until(ws, "stream_end")
        assert reply[0]["type"] == "stream_start" and reply[-1]["text"] == provider.reply
    assert provider.requests[-1]["messages"][-1]["content"] == "What time is it?"
    stored = await conversations.all_messages("admin", "voice-1")
    assert stored[0]["content"] == "What time is it?" and stored[0]["client_msg_id"] == confirmation["message_id"]
    assert fake_voice.stream_audio == [SPOKEN]  # every chunk, once, in order
    assert fake_voice.open_streams == 0
    assert fake_voice.users == ["admin"]  # the service's STT log names the person, not the gateway


async def test_chunks_sent_again_are_forwarded_once(voice_gateway, fake_voice):
    fake_voice.transcripts[SPOKEN] = ("Hello.", "en")
    async with voice_gateway.ws_connect(ws_path(voice_gateway, session_id="voice-dup")) as ws:
        await ws.send_json({"type": "voice_stream_start", "language": "en", "mode": "text"})
        await frames_until(ws, "voice_interim")
        for sequence, piece in enumerate(chunks()):
            for _ in range(2):
                await ws.send_json({"type": "voice_stream_chunk", "audio_data": b64(piece), "sequence": sequence})
        await ws.send_json({"type": "voice_stream_end"})
        assert (await frames_until(ws, "voice_final"))[-1]["text"] == "Hello."
    assert fake_voice.stream_audio == [SPOKEN]


async def test_an_empty_final_text_makes_no_turn(voice_gateway, fake_voice, provider):
    async with voice_gateway.ws_connect(ws_path(voice_gateway, session_id="voice-silent")) as ws:
        frames = await stream(ws, audio=b"\0" * 2000, interim=False)  # nothing the stand-in knows: silence
        assert frames[-1]["type"] == "voice_final" and frames[-1]["text"] == ""
        await no_frame_within(ws, 0.5)
    assert provider.requests == []


async def test_start_failures_are_error_frames_and_no_stream(make_voice_gateway, fake_voice):
    gateway = await make_voice_gateway(fake_voice.url)
    async with gateway.ws_connect(ws_path(gateway, session_id="voice-bad")) as ws:
        # A language the service recognises not: its refusal, named.
        await ws.send_json({"type": "voice_stream_start", "language": "ja"})
        error = (await frames_until(ws, "error"))[-1]
        assert error["errorType"] == "language_unsupported" and "ja" in error["error"]
        # An unknown format or language never reaches the service.
        for frame in ({"format": "mp4"}, {"language": "fr"}):
            await ws.send_json({"type": "voice_stream_start", **frame})
            error = (await frames_until(ws, "error"))[-1]
            assert "invalid 'voice_stream_start' frame" in error["error"]
        # No stream was opened: a chunk is refused.
        await ws.send_json({"type": "voice_stream_chunk", "audio_data": b64(b"abc")})
        assert (await frames_until(ws, "error"))[-1]["errorType"] == "voice_stream_not_open"
    assert fake_voice.streams_opened == 0
    down = await make_voice_gateway(unreachable_url())
    async with down.ws_connect(ws_path(down, session_id="voice-down")) as ws:
        await ws.send_json({"type": "voice_stream_start"})
        error = (await frames_until(ws, "error"))[-1]
        assert error["errorType"] == "voice_service_unreachable" and error["msg_type"] == "system_info"
        await ws.send_json({"type": "voice_stream_end"})
        assert (await frames_until(ws, "error"))[-1]["errorType"] == "voice_stream_not_open"
        await ws.send_json({"type": "voice_input", "audio_data": b64(b"abc")})
        assert (await frames_until(ws, "error"))[-1]["errorType"] == "voice_service_unreachable"


async def test_chunk_or_end_without_a_stream_and_a_second_start(voice_gateway, fake_voice):
    async with voice_gateway.ws_connect(ws_path(voice_gateway, session_id="voice-rows")) as ws:
        await ws.send_json({"type": "voice_stream_chunk", "audio_data": b64(b"abc"), "sequence": 0})
        assert (await frames_until(ws, "error"))[-1]["errorType"] == "voice_stream_not_open"
        await ws.send_json({"type": "voice_stream_end"})
        assert (await frames_until(ws, "error"))[-1]["errorType"] == "voice_stream_not_open"
        await ws.send_json({"type": "voice_stream_start", "language": "en"})
        await frames_until(ws, "voice_interim")
        assert fake_voice.open_streams == 1
        await ws.send_json({"type": "voice_stream_start", "language": "en"})
        error = (await frames_until(ws, "error"))[-1]
        assert error["errorType"] == "voice_stream_already_open"
        await ws.send_json({"type": "voice_stream_end"})  # both are closed
        assert (await frames_until(ws, "error"))[-1]["errorType"] == "voice_stream_not_open"
        await asyncio.sleep(0.2)
        assert fake_voice.open_streams == 0
        # A chunk that is not base64 closes the stream too.
        await ws.send_json({"type": "voice_stream_start", "language": "en"})
        await frames_until(ws, "voice_interim")
        await ws.send_json({"type": "voice_stream_chunk", "audio_data": "not base64!"})
        assert (await frames_until(ws, "error"))[-1]["errorType"] == "invalid_audio"
        await asyncio.sleep(0.2)
        assert fake_voice.open_streams == 0


async def test_silence_size_and_length_limits_close_the_stream(make_voice_gateway, fake_voice):
    gateway = await make_voice_gateway(fake_voice.url, voice={"stream_idle_timeout": 0.3, "stream_max_bytes": 4096,
                                                              "stream_max_seconds": 1.0})
    async with gateway.ws_connect(ws_path(gateway, session_id="voice-limits")) as ws:
        await ws.send_json({"type": "voice_stream_start", "language": "en"})
        await frames_until(ws, "voice_interim")
        error = (await frames_until(ws, "error", timeout=5))[-1]  # nothing sent: silence
        assert error["errorType"] == "voice_stream_idle"
        await ws.send_json({"type": "voice_stream_start", "language": "en"})
        await frames_until(ws, "voice_interim")
        for sequence in range(3):
            await ws.send_json({"type": "voice_stream_chunk", "audio_data": b64(b"\1" * 2000), "sequence": sequence})
        error = (await frames_until(ws, "error"))[-1]
        assert error["errorType"] == "voice_stream_too_large"
        await ws.send_json({"type": "voice_stream_start", "language": "en"})
        await frames_until(ws, "voice_interim")
        for sequence in range(8):  # chunks keep it alive, but not past its length
            await ws.send_json({"type": "voice_stream_chunk", "audio_data": b64(b"\1" * 10), "sequence": sequence})
            await asyncio.sleep(0.15)
        error = (await frames_until(ws, "error"))[-1]
        assert error["errorType"] == "voice_stream_too_long"
        await ws.send_json({"type": "voice_stream_end"})
        assert (await frames_until(ws, "error"))[-1]["errorType"] == "voice_stream_not_open"
    await asyncio.sleep(0.2)
    assert fake_voice.open_streams == 0


async def test_a_connection_that_drops_mid_stream_frees_the_recognizer(voice_gateway, fake_voice):
    async with voice_gateway.ws_connect(ws_path(voice_gateway, session_id="voice-drop")) as ws:
        await ws.send_json({"type": "voice_stream_start", "language": "en"})
        await frames_until(ws, "voice_interim")
        await ws.send_json({"type": "voice_stream_chunk", "audio_data": b64(SPOKEN[:CHUNK]), "sequence": 0})
        assert fake_voice.open_streams == 1
    for _ in range(50):
        if fake_voice.open_streams == 0:
            break
        await asyncio.sleep(0.05)
    assert fake_voice.open_streams == 0


async def test_voice_input_transcribes_then_takes_the_turn(voice_gateway, fake_voice, provider):
    fake_voice.transcripts[b"one-recording"] = ("今天天气怎么样？", "zh")
    async with voice_gateway.ws_connect(ws_path(voice_gateway, session_id="voice-input")) as ws:
        await ws.send_json({"type": "voice_input", "audio_data": b64(b"one-recording"), "mode": "text",
                            "client_msg_id": "rec-1"})
        transcript = (await frames_until(ws, "voice_transcript"))[-1]
        assert transcript["text"] == "今天天气怎么样？" and transcript["language"] == "zh"
        assert transcript["client_msg_id"] == "rec-1"
        await frames_until(ws, "stream_end")
        # The same recording sent again (the same client_msg_id) is no second turn.
        await ws.send_json({"type": "voice_input", "audio_data": b64(b"one-recording"), "mode": "text",
                            "client_msg_id": "rec-1"})
        await frames_until(ws, "voice_transcript")
        await no_frame_within(ws, 0.5)
        # Bad input.
        await ws.send_json({"type": "voice_input", "audio_data": "%%%"})
        assert (await frames_until(ws, "error"))[-1]["errorType"] == "invalid_audio"
        await ws.send_json({"type": "voice_input", "audio_data": b64(b"garbage")})
        assert (await frames_until(ws, "error"))[-1]["errorType"] == "undecodable_audio"
    assert len(provider.requests) == 1
    assert set(fake_voice.users) == {"admin"}


async def test_voice_reaches_the_users_other_devices_as_a_typed_message_does(voice_gateway, fake_voice, provider):
    fake_voice.transcripts[SPOKEN] = ("Turn it up.", "en")
    async with voice_gateway.ws_connect(ws_path(voice_gateway, session_id="voice-two", client_id="phone")) as phone, \
            voice_gateway.ws_connect(ws_path(voice_gateway, session_id="voice-two", client_id="desk")) as desk:
        await stream(phone)
        phone_reply = await frames_until(phone, "stream_end")
        desk_frames = await frames_until(desk, "stream_end")
        assert "response" not in [f["type"] for f in phone_reply]  # the sender saw voice_final instead
        echo = next(f for f in desk_frames if f["type"] == "response")
        assert echo["role"] == "user" and echo["content"] == "Turn it up."
        assert echo["client_info"]["client_id"] == "phone"  # the device that spoke, as for a typed message
        assert {f["response_mode"] for f in desk_frames if f.get("turn_id")} == {"text"}
        assert [f["type"] for f in desk_frames].index("response") < [f["type"] for f in desk_frames].index("stream_start")
        assert not any(f["type"].startswith("voice_") for f in desk_frames)  # recognition is the sender's
        assert desk_frames[-1]["text"] == phone_reply[-1]["text"] == provider.reply
        # A second voice message while a reply runs is queued like a typed one.
        provider.gate.clear()
        await stream(phone)
        await frames_until(phone, "stream_chunk")
        await stream(phone)
        assert (await frames_until(phone, "queued"))[-1]["position"] >= 1
        provider.gate.set()
        await frames_until(phone, "stream_end")
        await frames_until(phone, "stream_end")


async def test_voice_input_over_ten_megabytes_is_refused(voice_gateway, fake_voice):
    async with voice_gateway.ws_connect(ws_path(voice_gateway, session_id="voice-big")) as ws:
        await ws.send_json({"type": "voice_input", "audio_data": b64(b"\0" * (10 * 1024 * 1024 + 1))})
        error = (await frames_until(ws, "error"))[-1]
        assert error["errorType"] == "file_too_large"
        await ws.send_json({"type": "ping"})  # the connection goes on
        await frames_until(ws, "pong")
    assert fake_voice.users == []


def numbered(audio: bytes, size: int) -> list[tuple[int, bytes]]:
    return [(sequence, audio[start:start + size]) for sequence, start in enumerate(range(0, len(audio), size))]


async def send_chunks(ws, pieces: list[tuple[int, bytes]]) -> None:
    for sequence, piece in pieces:
        await ws.send_json({"type": "voice_stream_chunk", "audio_data": b64(piece), "sequence": sequence})


async def test_chunks_out_of_order_are_forwarded_in_sequence_order(voice_gateway, fake_voice):
    fake_voice.transcripts[SPOKEN] = ("In order.", "en")
    pieces = numbered(SPOKEN, 100)   # 52 chunks
    # Each run of four arrives backwards, and two early ones are sent again.
    shuffled = [piece for start in range(0, len(pieces), 4) for piece in reversed(pieces[start:start + 4])]
    shuffled[10:10] = [pieces[13], pieces[0]]
    async with voice_gateway.ws_connect(ws_path(voice_gateway, session_id="voice-order")) as ws:
        await ws.send_json({"type": "voice_stream_start", "language": "en", "mode": "text"})
        await frames_until(ws, "voice_interim")
        await send_chunks(ws, shuffled)
        await ws.send_json({"type": "voice_stream_end"})
        frames = await frames_until(ws, "voice_final")
    assert frames[-1]["text"] == "In order."
    assert "error" not in [frame["type"] for frame in frames], frames
    assert fake_voice.stream_audio == [SPOKEN]


async def test_a_chunk_that_never_comes_is_named_once_the_window_has_passed(voice_gateway, fake_voice):
    document = await (await voice_gateway.get("/api/v1/asyncapi.json")).json()
    checker = FrameChecker(document)
    pieces = numbered(SPOKEN, 100)
    lost = 3
    async with voice_gateway.ws_connect(ws_path(voice_gateway, session_id="voice-gap")) as ws:
        await ws.send_json({"type": "voice_stream_start", "language": "en", "mode": "text"})
        await frames_until(ws, "voice_interim")
        # Chunk 3 is awaited while the 16 after it are held: no word yet.
        await send_chunks(ws, [piece for piece in pieces[:lost + 1 + REORDER_WINDOW] if piece[0] != lost])
        await no_frame_within(ws, 0.3)
        # The next one gives it up: named in an error frame, and the stream goes on.
        await send_chunks(ws, pieces[lost + 1 + REORDER_WINDOW:])
        error = (await frames_until(ws, "error"))[-1]
        checker.check(error)
        assert error["errorType"] == "voice_chunk_missing" and "sequence 3 " in error["error"], error
        assert error["session_id"] == "voice-gap"
        await ws.send_json({"type": "voice_stream_end"})
        frames = await frames_until(ws, "voice_final")
    assert "error" not in [frame["type"] for frame in frames]
    assert fake_voice.stream_audio == [b"".join(piece for sequence, piece in pieces if sequence != lost)]


async def test_chunks_still_missing_at_the_end_are_named_and_the_rest_forwarded(voice_gateway, fake_voice):
    pieces = numbered(SPOKEN, 100)
    async with voice_gateway.ws_connect(ws_path(voice_gateway, session_id="voice-end-gap")) as ws:
        await ws.send_json({"type": "voice_stream_start", "language": "en", "mode": "text"})
        await frames_until(ws, "voice_interim")
        await send_chunks(ws, [pieces[0], pieces[4], pieces[1], pieces[7], pieces[4]])
        await ws.send_json({"type": "voice_stream_end"})
        frames = await frames_until(ws, "voice_final")
    errors = [frame for frame in frames if frame["type"] == "error"]
    assert [error["errorType"] for error in errors] == ["voice_chunk_missing"] * 2, errors
    assert "sequence 2 to 3 " in errors[0]["error"] and "sequence 5 to 6 " in errors[1]["error"]
    assert fake_voice.stream_audio == [pieces[0][1] + pieces[1][1] + pieces[4][1] + pieces[7][1]]

"""Spoken replies: in `voice_msg` and `voice_assistant` modes the reply is cut into sentences as it
streams, each synthesized at once and sent as `stream_segments` in order between stream_start and
stream_end, whose `full_audio_url` is the whole reply; the audio is its owner's alone."""
from __future__ import annotations

import io
import wave
from urllib.parse import urlsplit

from tests.support.voice_gateway import (ADMIN, ALICE, ai_core_url, chat_settings, fake_voice,  # noqa: F401
                                         frames_until, gateway_port, make_voice_gateway, provider, token_for,
                                         voice_gateway, ws_path)


async def spoken_turn(gateway, content: str, mode: str = "voice_msg", session_id: str = "spoken") -> list[dict]:
    async with gateway.ws_connect(ws_path(gateway, session_id=session_id)) as ws:
        await ws.send_json({"type": "message", "content": content, "mode": mode})
        return await frames_until(ws, "stream_end")


def segments_of(frames: list[dict]) -> list[dict]:
    return [segment for frame in frames if frame["type"] == "stream_segments" for segment in frame["segments"]]


def duration_ms(audio: bytes) -> int:
    with wave.open(io.BytesIO(audio)) as reader:
        return int(reader.getnframes() * 1000 / reader.getframerate())


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + ("?" + parts.query if parts.query else "")


async def test_an_english_reply_is_spoken_sentence_by_sentence(voice_gateway, fake_voice, provider):
    provider.reply = ("Hello there. The value of pi is 3.14 today!\n```python\nprint('not. read!')\n```\n"
                      "**Goodbye** and see [the docs](http://example.com).")
    provider.pieces = 12
    frames = await spoken_turn(voice_gateway, "Say something.")
    kinds = [frame["type"] for frame in frames]
    assert kinds[0] == "stream_start" and kinds[-1] == "stream_end"
    segments = segments_of(frames)
    assert [s["text"] for s in segments] == ["Hello there.", "The value of pi is 3.14 today!",
                                              "Goodbye and see the docs."]
    assert [s["index"] for s in segments] == [0, 1, 2]
    seqs = [frame["seq"] for frame in frames]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    for frame in frames:
        if frame["type"] == "stream_segments":
            assert frame["message_id"] == frames[0]["message_id"] and frame["role"] == "assistant"
    assert {r["language"] for r in fake_voice.tts_requests} == {"en"}
    for segment in segments:
        response = await voice_gateway.get(path_of(segment["audio_url"]))  # the signed link: no token needed
        assert response.status == 200 and response.content_type == "audio/wav"
        audio = await response.read()
        assert duration_ms(audio) == segment["duration_ms"] == 40 * len(segment["text"])
    end = frames[-1]
    assert end["text"] == provider.reply  # the text reply is whole
    whole = await voice_gateway.get(path_of(end["full_audio_url"]))
    assert whole.status == 200
    assert duration_ms(await whole.read()) == sum(s["duration_ms"] for s in segments)


async def test_a_chinese_reply_is_spoken_in_chinese(voice_gateway, fake_voice, provider):
    provider.reply = "你好。今天是晴天，温度是25.5度！再见"
    provider.pieces = 6
    frames = await spoken_turn(voice_gateway, "天气怎么样", mode="voice_assistant")
    assert [s["text"] for s in segments_of(frames)] == ["你好。", "今天是晴天，温度是25.5度！", "再见"]
    assert [r["language"] for r in fake_voice.tts_requests] == ["zh", "zh", "zh"]
    assert frames[-1]["full_audio_url"]


async def test_the_first_sentence_is_spoken_while_the_model_still_writes(voice_gateway, fake_voice, provider):
    provider.reply = "First sentence here. The rest of it waits for the gate."
    provider.pieces = 4
    provider.hold_after = 2  # "First sentenc", "e here. The r" ... then it waits
    provider.gate.clear()
    async with voice_gateway.ws_connect(ws_path(voice_gateway, session_id="early")) as ws:
        await ws.send_json({"type": "message", "content": "go", "mode": "voice_msg"})
        frames = await frames_until(ws, "stream_segments")
        assert frames[-1]["segments"][0]["text"] == "First sentence here."
        assert "stream_end" not in [frame["type"] for frame in frames]
        provider.gate.set()
        rest = await frames_until(ws, "stream_end")
    assert [s["text"] for s in segments_of(rest)] == ["The rest of it waits for the gate."]


async def test_segments_keep_their_order_when_a_later_one_is_synthesized_first(voice_gateway, fake_voice, provider):
    provider.reply = "One long first sentence. Two."
    fake_voice.tts_delay["One long first sentence."] = 0.5
    frames = await spoken_turn(voice_gateway, "count")
    assert [s["index"] for s in segments_of(frames)] == [0, 1]


async def test_a_text_turn_is_not_spoken(voice_gateway, fake_voice, provider):
    frames = await spoken_turn(voice_gateway, "plain", mode="text")
    assert segments_of(frames) == [] and "full_audio_url" not in frames[-1]
    assert fake_voice.tts_requests == []


async def test_failed_synthesis_leaves_the_text_reply_whole(voice_gateway, fake_voice, provider):
    provider.reply = "Still here. Still answering."
    fake_voice.tts_failing = True
    frames = await spoken_turn(voice_gateway, "talk")
    segments = segments_of(frames)
    assert [s["text"] for s in segments] == ["Still here.", "Still answering."]
    assert all(s["audio_url"] == "" and s["duration_ms"] == 0 and s["error"] for s in segments)
    assert frames[-1]["text"] == provider.reply and frames[-1]["full_audio_url"] == ""
    assert frames[-1]["finish_reason"] == "stop"


async def test_spoken_replies_with_the_voice_service_down(make_voice_gateway, provider):
    from tests.support.voice_gateway import unreachable_url

    gateway = await make_voice_gateway(unreachable_url())
    provider.reply = "Nobody can hear this."
    frames = await spoken_turn(gateway, "hello?")
    assert segments_of(frames)[0]["audio_url"] == "" and frames[-1]["text"] == provider.reply


async def test_the_audio_is_its_owners_alone(voice_gateway, provider):
    provider.reply = "A private sentence."
    frames = await spoken_turn(voice_gateway, "secret")
    url = segments_of(frames)[0]["audio_url"]
    path, _, query = path_of(url).partition("?")
    own = {"Authorization": f"Bearer {token_for(voice_gateway, ADMIN)}"}
    other = {"Authorization": f"Bearer {token_for(voice_gateway, ALICE)}"}
    assert (await voice_gateway.get(path, headers=own)).status == 200  # the owner's token, no link
    refused = await voice_gateway.get(path, headers=other)
    assert refused.status == 403 and (await refused.json())["errorType"] == "forbidden"
    assert (await voice_gateway.get(path)).status == 401
    forged = query.replace("signature=", "signature=0")
    assert (await voice_gateway.get(f"{path}?{forged}")).status == 401
    expired = "expires=1&" + query.split("&", 1)[1]
    assert (await voice_gateway.get(f"{path}?{expired}")).status == 401
    # Another user's folder with a valid link of this one is no link at all.
    owner = path.split("/")[-2]
    assert (await voice_gateway.get(f"{path.replace(owner, '0' * 32)}?{query}")).status == 401
    # Byte ranges, for players that seek.
    ranged = await voice_gateway.get(path, headers={**own, "Range": "bytes=0-3"})
    assert ranged.status == 206 and await ranged.read() == b"RIFF"
    assert ranged.headers["Content-Range"].startswith("bytes 0-3/") and ranged.headers["Accept-Ranges"] == "bytes"
    beyond = await voice_gateway.get(path, headers={**own, "Range": "bytes=99999999-"})
    assert beyond.status == 416
    whole = await voice_gateway.get(path, headers={**own, "Range": "bytes=0-" + "9" * 5000})  # was a 500
    assert whole.status == 206 and (await whole.read()).startswith(b"RIFF")
    missing = await voice_gateway.get(path.rsplit("/", 1)[0] + "/" + "a" * 32 + ".wav", headers=own)
    assert missing.status == 404


async def test_a_voice_service_that_stops_answering_is_asked_once_per_reply(make_voice_gateway, fake_voice, provider):
    """Past the timeout once, the reply's other sentences get their error at once: stream_end
    does not wait a timeout per sentence."""
    gateway = await make_voice_gateway(fake_voice.url, voice={"timeout": 0.5, "synthesis_concurrency": 1})
    provider.reply = "This one hangs. Two. Three. Four."
    fake_voice.tts_delay["This one hangs."] = 3
    frames = await spoken_turn(gateway, "go")
    segments = segments_of(frames)
    assert [s["text"] for s in segments] == ["This one hangs.", "Two.", "Three.", "Four."]
    assert all(s["audio_url"] == "" and "voice service" in s["error"] for s in segments)
    assert len(fake_voice.tts_requests) == 1


async def test_old_reply_audio_is_deleted(make_voice_gateway, fake_voice, provider):
    import asyncio

    from plugins.voice.gateway import AUDIO

    gateway = await make_voice_gateway(fake_voice.url, voice={"audio_retention_days": 0.5 / 86400})
    provider.reply = "Soon gone."
    frames = await spoken_turn(gateway, "bye")
    paths = [path_of(segments_of(frames)[0]["audio_url"]), path_of(frames[-1]["full_audio_url"])]
    assert all([(await gateway.get(path)).status == 200 for path in paths])
    await asyncio.sleep(0.6)
    assert await gateway.server.app[AUDIO].delete_old() == 2
    assert all([(await gateway.get(path)).status == 404 for path in paths])

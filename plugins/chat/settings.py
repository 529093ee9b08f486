"""`[plugins.chat]`: the chat channel's settings, defaults in one place (docs/configuration.md)."""
from dataclasses import dataclass

from marshmallow import fields, validate

from gateway.connection import DEFAULT_MAX_PENDING
from gateway.sse import MAX_LINE
from gateway.plugin_settings import PluginSettings, setting
from plugins.ai_core.contract import DEFAULT_MAX_MESSAGE_CHARS

POSITIVE = validate.Range(min=0, min_inclusive=False)


@dataclass(frozen=True, kw_only=True)
class ChatSettings(PluginSettings):
    allowed_origins: list[str] = setting(fields.List(fields.String(), load_default=list, metadata={
        "description": "Browser origins allowed besides the gateway's and PUBLIC_BASE_URL's "
                       "([\"*\"] accepts any)."}))
    max_frame_bytes: int = setting(fields.Integer(load_default=16 * 1024 * 1024, validate=POSITIVE, metadata={
        "description": "Largest accepted frame in bytes (close code 1009 above it)."}))
    max_pending: int = setting(fields.Integer(load_default=DEFAULT_MAX_PENDING, validate=POSITIVE, metadata={
        "description": "Frames queued for one connection; a client that stops reading is disconnected."}))
    heartbeat: float = setting(fields.Float(load_default=30.0, validate=POSITIVE, metadata={
        "description": "Seconds between WebSocket pings; a connection that misses the pong is closed."}))
    compress: bool = setting(fields.Boolean(load_default=True, metadata={
        "description": "Accept permessage-deflate when the client offers it (less traffic, more "
                       "memory per connection and CPU per frame)."}))
    max_message_chars: int = setting(fields.Integer(load_default=DEFAULT_MAX_MESSAGE_CHARS, validate=POSITIVE, metadata={
        "description": "Longest `content` of a message (an `error` frame `message_too_long`), and of any text "
                       "handed in as a turn (voice, webhooks, the platform bridge, automation: 413 "
                       "message_too_long)."}))
    history_limit: int = setting(fields.Integer(load_default=20, validate=validate.Range(min=0), metadata={
        "description": "Past messages sent to the AI core with a turn."}))
    lock_ttl: float = setting(fields.Float(load_default=30.0, validate=POSITIVE, metadata={
        "description": "Seconds of a session's turn lock, renewed every third."}))
    replay_ttl: float = setting(fields.Float(load_default=120.0, validate=POSITIVE, metadata={
        "description": "Seconds a finished reply stays in the replay buffer."}))
    replay_max_frames: int = setting(fields.Integer(load_default=20000, validate=POSITIVE, metadata={
        "description": "Most frames of one reply kept for replay."}))
    attachment_url_ttl: int = setting(fields.Integer(load_default=900, validate=POSITIVE, metadata={
        "description": "Seconds a signed attachment URL works."}))
    sweep_interval: float = setting(fields.Float(load_default=5.0, validate=POSITIVE, metadata={
        "description": "Seconds between housekeeping rounds (dead turns, presence)."}))
    stop_timeout: float = setting(fields.Float(load_default=10.0, validate=validate.Range(min=0), metadata={
        "description": "Seconds a stopping service lets running turns finish."}))
    store_after: float = setting(fields.Float(load_default=0.25, validate=validate.Range(min=0), metadata={
        "description": "Longest a turn's writes (its queue row, the user's message) wait for the AI core's "
                       "first event to be sent on, and for the other turns' first events in a burst."}))
    max_reply_chars: int = setting(fields.Integer(load_default=400_000, validate=validate.Range(min=1, max=MAX_LINE // 6), metadata={
        "description": "Longest reply in characters: a longer one is cut there, stored, and ended with "
                       "finish_reason `length` after an `error` frame `reply_too_large` (at most a sixth of "
                       "the AI core stream's 8 MiB event limit, which the whole reply must fit in)."}))
    max_queued_turns: int = setting(fields.Integer(load_default=20, validate=POSITIVE, metadata={
        "description": "Messages one user may have waiting behind running turns, over all their sessions "
                       "and every instance; one more is refused with an `error` frame `queue_full`."}))
    max_messages_per_minute: int = setting(fields.Integer(load_default=60, validate=POSITIVE, metadata={
        "description": "Messages one user may send a minute (devices, voice and webhooks together, counted "
                       "on the bus); more are refused with an `error` frame `rate_limited`."}))

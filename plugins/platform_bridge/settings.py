"""`[plugins.platform_bridge]` (docs/configuration.md, docs/platform-bridge.md)."""
from dataclasses import dataclass

from marshmallow import fields, validate

from gateway.plugin_settings import PluginSettings, setting

POSITIVE = validate.Range(min=0, min_inclusive=False)


@dataclass(frozen=True, kw_only=True)
class BridgeSettings(PluginSettings):
    telegram_api_url: str = setting(fields.String(load_default="https://api.telegram.org", metadata={
        "description": "Telegram's Bot API root (a local Bot API server, or a test's)."}))
    discord_api_url: str = setting(fields.String(load_default="https://discord.com/api/v10", metadata={
        "description": "Discord's API root, for interaction follow-ups."}))
    poll_timeout: int = setting(fields.Integer(load_default=25, validate=validate.Range(min=0, max=50), metadata={
        "description": "Seconds a getUpdates long poll waits for updates."}))
    edit_interval: float = setting(fields.Float(load_default=1.0, validate=POSITIVE, metadata={
        "description": "Least seconds between two edits of a streamed reply in one chat."}))
    retry_delay: float = setting(fields.Float(load_default=5.0, validate=POSITIVE, metadata={
        "description": "Seconds before polling again after a failed getUpdates."}))
    reply_timeout: float = setting(fields.Float(load_default=180.0, validate=POSITIVE, metadata={
        "description": "Seconds to wait for the gateway's whole reply to one message."}))
    log_limit: int = setting(fields.Integer(load_default=1000, validate=validate.Range(min=10, max=1_000_000), metadata={
        "description": "Message-log entries kept per bot; older ones are deleted."}))
    link_code_ttl: int = setting(fields.Integer(load_default=600, validate=validate.Range(min=30, max=86400), metadata={
        "description": "Seconds a one-time link code stays valid."}))
    link_failures_per_sender: int = setting(fields.Integer(load_default=5, validate=validate.Range(min=1, max=1000), metadata={
        "description": "`/link` attempts a platform user may get wrong per link_failure_window (per bot); "
                       "past it every `/link` of theirs is refused unchecked until the window ends. "
                       "A right code clears the count."}))
    link_failure_window: int = setting(fields.Integer(load_default=900, validate=validate.Range(min=10, max=86400), metadata={
        "description": "Seconds over which a platform user's wrong `/link` attempts are counted "
                       "(from the first; counted on the bus, so across workers and instances)."}))
    link_failures_per_code: int = setting(fields.Integer(load_default=20, validate=validate.Range(min=1, max=10000), metadata={
        "description": "Wrong `/link` codes sent to a bot, by anyone, while one of its codes lives, "
                       "before that code is burnt (its person asks for a new one)."}))
    webhook_max_age: int = setting(fields.Integer(load_default=300, validate=validate.Range(min=10, max=3600), metadata={
        "description": "Seconds a generic webhook message's signed X-Bridge-Timestamp is accepted, "
                       "either way of the bridge's clock; its message_id and signature are remembered "
                       "for twice that, and a repeat is not answered again."}))
    transcribe_timeout: float = setting(fields.Float(load_default=120.0, validate=POSITIVE, metadata={
        "description": "Seconds the voice service (VOICE_SERVICE_URL) may take to transcribe one voice note."}))
    max_voice_bytes: int = setting(fields.Integer(load_default=10 * 1024 * 1024, validate=POSITIVE, metadata={
        "description": "Largest voice note downloaded for transcription."}))
    stop_timeout: float = setting(fields.Float(load_default=5.0, validate=validate.Range(min=0), metadata={
        "description": "Seconds a stopping bridge lets the answers under way finish."}))

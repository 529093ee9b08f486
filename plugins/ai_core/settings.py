"""`[plugins.ai_core]`: model calls, tools and image fetches; `[plugins.ai_core_client]`: the
client other services use to call the AI core (docs/configuration.md)."""
from dataclasses import dataclass

from marshmallow import fields, validate

from gateway.plugin_settings import PluginSettings, setting

from .contract import DEFAULT_MAX_MESSAGE_CHARS

# The kinds that wait for a yes unless configuration says otherwise.
DEFAULT_EFFECTS = ("lock.unlock", "cover.open", "garage_door.open", "automation.disable", "automation.http",
                   "memory.delete", "knowledge.delete", "records.delete")

POSITIVE = validate.Range(min=0, min_inclusive=False)


@dataclass(frozen=True, kw_only=True)
class AiCoreSettings(PluginSettings):
    # The model an operator names at start-up, seeded once into the model tables (docs/ai-core.md).
    openai_base_url: str = setting(fields.String(load_default="", metadata={
        "description": "An OpenAI-compatible provider's API root, ending in /v1 (OPENAI_BASE_URL): seeded at "
                       "the first start as the provider `openai` with the `chat` route; its endpoint is allowed "
                       "by the egress policy for models, loopback included. Formerly `[models] "
                       "openai_base_url`, still read there."}))
    openai_api_key: str = setting(fields.String(load_default="", metadata={
        "description": "The key of that provider (OPENAI_API_KEY). Formerly `[models] openai_api_key`."}))
    default_model: str = setting(fields.String(load_default="", metadata={
        "description": "The model the `chat` route seeded with it uses (DEFAULT_MODEL). Formerly `[models] "
                       "default_model`."}))
    first_token_timeout: float = setting(fields.Float(load_default=30.0, validate=POSITIVE, metadata={
        "description": "Seconds to wait for a model's response and first chunk before falling back."}))
    idle_timeout: float = setting(fields.Float(load_default=60.0, validate=POSITIVE, metadata={
        "description": "Seconds a started stream may stall before the turn ends with an error."}))
    tool_timeout: float = setting(fields.Float(load_default=30.0, validate=POSITIVE, metadata={
        "description": "Seconds a tool may run."}))
    max_tool_rounds: int = setting(fields.Integer(load_default=6, validate=validate.Range(min=0), metadata={
        "description": "Model-tool round trips per turn."}))
    system_prompt: str = setting(fields.String(load_default="", metadata={
        "description": "The system message (empty: a short built-in assistant prompt; the current "
                       "time is appended)."}))
    timezone: str = setting(fields.String(load_default="", metadata={
        "description": "IANA zone of the get_current_time tool (empty: the machine's)."}))
    fetch_allow_private: bool = setting(fields.Boolean(load_default=False, metadata={
        "description": "Let image URLs on loopback or private addresses be fetched."}))
    max_image_bytes: int = setting(fields.Integer(load_default=10 * 1024 * 1024, validate=POSITIVE, metadata={
        "description": "Largest image fetched for a turn, in bytes."}))
    fetch_timeout: float = setting(fields.Float(load_default=15.0, validate=POSITIVE, metadata={
        "description": "Seconds an image fetch may take."}))
    turn_context_timeout: float = setting(fields.Float(load_default=3.0, validate=POSITIVE, metadata={
        "description": "Seconds each turn context provider (e.g. memory recall) may take before a chat "
                       "turn; a late one is skipped for that turn."}))
    max_message_chars: int = setting(fields.Integer(load_default=DEFAULT_MAX_MESSAGE_CHARS, validate=POSITIVE, metadata={
        "description": "Longest `text` of the streaming chat call, and of each `user` message at the OpenAI "
                       "door (413 message_too_long past it); the offline agent matches no longer text."}))
    max_conversation_chars: int = setting(fields.Integer(load_default=400_000, validate=POSITIVE, metadata={
        "description": "Most characters of content, all messages together, of one OpenAI-compatible "
                       "`/v1/chat/completions` request (413 message_too_long past it)."}))
    turn_context_max_chars: int = setting(fields.Integer(load_default=4000, validate=validate.Range(min=0), metadata={
        "description": "Most characters the turn context providers add to the system message, in whole "
                       "lines (0: none)."}))
    console_url: str = setting(fields.String(load_default="", metadata={
        "description": "The operator console's address, for the link to its Model Config page that the "
                       "administrator is shown when no language model is connected (empty: "
                       "http://<[console] host>:<[console] port>/, 127.0.0.1 for an all-addresses host)."}))
    model_notice_days: float = setting(fields.Float(load_default=30.0, validate=POSITIVE, metadata={
        "description": "Days the AI core remembers that it told the administrator, in a chat session, how "
                       "to connect a language model (once per session)."}))

    confirm_effects: list[str] = setting(fields.List(fields.String(), load_default=lambda: list(DEFAULT_EFFECTS), metadata={
        "description": "The kinds of effect (`<device class or feature>.<action>`, declared by the tools) that "
                       "wait for the person's confirmation in the conversation before the call runs: unlocking "
                       "a lock, opening a cover or garage door, disabling an automation rule, an automation's "
                       "`http` action, deleting memories or records (docs/ai-core.md, \"Confirmation\"; empty: "
                       "nothing waits but `confirm_tools`)."}))
    confirm_tools: list[str] = setting(fields.List(fields.String(), load_default=list, metadata={
        "description": "Tools every call of which waits for the person's confirmation, whatever it does."}))
    mcp_hosts: list[str] = setting(fields.List(fields.String(), load_default=list, metadata={
        "description": "Loopback or private addresses the MCP servers the assistant uses over HTTP may have, "
                       "for them only (docs/mcp.md), e.g. [\"127.0.0.1:9000\"], [\"mcp.lan\"]: host names, "
                       "addresses, networks or host:port, as `[fetch] allow_hosts`. Formerly `[fetch] mcp_hosts`, "
                       "still read there."}))
    mcp_commands: list[str] = setting(fields.List(fields.String(), load_default=list, metadata={
        "description": "The programs a stdio MCP server may be started with, as the administrator writes its "
                       "`command` (docs/mcp.md; empty: any program the administrator names)."}))
    confirm_seconds: float = setting(fields.Float(load_default=300.0, validate=POSITIVE, metadata={
        "description": "Seconds a call waiting for the person's confirmation stays confirmable."}))

    routing_cache_seconds: float = setting(fields.Float(load_default=300.0, validate=validate.Range(min=0), metadata={
        "description": "Seconds the providers, models and routing rules are kept in memory between reads. An "
                       "edit through the admin API applies to the next request at once, on every instance the bus "
                       "reaches; this bounds how long an edit made some other way (SQL) goes unseen (0: read "
                       "them for every request)."}))
    door_remembers: bool = setting(fields.Boolean(load_default=False, metadata={
        "description": "Treat requests to the OpenAI-compatible door (`/v1/chat/completions`) as the person's "
                       "conversation: turn context (memory recall) before each and turn-finished listeners "
                       "(memory extraction, thinking) after it. Off: a relayed request stays a relayed request."}))
    door_tools: str = setting(fields.String(load_default="own", validate=validate.OneOf(("own", "client", "mixed")), metadata={
        "description": "Which functions a model gets at the OpenAI door: `own` (the client's when it sends `tools`, "
                       "else the assistant's own, run here), `client` (only the client's, never the assistant's) "
                       "or `mixed` (the client's and the assistant's own together)."}))
    voice_timeout: float = setting(fields.Float(load_default=120.0, validate=POSITIVE, metadata={
        "description": "Seconds the voice service may take to transcribe or speak for `/v1/audio/*`."}))
    max_embedding_inputs: int = setting(fields.Integer(load_default=256, validate=POSITIVE, metadata={
        "description": "Most texts in one `/v1/embeddings` request (each at most `max_message_chars`)."}))


@dataclass(frozen=True, kw_only=True)
class AiCoreClientSettings(PluginSettings):
    """`[plugins.ai_core_client]`: how long a service waits for the AI core, per kind of call
    (connecting: `[peers] connect_timeout`)."""
    chat_read_timeout: float = setting(fields.Float(load_default=120.0, validate=POSITIVE, metadata={
        "description": "Seconds the streaming chat call may stay silent."}))
    vision_timeout: float = setting(fields.Float(load_default=60.0, validate=POSITIVE, metadata={
        "description": "Seconds to wait for the AI core's description of an image."}))
    admin_timeout: float = setting(fields.Float(load_default=15.0, validate=POSITIVE, metadata={
        "description": "Seconds to wait for the AI core's model tables (a provider probe: its own "
                       "time limit and 5 more)."}))

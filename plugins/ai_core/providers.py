"""The OpenAI-compatible wire protocol: one streaming `/chat/completions` call, its server-sent
events parsed in full (text, reasoning, tool calls whose arguments arrive in fragments, the
finish reason, usage), and failures sorted into kinds so routing can decide to fall back.

Providers are reached only where the egress policy allows (`model_policy`): the calls go
through a `gateway.fetch.guarded_session`, which checks every resolved address at connect time."""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import AsyncGenerator, cast

import aiohttp
import orjson

from gateway.config import Config
from gateway.fetch import FetchError, FetchRefused, refusal_of
from gateway.fetch_policy import FetchPolicy, endpoint_entry
from gateway.peers import encode_body
from gateway.sse import SseDecoder

from .settings import AiCoreSettings
from .store import Candidate


def model_policy(config: Config, settings: AiCoreSettings) -> FetchPolicy:
    """Where model providers may be reached: the `[fetch]` policy plus `[fetch] model_hosts`, plus
    the endpoint of `OPENAI_BASE_URL` (`[plugins.ai_core] openai_base_url`) while it is set: an
    address the operator gave themself, such as a local inference server on loopback."""
    seeded = endpoint_entry(settings.openai_base_url)
    return FetchPolicy.from_config(config, purpose="model", also_allow=[seeded] if seeded else [])


class ProviderError(Exception):
    """A model call that failed. `kind` is one of refused (the egress policy does not allow the
    provider's address; nothing was sent), connection, timeout, rate_limited, server_error,
    client_error, protocol."""

    def __init__(self, kind: str, message: str, status: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status


@dataclass
class Delta:
    """One meaningful piece of a streamed answer."""
    content: str = ""
    reasoning: str = ""
    tool_call_started: str = ""  # name of a tool call that just began
    # A piece of a tool call, as the OpenAI door relays a client's calls: its index in the
    # answer (-1: none), and the arguments' fragment.
    tool_index: int = -1
    tool_arguments: str = ""


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str = ""

    def message(self) -> dict:
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class Completion:
    """What a stream amounts to once it has ended."""
    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    model: str = ""
    usage: dict | None = None


class CompletionAccumulator:
    """Folds `chat.completion.chunk` objects into a Completion, reporting what each added."""

    def __init__(self) -> None:
        self.completion = Completion()
        self._calls: dict[int, ToolCall] = {}

    def call_at(self, index: int) -> ToolCall | None:
        """The tool call at the provider's `index`, as far as it arrived."""
        return self._calls.get(index)

    def add(self, chunk: dict) -> list[Delta]:
        if "error" in chunk and not chunk.get("choices"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise ProviderError("server_error", f"the provider reported an error mid-stream: {message}")
        if chunk.get("model"):
            self.completion.model = chunk["model"]
        if chunk.get("usage"):
            self.completion.usage = chunk["usage"]
        deltas: list[Delta] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text:
                self.completion.content += text
                deltas.append(Delta(content=text))
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self.completion.reasoning += reasoning
                deltas.append(Delta(reasoning=reasoning))
            for fragment in delta.get("tool_calls") or ():
                index = fragment.get("index", len(self._calls))
                function = fragment.get("function") or {}
                call = self._calls.get(index)
                if call is None:
                    call = ToolCall(id=fragment.get("id") or f"call_{index}", name=function.get("name") or "")
                    self._calls[index] = call
                    self.completion.tool_calls.append(call)
                    deltas.append(Delta(tool_call_started=call.name, tool_index=index))
                else:
                    if fragment.get("id"):
                        call.id = fragment["id"]
                    if function.get("name"):
                        call.name += function["name"]
                arguments = function.get("arguments") or ""
                call.arguments += arguments
                if arguments:
                    deltas.append(Delta(tool_index=index, tool_arguments=arguments))
            if choice.get("finish_reason"):
                self.completion.finish_reason = choice["finish_reason"]
        return deltas


def _as_they_came(deltas: list[Delta]) -> list[Delta]:
    return deltas


def coalesced(deltas: list[Delta]) -> list[Delta]:
    """`deltas` with neighbouring pieces of plain text (or of reasoning) joined into one."""
    if len(deltas) < 2:
        return deltas
    joined: list[Delta] = []
    for delta in deltas:
        last = joined[-1] if joined else None
        if last is not None and delta.tool_index < 0 and last.tool_index < 0:
            if delta.content and not delta.reasoning and last.content and not last.reasoning:
                last.content += delta.content
                continue
            if delta.reasoning and not delta.content and last.reasoning and not last.content:
                last.reasoning += delta.reasoning
                continue
        joined.append(delta)
    return joined


def loads_chunk(data: str) -> dict:
    """One event's JSON: orjson (a few times faster: dozens of chunks a reply), json where orjson
    refuses what json takes (half a surrogate pair, escaped)."""
    try:
        return cast(dict, orjson.loads(data))
    except orjson.JSONDecodeError:
        return cast(dict, json.loads(data))


def _classify_status(status: int) -> str:
    if status == 429:
        return "rate_limited"
    if status >= 500:
        return "server_error"
    return "client_error"


def completions_url(base_url: str) -> str:
    return base_url.rstrip("/") + "/chat/completions"


def request_body(candidate: Candidate, messages: list[dict], tools: list[dict] | None,
                 overrides: dict | None = None) -> dict:
    body = {**candidate.model.params, **(overrides or {}), "model": candidate.model.name,
            "messages": messages, "stream": True}
    if tools:
        body["tools"] = tools
    return body


def parse_events(events: list[str], accumulator: CompletionAccumulator,
                 ) -> tuple[list[Delta], bool, bool, ProviderError | None]:
    """What one read brought, as one batch: a turn that falls behind (a busy machine) catches up
    in fewer, larger writes instead of one per chunk. (deltas, any chunk parsed, [DONE] seen,
    the failure that stopped it)."""
    batch: list[Delta] = []
    parsed = False
    for data in events:
        if data.strip() == "[DONE]":
            return batch, parsed, True, None
        try:
            batch.extend(accumulator.add(loads_chunk(data)))
        except ValueError:
            return batch, parsed, False, ProviderError("protocol", f"a stream event is not JSON: {data[:200]!r}")
        except ProviderError as error:
            return batch, parsed, False, error
        parsed = True
    return batch, parsed, False, None


async def stream_completion(http: aiohttp.ClientSession, candidate: Candidate, messages: list[dict],
                            tools: list[dict] | None, *, first_token_timeout: float,
                            idle_timeout: float, overrides: dict | None = None, coalesce: bool = False,
                            ) -> AsyncGenerator[tuple[list[Delta], CompletionAccumulator], None]:
    """Yield (what arrived, the accumulator so far) for each read of the stream that brought a
    chunk; with `coalesce`, neighbouring text joined (fewer writes for the OpenAI door; a chat
    turn keeps the model's pieces, which its devices see as they come). Raises ProviderError;
    the timeouts bound the wait for the first chunk and for each later one."""
    join = coalesced if coalesce else _as_they_came
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if candidate.provider.api_key:
        headers["Authorization"] = f"Bearer {candidate.provider.api_key}"
    body = request_body(candidate, messages, tools, overrides)
    accumulator = CompletionAccumulator()
    decoder = SseDecoder()
    try:
        async with asyncio.timeout(first_token_timeout):
            response = await http.post(completions_url(candidate.provider.base_url), data=encode_body(body),
                                       headers=headers)
    except TimeoutError:
        raise ProviderError("timeout", f"no answer within {first_token_timeout:g}s") from None
    except (aiohttp.ClientError, FetchError) as error:
        refused = refusal_of(error)
        if isinstance(refused, FetchRefused):
            raise ProviderError("refused", f"the provider's address is not allowed: {refused}") from None
        raise ProviderError("connection", f"cannot reach {candidate.provider.base_url}: "
                                          f"{refused or error}") from None
    async with response:
        if response.status >= 400:
            text = (await response.text(errors="replace"))[:500]
            raise ProviderError(_classify_status(response.status),
                                f"HTTP {response.status}: {text}", response.status)
        content_type = response.headers.get("Content-Type", "")
        if "text/event-stream" not in content_type:
            # Some servers ignore `stream`; accept a whole completion as one chunk.
            try:
                whole = json.loads(await response.read())
                message = whole["choices"][0]["message"]
            except (ValueError, KeyError, IndexError, TypeError) as error:
                raise ProviderError("protocol", f"unexpected {content_type or 'response'}: {error!r}") from None
            chunk = {"model": whole.get("model"), "usage": whole.get("usage"),
                     "choices": [{"index": 0, "finish_reason": whole["choices"][0].get("finish_reason"),
                                  "delta": {**message, "tool_calls": [
                                      {**call, "index": i} for i, call in enumerate(message.get("tool_calls") or ())]}}]}
            yield accumulator.add(chunk), accumulator
            return
        received_any = False
        while True:
            timeout = idle_timeout if received_any else first_token_timeout
            try:
                async with asyncio.timeout(timeout):
                    raw = await response.content.readany()  # what arrived: often one event, sometimes several
            except TimeoutError:
                raise ProviderError("timeout", f"the stream stalled for {timeout:g}s") from None
            except aiohttp.ClientError as error:
                raise ProviderError("connection", f"the stream broke: {error}") from None
            try:
                events = decoder.feed(raw) if raw else [data for data in (decoder.finish(),) if data is not None]
            except ValueError as error:
                raise ProviderError("protocol", str(error)) from None
            batch, parsed, done, failure = parse_events(events, accumulator)
            if failure is not None:  # what came before it still goes out first, as it would have alone
                if batch:
                    yield join(batch), accumulator
                raise failure
            if parsed:
                received_any = received_any or bool(batch)
                yield join(batch), accumulator
            if done:
                return
            if not raw:
                if accumulator.completion.finish_reason is None:
                    raise ProviderError("connection", "the stream ended before the answer was finished")
                return

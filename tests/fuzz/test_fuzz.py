"""Schemathesis against the OpenAPI documents the gateway, the AI core, the memory service, the IoT
service, the voice service, the plugin manager and the platform bridge serve, on the real services:
each started as a `gateway serve` process on PostgreSQL and Redis, the AI core's model a loopback
OpenAI-compatible server (tests/support/fake_openai.py), every request carrying the credential its
operation asks for, so the cases reach the handlers. The console's own routes get a round of their
own (`python -m console serve` supervising small real services, see `console_round`).

Every answer must: not be a server error, carry the spec's error body on every error, and conform
to the document (status, content type, response schema and headers, the declared security
really enforced, `Allow` on a wrong method). An operation the document marks `x-undocumented` is
still fuzzed (path parameters, other methods, missing or bad credentials); each schema `api_doc`
adds makes its bodies and queries generated and its answers checked.

CI runs one fixed, derandomized round bounded by the examples per operation. A release runs
longer (docs/operations.md, "Fuzzing"): FUZZ_EXAMPLES (cases per operation and phase),
FUZZ_SECONDS (keep fuzzing each service this long, with fresh cases each round), FUZZ_SEED and
FUZZ_PATHS (only the operations whose path matches this regular expression)."""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
import requests
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import from_schema
from schemathesis.engine import events as engine_events
from schemathesis.engine.statistic import Statistic

from gateway.app import create_app
from gateway.config import PROJECT_ROOT, Config
from gateway.plugins import environment_names
from gateway.openapi import OPENAPI_PATH, doc_of
from tests.support.fake_openai import serve_fake_provider
from tests.support.servers import free_port

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES") or 25)
SECONDS = int(os.environ.get("FUZZ_SECONDS") or 0)
SEED = os.environ.get("FUZZ_SEED") or ""
# A regular expression: only the operations whose path it finds are fuzzed (to try new routes
# without the whole round, e.g. FUZZ_PATHS='^/api/v1/admin/users'); every one when unset.
PATHS = os.environ.get("FUZZ_PATHS") or ""
# Derandomized (the same cases every run) unless a seed or a duration asks for new ones.
DETERMINISTIC = not SEED and not SECONDS
# A CI round stops here whatever is left (a slow machine must not hold the suite).
CI_CAP_SECONDS = 120
# Operations left out, each with why. None today: logging out or renewing spends only the access
# token it is sent with and access tokens are not revocable (the fuzzer's stays valid until it
# expires, and a fresh one is fetched every minute); no route deletes the administrator; every
# stream ends (the model server finishes each reply).
EXCLUDED: dict[str, str] = {}

# The one upstream whose address the API's callers choose is a model provider (the fuzzer saves
# providers and names URLs). When one answers badly the services answer 502 with one of these
# errorTypes, by design. Every other status >= 500 fails the run: the AI core, the gateway,
# PostgreSQL, Redis and the model server are all up, so nothing else explains one.
MODEL_PROVIDER_FAILURES = frozenset({"provider_unreachable", "provider_error", "provider_bad_answer",
                                     "model_failed", "vision_failed", "all_models_failed"})


@dataclass
class Service:
    service_id: str
    base_url: str
    process: subprocess.Popen
    log: Path
    # (METHOD, path template) -> the `auth` its api_doc declares (a key of gateway.openapi.SECURITY).
    auth_of: dict[tuple[str, str], str] = field(default_factory=dict)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def tracebacks(self) -> list[str]:
        """The exceptions the service logged (where a 500 came from), without aiohttp's own
        400s for requests it could not parse."""
        blocks = re.findall(r"Traceback \(most recent call last\):.*?\n\S[^\n]*",
                            self.log.read_text(errors="replace"), re.S)
        return [block.strip()[-1500:] for block in blocks if "aiohttp.http_exceptions." not in block]


def service_environment(tmp_path: Path, **values: str) -> dict[str, str]:
    """The machine's environment without any of the services' own settings, plus `values` and a
    configuration file for what has no environment variable."""
    known = environment_names()
    environ = {name: value for name, value in os.environ.items()
               if name not in known and name != "GATEWAY_CONFIG"}
    settings = tmp_path / "fuzz.toml"
    settings.write_text(
        # The model server, and every URL the fuzzer makes up (rewritten to it), are on loopback.
        '[fetch]\nallow_hosts = ["127.0.0.1"]\n'
        # Registration open, so that its handler is reached (the fuzzer does not know the code).
        "[auth]\nregistration_enabled = true\n"
        # Sign-in attempts are limited per address, and the fuzzer is one address.
        "[plugins.auth]\nbcrypt_rounds = 4\nrate_limit_per_minute = 1000000\naccount_free_failures = 1000000\n"
        # The fuzzer adds stdio MCP servers with commands it makes up: none of them may run.
        '[plugins.ai_core]\nmcp_commands = ["true"]\n')
    environ.update(GATEWAY_CONFIG=str(settings), **values)
    return environ


def declared_auth(service_id: str, environ: dict[str, str]) -> dict[tuple[str, str], str]:
    """What each route's `api_doc` says its caller is, read from the route table the process
    serves: the document's `security` says "a bearer credential" but not whose."""
    app = create_app(service_id, Config.load(environ=environ))
    return {(route.method.upper(), route.resource.canonical): doc.auth
            for route in app.router.routes()
            if route.resource is not None and (doc := doc_of(route.handler)) is not None}


def credential_kind(service: Service, method: str, path: str) -> str:
    """Which credential an operation takes: its api_doc `auth`; for one not documented yet, what
    that service's callers send."""
    declared = service.auth_of.get((method, path))
    if declared is not None:
        return declared
    if service.service_id == "console":
        return "console"
    if path.startswith("/api/v1/webhook/"):
        return "webhook"
    return "peer" if service.service_id == "ai-core" else "admin"


async def start_service(service_id: str, port: int, environ: dict[str, str], tmp_path: Path) -> Service:
    """`gateway serve --service ID`, as an operator starts it, once it answers its health check."""
    log = tmp_path / f"{service_id}.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "--service", service_id, "--port", str(port)],
            cwd=PROJECT_ROOT, env=environ, stdout=output, stderr=subprocess.STDOUT)
    service = Service(service_id, f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as http:
        while True:
            assert process.poll() is None, f"{service_id} exited:\n{service.output()}"
            try:
                async with http.get(service.base_url + "/api/v1/health") as answer:
                    if answer.status == 200:
                        return service
            except aiohttp.ClientConnectionError:
                pass
            assert time.monotonic() < deadline, f"{service_id} did not answer in 60 s:\n{service.output()}"
            await asyncio.sleep(0.2)


def stop(service: Service) -> None:
    if service.process.poll() is None:
        service.process.terminate()
        try:
            service.process.wait(15)
        except subprocess.TimeoutExpired:
            service.process.kill()
            service.process.wait()


@pytest.fixture
async def services(tmp_path, database_url, redis_url, aiohttp_server):
    """The model server, then the memory, IoT and voice services, the plugin manager, the AI core, the gateway
    and the platform bridge sharing a fresh DATA_DIR (and so its generated secrets.json), the test's database and
    Redis. The AI core's `openai` provider (seeded from OPENAI_BASE_URL) is the model server."""
    model = await serve_fake_provider(aiohttp_server)
    data_dir = tmp_path / "data"
    memory_port, iot_port, voice_port, bridge_port = free_port(), free_port(), free_port(), free_port()
    ai_core_port, gateway_port, plugin_manager_port = free_port(), free_port(), free_port()
    environ = service_environment(
        tmp_path, DATA_DIR=str(data_dir), DATABASE_URL=database_url, REDIS_URL=redis_url,
        AI_CORE_URL=f"http://127.0.0.1:{ai_core_port}", GATEWAY_URL=f"http://127.0.0.1:{gateway_port}",
        MEMORY_SERVICE_URL=f"http://127.0.0.1:{memory_port}", IOT_SERVICE_URL=f"http://127.0.0.1:{iot_port}",
        VOICE_SERVICE_URL=f"http://127.0.0.1:{voice_port}", PLATFORM_BRIDGE_URL=f"http://127.0.0.1:{bridge_port}",
        # Where the plugin manager asks for restarts: a port nothing listens on (restart pending).
        CONSOLE_PORT=str(free_port()),
        OPENAI_BASE_URL=f"{model.url}/live/v1", OPENAI_API_KEY="fuzz-key", DEFAULT_MODEL="gpt-small")
    started: list[Service] = []
    try:
        # The gateway's memory endpoints pass requests on to it (a 502 there would be a failure).
        started.append(await start_service("memory-service", memory_port, environ, tmp_path))
        started.append(await start_service("iot-debug-service", iot_port, environ, tmp_path))
        started.append(await start_service("voice-service", voice_port, environ, tmp_path))
        started.append(await start_service("plugin-manager", plugin_manager_port, environ, tmp_path))
        started.append(await start_service("ai-core", ai_core_port, environ, tmp_path))
        started.append(await start_service("gateway", gateway_port, environ, tmp_path))
        started.append(await start_service("platform-bridge", bridge_port, environ, tmp_path))
        for service in started:
            service.auth_of = declared_auth(service.service_id, environ)
        yield model, data_dir, {service.service_id: service for service in started}
    finally:
        for service in reversed(started):
            await asyncio.to_thread(stop, service)


# ---------------------------------------------------------------- what every answer must be

@schemathesis.check
def spec_error_body(ctx, response, case) -> None:
    """Every error is JSON `{"error", "errorType", "hint"?}` (spec: "Errors"), whoever answered."""
    if response.status_code < 400:
        return
    content_types = [value for name, values in response.headers.items() if name.lower() == "content-type"
                     for value in values]
    media_type = (content_types or [""])[0].split(";")[0].strip()
    if media_type != "application/json":
        raise AssertionError(f"a {response.status_code} answered as {media_type or 'no content type'}, "
                             f"not the JSON error body: {response.text[:200]!r}")
    body = response.json()
    if not (isinstance(body, dict) and isinstance(body.get("error"), str)
            and isinstance(body.get("errorType"), str) and isinstance(body.get("hint", ""), (str, type(None)))):
        raise AssertionError(f"a {response.status_code} without the spec's error body: {str(body)[:300]}")


def error_type_of(response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("errorType") if isinstance(body, dict) else None


def template_matches(template: str, path: str) -> bool:
    pattern = "".join("[^/]+" if part.startswith("{") else re.escape(part)
                      for part in re.split(r"(\{[^}]+\})", template))
    return re.fullmatch(pattern, path) is not None


UNFILLED_PLACEHOLDER = re.compile(r"%7B\w+%7D", re.IGNORECASE)


def excuse_for(failure, case, response, service_id: str = "") -> str | None:
    """Why a failure is not the service's fault, or None: it counts."""
    kind = type(failure).__name__
    if kind == "ServerError" and response.status_code == 502 \
            and error_type_of(response) in MODEL_PROVIDER_FAILURES:
        return "502 from a model provider the caller chose"
    if kind == "ServerError" and service_id == "console" \
            and (response.status_code, error_type_of(response)) in CONSOLE_DOWNSTREAM_FAILURES:
        return f"{response.status_code} {error_type_of(response)}"
    if kind == "UndefinedStatusCode" and response.status_code == 404 \
            and UNFILLED_PLACEHOLDER.search(str(response.request.url or "")):
        # The stateful phase follows a link it could not fill (introspection's answer has no
        # `user_id` for the service credential) and sends `{user_id}` itself: no route matches.
        return "404 for a link's unfilled {placeholder} in the path"
    if kind == "EnsureResourceAvailability" and response.status_code == 404 and names_a_person(case):
        # The service credential acts for the person a request names: the stateful phase creates
        # a resource for one made-up user_id and asks for it with another (not carried by the
        # link), and the owner's resource is not found for someone else, as it must not be.
        return "404 for a resource asked for in another person's name"
    if kind == "AllowHeaderMismatch":
        path = case.operation.path
        paths = case.operation.schema.raw_schema["paths"]
        if any(other != path and template_matches(other, path) for other in paths):
            # /api/v1/files/upload is also /api/v1/files/{file_id}: Allow names both routes' methods.
            return "Allow of a path another route's template also matches"
    return None


def names_a_person(case) -> bool:
    body = case.body if isinstance(case.body, dict) else {}
    return "user_id" in body or "user_id" in (case.query or {})


def loopback_only(value, model_url: str, key: str = ""):
    """Every URL the fuzzer made up, rewritten to the loopback model server: the services fetch
    what they are given (a provider's base_url, an image, a model list), and nothing may leave
    this machine. Each goes where that server answers well, so the peers stay healthy."""
    if isinstance(value, str):
        if "://" not in value and not value.startswith("//"):
            return value
        if key == "base_url":
            return f"{model_url}/live/v1"
        return f"{model_url}/live/v1/models" if len(value) % 2 == 0 else f"{model_url}/files/pixel.png"
    if isinstance(value, dict):
        return {name: loopback_only(item, model_url, str(name)) for name, item in value.items()}
    if isinstance(value, list):
        return [loopback_only(item, model_url, key) for item in value]
    return value


# ---------------------------------------------------------------- one run over one service

def fuzzable(document: dict) -> dict:
    """The service's document, where an operation not documented yet that takes a body (POST,
    PUT, PATCH) is given "any JSON" as its body, so its handler's validation is fuzzed too until
    its api_doc says more. The documented operations are as served."""
    for operations in document.get("paths", {}).values():
        for method, operation in operations.items():
            if operation.get("x-undocumented") and method in ("post", "put", "patch") \
                    and "requestBody" not in operation:
                operation["requestBody"] = {"required": False,
                                            "content": {"application/json": {"schema": {}}}}
    return document


@dataclass
class Outcome:
    service_id: str
    operations: int
    cases: int
    seconds: float
    stop_reason: str
    seed: int
    failures: list[str]
    excused: dict[str, int]
    statuses: dict[int, int]
    server_errors: dict[str, int] = field(default_factory=dict)
    phase_seconds: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        excused = ", ".join(f"{count} {reason}" for reason, count in self.excused.items()) or "none"
        return (f"{self.service_id}: {self.cases} cases over {self.operations} operations in "
                f"{self.seconds:.0f} s ({self.stop_reason}; seconds by phase {self.phase_seconds}), answers {dict(sorted(self.statuses.items()))}"
                f"{f' (of them {self.server_errors})' if self.server_errors else ''}, "
                f"{len(self.failures)} failures; excused: {excused}")


def fuzz(service: Service, credentials, model_url: str, examples: int = EXAMPLES) -> Outcome:
    """Schemathesis' phases (examples, coverage, fuzzing, stateful) over one service, as
    `schemathesis run` runs them. `credentials()`: {"admin": an access token, "peer":
    SERVICE_TOKEN, "webhook": the webhook key} for the services, {"console": CONSOLE_TOKEN} for
    the console."""
    config = SchemathesisConfig.from_dict({
        # With a duration, the fuzzing and stateful phases go round again until it is spent.
        **({"max-time": SECONDS} if SECONDS else {}),
        **({"seed": int(SEED)} if SEED else {}),
        "base-url": service.base_url,
        # Nothing learned in an earlier run steers this one (the run stays the same in CI).
        "cache": {"enabled": False},
        "workers": 1,
        "request-timeout": 30,
        "generation": {"max-examples": examples, "deterministic": DETERMINISTIC, "database": "none"},
        "checks": {
            # No status >= 500 (the one excuse is in `excuse_for`).
            "not_a_server_error": {"expected-statuses": ["2xx", "3xx", "4xx"]},
            # These judge the request side: whether the document describes exactly what a
            # handler accepts. Every answer is checked by the others.
            "positive_data_acceptance": {"enabled": False},
            "negative_data_rejection": {"enabled": False},
            # Guesses from a DELETE and a GET on one path that the DELETE removed what the GET
            # reads; DELETE /sessions/{id}/messages empties a list that stays, so its GET is 200.
            "use_after_free": {"enabled": False},
        },
    })
    # The console's document asks for its credential, the services' documents for none.
    document_headers = {"Authorization": f"Bearer {credentials()['console']}"} if service.service_id == "console" else {}
    document = requests.get(service.base_url + OPENAPI_PATH, headers=document_headers, timeout=30).json()
    schema = schemathesis.openapi.from_dict(fuzzable(document), config=config)
    if EXCLUDED:
        schema = schema.exclude(
            func=lambda ctx: f"{ctx.operation.method.upper()} {ctx.operation.path}" in EXCLUDED)
    if service.service_id == "console":
        schema = schema.exclude(func=lambda ctx: console_proxy_left_out(document, ctx.operation.method,
                                                                          ctx.operation.path))
    if PATHS:
        schema = schema.include(func=lambda ctx: re.search(PATHS, ctx.operation.path) is not None)

    class OperationCredentials:
        """The administrator's access token where a person's token is taken (or may be, as on
        a download or a renewal), the peer credential for peer routes, the webhook key for the
        webhooks (it stands in for Discord's signature when no DISCORD_PUBLIC_KEY is set),
        nothing for open routes."""

        def get(self, case, ctx):
            return credentials()

        def set(self, case, values, ctx):
            kind = credential_kind(service, case.operation.method.upper(), case.operation.path)
            headers = dict(case.headers or {})
            if kind in ("user", "admin", "optional"):
                headers["Authorization"] = f"Bearer {values['admin']}"
            elif kind == "peer":
                headers["Authorization"] = f"Bearer {values['peer']}"
            elif kind in ("webhook", "discord"):
                headers["X-Webhook-Key"] = values["webhook"]
            elif kind == "console":
                headers["Authorization"] = f"Bearer {values['console']}"
            case.headers = headers

    # Asked again every minute: an access token lives 15 minutes, a release run longer.
    schema.auth(refresh_interval=60)(OperationCredentials)

    excused: dict[str, int] = {}

    def filter_failure(context, failure, case, response) -> bool:
        reason = excuse_for(failure, case, response, service.service_id)
        if reason is not None:
            excused[reason] = excused.get(reason, 0) + 1
        return reason is None

    schema.hook(filter_failure)
    statuses: dict[int, int] = {}
    server_errors: dict[str, int] = {}

    def after_call(context, case, response):
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        if response.status_code >= 500:  # which, in the summary
            kind = f"{response.status_code} {error_type_of(response)}"
            server_errors[kind] = server_errors.get(kind, 0) + 1

    schema.hook(after_call)

    def before_call(context, case, kwargs):
        case.body = loopback_only(case.body, model_url)
        case.query = loopback_only(case.query, model_url)

    statistic = Statistic()
    phase_started: dict[str, float] = {}
    phase_seconds: dict[str, float] = {}
    errors: list[str] = []
    stop_reason, seconds = "unknown", 0.0
    stream = from_schema(schema).execute()
    cap = None if SECONDS else threading.Timer(CI_CAP_SECONDS, stream.stop)
    # schemathesis offers `before_call` globally only: it is removed again after the run.
    schemathesis.hook(before_call)
    try:
        if cap is not None:
            cap.start()
        for event in stream:
            if isinstance(event, (engine_events.ScenarioFinished, engine_events.FuzzScenarioFinished)):
                statistic.on_scenario_finished(event.recorder)
            elif isinstance(event, engine_events.NonFatalError):
                # A request that got no answer (a dropped connection, a timeout), or an operation
                # schemathesis could not build from the document.
                errors.append(f"{event.label}: {type(event.value).__name__}: {event.value}")
            elif isinstance(event, engine_events.FatalError):
                raise event.exception
            elif isinstance(event, engine_events.PhaseStarted):
                phase_started[event.phase.name.value] = event.timestamp
            elif isinstance(event, engine_events.PhaseFinished) and event.phase.name.value in phase_started:
                name = event.phase.name.value
                phase_seconds[name] = phase_seconds.get(name, 0.0) + event.timestamp - phase_started.pop(name)
            elif isinstance(event, engine_events.EngineFinished):
                stop_reason, seconds = str(event.stop_reason), event.running_time
                for name, started in phase_started.items():  # the phase the cap interrupted
                    phase_seconds[name] = phase_seconds.get(name, 0.0) + event.timestamp - started
    finally:
        schemathesis.hooks.unregister(before_call)
        if cap is not None:
            cap.cancel()
    failures = list(errors)
    for label, groups in statistic.failures.items():
        for group in groups.values():
            for failure in group.failures:
                failures.append(f"{label}: {failure.title}\n    {failure.message.strip()[:600]}"
                                f"\n    reproduce: {(group.code_sample or '')[:1500]}")
    return Outcome(service.service_id, len(statistic.tested_operations | statistic.errored_operations),
                   statistic.total_cases, seconds, stop_reason, schema.config.seed, failures, excused,
                   statuses, server_errors, {name: round(value) for name, value in phase_seconds.items()})


async def test_fuzzing_the_gateway_and_the_ai_core_finds_nothing(services, capsys):
    """No server error, every error in the spec's body, every answer as the document says."""
    model, data_dir, started = services
    secrets = json.loads((data_dir / "secrets.json").read_text())
    gateway_url = started["gateway"].base_url

    def credentials() -> dict:
        """A fresh administrator login, with the password the gateway generated."""
        answer = requests.post(gateway_url + "/api/v1/auth/login", timeout=30,
                               json={"username": "admin", "password": secrets["auth.admin_password"]})
        assert answer.status_code == 200, answer.text
        return {"admin": answer.json()["token"], "peer": secrets["auth.service_token"],
                "webhook": secrets["plugins.webhooks.webhook_key"]}

    outcomes = [await asyncio.to_thread(fuzz, started[service_id], credentials, model.url)
                for service_id in ("gateway", "ai-core", "memory-service", "iot-debug-service", "voice-service",
                                   "plugin-manager", "platform-bridge")]
    seed = "derandomized" if DETERMINISTIC else f"FUZZ_SEED={outcomes[0].seed}"
    with capsys.disabled():  # the case count belongs in every run's output, not only a failing one's
        print(f"\nfuzz ({seed}, FUZZ_EXAMPLES={EXAMPLES}, FUZZ_SECONDS={SECONDS or 'one round'}): "
              + "; ".join(outcome.summary() for outcome in outcomes)
              + f"; {sum(outcome.cases for outcome in outcomes)} cases in all")
    problems = [f"[{outcome.service_id}] {line}" for outcome in outcomes for line in outcome.failures]
    logged = [f"[{service.service_id}] {block}" for service in started.values() for block in service.tracebacks()]
    assert not problems, "\n".join(problems + ["", "Exceptions the services logged:", *logged[-10:]])


# ---------------------------------------------------------------- the console

# What the console answers, by design and as documented, when what it drives is not there: a
# proxied service stopped (the fuzzer stops them too) or not in its table, the gateway refusing
# its login (the stand-in gateway has no plugins), no Docker for the database panel's compose
# buttons, a backup that `gateway backup` could not take (the round's stand-in services have no
# database of their own). Any other status >= 500 fails the round.
CONSOLE_DOWNSTREAM_FAILURES = frozenset({
    (502, "service_unreachable"), (502, "service_not_configured"), (502, "credential_refused"),
    (502, "gateway_login_failed"), (503, "docker_unavailable"), (502, "compose_failed"),
    (502, "backup_failed")})

# The console's service table in its round: real `gateway serve` processes with no plugins
# (started, stopped, restarted and built by the fuzzer in a second or two each), under the ids
# the console's proxy routes lead to, so that a proxied call reaches a real service (which
# answers 404: the services' own handlers have the round above).
CONSOLE_SERVICES = ("memory-service", "gateway")
# Fewer cases per operation than the services get: nine in ten of the console's operations are
# proxies, one handler that passes the request on whatever it holds (the services' own handlers
# have the round above); FUZZ_EXAMPLES sets this too.
CONSOLE_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES") or 8)


def console_proxy_left_out(document: dict, method: str, path: str) -> bool:
    """A proxy's PUT, PATCH and DELETE: the console passes them on as it passes a POST (with a
    body) and a GET (without), which are fuzzed on every proxied path. With all five the proxies
    are 100 of the console's 119 operations, and the round took over two minutes."""
    operation = document["paths"].get(path, {}).get(method.lower(), {})
    return "default" in operation.get("responses", {}) and method.upper() in ("PUT", "PATCH", "DELETE")


@pytest.fixture
async def console_round(tmp_path):
    """`python -m console serve` as an operator runs it, with CONSOLE_TOKEN set (so every
    operation's credential is checked), over a service table of small real services; the
    console's database panel checks a PostgreSQL port nothing listens on."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "default.toml").write_bytes((PROJECT_ROOT / "conf" / "default.toml").read_bytes())
    rows = []
    for service_id in CONSOLE_SERVICES:
        rows.append(f'[[service]]\nid = "{service_id}"\nname = "{service_id}"\nport = {free_port()}\n'
                    f'plugins = []\nbuild = [[{json.dumps(sys.executable)}, "-c", "print(\'built\')"]]\n')
    (conf / "services.toml").write_text("\n".join(rows))
    token = "fuzz-console-token"
    port = free_port()
    environ = service_environment(tmp_path, DATA_DIR=str(tmp_path / "data"), GATEWAY_CONF_DIR=str(conf),
                                  CONSOLE_TOKEN=token, DATABASE_URL=f"postgresql://127.0.0.1:{free_port()}/none",
                                  ADMIN_PASSWORD="fuzz-admin-password")
    log = tmp_path / "console.log"
    with log.open("wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "console", "serve", "-p", str(port)],
                                   cwd=PROJECT_ROOT, env=environ, stdout=output, stderr=subprocess.STDOUT)
    console = Service("console", f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + 60
        async with aiohttp.ClientSession() as http:
            while True:
                assert process.poll() is None, f"the console exited:\n{console.output()}"
                try:
                    async with http.get(console.base_url + "/api/health") as answer:
                        if answer.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    pass
                assert time.monotonic() < deadline, f"the console did not answer in 60 s:\n{console.output()}"
                await asyncio.sleep(0.2)
        async with aiohttp.ClientSession() as http:  # so that the proxied calls first reach them
            async with http.post(console.base_url + "/api/services/start-all",
                                 headers={"Authorization": f"Bearer {token}"}) as answer:
                assert answer.status == 200, await answer.text()
        console.auth_of = {("GET", "/api/health"): "none"}  # every other operation: "console"
        yield console, token
    finally:
        await asyncio.to_thread(stop, console)


async def test_fuzzing_the_console_finds_nothing(console_round, capsys):
    """The console's own routes (services, logs, dashboard, database panel, pages, proxies) as
    the services' are held: no server error, the spec's error body, answers as documented."""
    console, token = console_round
    outcome = await asyncio.to_thread(fuzz, console, lambda: {"console": token}, "http://127.0.0.1:9",
                                      CONSOLE_EXAMPLES)
    seed = "derandomized" if DETERMINISTIC else f"FUZZ_SEED={outcome.seed}"
    with capsys.disabled():
        print(f"\nfuzz ({seed}, FUZZ_EXAMPLES={CONSOLE_EXAMPLES}, FUZZ_SECONDS={SECONDS or 'one round'}): "
              f"{outcome.summary()}")
    logged = console.tracebacks()
    assert not outcome.failures and not logged, "\n".join(
        outcome.failures + ["", "Exceptions the console logged:", *logged[-10:]])

"""What the auth plugins offer other plugins: issuing and checking tokens, each person's time
zone, the scope check of personal API keys (`require_scope`) and the registry of what each
plugin keeps of a person (`PERSON_DATA`), which deleting a person empties."""
from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable, Mapping, Protocol, Sequence

from aiohttp import web

from gateway.contracts import ContractKey
from gateway.database import execute, fetch_required
from gateway.identity import Identity, require_user

from .tokens import allows, scope_refused

if TYPE_CHECKING:
    from gateway.peers import PeerClient
    from gateway.plugins import Registrar


class Tokens(Protocol):
    def issue_access(self, identity: Identity, *, family: str | None = None,
                     generation: int | None = None) -> tuple[str, int]:
        """A signed access token for `identity` and its lifetime in seconds."""
        ...

    def verify_access(self, token: str) -> Identity:
        """The identity an access token carries; raises Unauthorized for a bad one."""
        ...

    def is_service_token(self, token: str) -> bool:
        """Whether `token` is this deployment's peer credential (SERVICE_TOKEN)."""
        ...


TOKENS: ContractKey[Tokens] = ContractKey("auth.tokens", "issue and verify access tokens")


class PersonZones(Protocol):
    async def zone_of(self, user_id: str) -> str:
        """The person's IANA time zone: their own choice (PUT /api/v1/profile), else the
        deployment's default. Raises the database's errors when it cannot be read."""
        ...


PERSON_ZONES: ContractKey[PersonZones] = ContractKey("auth.person_zones", "each person's time zone")


# ---------------------------------------------------------------- what a credential may do

# The scopes of a personal API key (docs/auth.md, "Personal API keys"). A sign-in token has them all.
SCOPES = ("chat", "mcp", "read", "write")


async def require_scope(request: web.Request, scope: str) -> Identity:
    """The caller (401 without a credential), when their credential allows `scope` (else 403
    `insufficient_scope`). REST calls under /api/ are checked for `read`/`write` already; every
    route outside /api/ that people's credentials reach calls this (/ws/chat and the OpenAI door
    ask for `chat`, /mcp for `mcp`)."""
    identity = await require_user(request)
    if not allows(identity, scope):
        raise scope_refused(scope)
    return identity


def allows_scope(identity: Identity, scope: str) -> bool:
    """Whether `identity` may act within `scope` (for checks outside a request, e.g. a frame)."""
    return allows(identity, scope)


# ---------------------------------------------------------------- a person's data

# async count(user_id) -> {kind: how many}, e.g. {"sessions": 3, "messages": 120}
PersonCounter = Callable[[str], Awaitable[dict[str, int]]]
# async erase(user_id): delete every row (and blob, vector) the plugin keeps for the person.
PersonEraser = Callable[[str], Awaitable[None]]


class PersonData(Protocol):
    def add(self, name: str, count: PersonCounter, erase: PersonEraser) -> None:
        """Register what plugin `name` keeps of each person. When the administrator deletes a
        person (DELETE /api/v1/admin/users/{id}), every `count` is asked first (the confirmation
        shows the totals), then, once confirmed, every `erase` runs, and the account goes last.
        An `erase` that fails stops the deletion with 503 (the person stays disabled, and the
        deletion can be asked again: `erase` must be idempotent). A plugin registers at setup,
        when the service has this contract (`context.contracts.get(PERSON_DATA)`)."""
        ...


PERSON_DATA: ContractKey[PersonData] = ContractKey("auth.person_data", "what each plugin keeps of a person")


# The same route on every service (served by auth_tokens, person_data_api.py): GET counts what the
# service keeps of a person, DELETE erases it; the service credential only.
PERSON_DATA_PATH = "/api/v1/people/{user_id}/data"


def keep_person_data(registrar: "Registrar", name: str, count: PersonCounter, erase: PersonEraser) -> None:
    """Register, at setup, what plugin `name` keeps of each person, on a service that has the
    registry (one without `auth_tokens` has no deletion to take part in)."""
    registry = registrar.context.contracts.get(PERSON_DATA)
    if registry is not None:
        registry.add(name, count, erase)


def row_counter(registrar: "Registrar", tables: Mapping[str, str]) -> PersonCounter:
    """A count of a person's rows: each kind named to the table that holds it (a `user_id` column)."""
    columns = ", ".join(f"(SELECT count(*) FROM {table} WHERE user_id = %(user_id)s) AS {kind}"
                        for kind, table in tables.items())

    async def count(user_id: str) -> dict[str, int]:
        row = await fetch_required(registrar.context.db, f"SELECT {columns}", {"user_id": user_id})
        return {kind: int(row[kind] or 0) for kind in tables}

    return count


def row_eraser(registrar: "Registrar", tables: Sequence[str]) -> PersonEraser:
    """An erase of a person's rows from `tables`, in that order (what references another goes first)."""
    async def erase(user_id: str) -> None:
        for table in tables:
            await execute(registrar.context.db, f"DELETE FROM {table} WHERE user_id = %s", (user_id,))

    return erase


def keep_peer_person_data(registrar: "Registrar", name: str, peer: "PeerClient") -> None:
    """Register, in the gateway, what another service keeps of each person, asked through its
    peer client. A service that cannot be reached fails the count (502 `<peer>_unreachable`), so
    the administrator's deletion is refused before anything is deleted."""
    from urllib.parse import quote

    def path(user_id: str) -> str:
        return PERSON_DATA_PATH.format(user_id=quote(user_id, safe=""))

    async def count(user_id: str) -> dict[str, int]:
        answer = await peer.call("GET", path(user_id))
        return {str(kind): int(number) for kind, number in dict(answer.get("counts") or {}).items()}

    async def erase(user_id: str) -> None:
        await peer.call("DELETE", path(user_id))

    keep_person_data(registrar, name, count, erase)

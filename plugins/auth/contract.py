"""What the auth plugins offer other plugins: issuing and checking tokens."""
from __future__ import annotations

from typing import Protocol

from gateway.contracts import ContractKey
from gateway.identity import Identity


class Tokens(Protocol):
    def issue_access(self, identity: Identity, *, family: str | None = None) -> tuple[str, int]:
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

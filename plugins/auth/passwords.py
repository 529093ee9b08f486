"""bcrypt hashing, always in an executor: one hash costs a quarter of a second of CPU at the
default cost, which would stall every other request on the event loop."""
from __future__ import annotations

import asyncio

import bcrypt

from gateway.errors import BadRequest

BCRYPT_MAX_BYTES = 72
DEFAULT_ROUNDS = 12


def password_bytes(password: str) -> bytes:
    """The UTF-8 bytes bcrypt will see; longer than 72 bytes is refused, because bcrypt would
    either fail or silently ignore the rest."""
    encoded = password.encode("utf-8")
    if len(encoded) > BCRYPT_MAX_BYTES:
        raise BadRequest(f"The password is {len(encoded)} bytes long in UTF-8; at most "
                         f"{BCRYPT_MAX_BYTES} bytes are supported.", error_type="password_too_long",
                         hint="Use a shorter password, or fewer non-ASCII characters.")
    return encoded


class PasswordHasher:
    def __init__(self, rounds: int = DEFAULT_ROUNDS):
        self.rounds = rounds
        self._dummy_hash: bytes | None = None

    async def hash(self, password: str) -> str:
        encoded = password_bytes(password)
        loop = asyncio.get_running_loop()
        hashed = await loop.run_in_executor(None, lambda: bcrypt.hashpw(encoded, bcrypt.gensalt(self.rounds)))
        return hashed.decode("ascii")

    async def check(self, password: str, hashed: str | None) -> bool:
        """Whether `password` matches `hashed`. With no hash (unknown user) a check against a
        dummy hash still runs, so response time does not reveal which usernames exist."""
        encoded = password_bytes(password)
        loop = asyncio.get_running_loop()
        if hashed is None:
            if self._dummy_hash is None:
                self._dummy_hash = await loop.run_in_executor(
                    None, lambda: bcrypt.hashpw(b"no such user", bcrypt.gensalt(self.rounds)))
            dummy = self._dummy_hash
            await loop.run_in_executor(None, bcrypt.checkpw, encoded, dummy)
            return False
        try:
            return await loop.run_in_executor(None, bcrypt.checkpw, encoded, hashed.encode("ascii"))
        except ValueError:  # a corrupt stored hash: no password matches it
            return False

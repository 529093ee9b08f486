"""JWT access and refresh tokens, and the `authenticator` every service that checks callers
uses. No database here: the AI core and other services verify tokens with the shared secret
alone, so this module must stay loadable without one.

Verification pins HS256 (no `none`, no algorithm switching) and checks the `typ` claim, so a
refresh token is never a bearer and an access token never a refresh token."""
from __future__ import annotations

import hmac
import time
import uuid

import jwt
from aiohttp import web

from gateway.errors import Forbidden, Unauthorized
from gateway.identity import Identity

from .standing import API_KEY_PREFIX, Standings

ALGORITHM = "HS256"
ACCESS = "access"
REFRESH = "refresh"
# Short, because an access token cannot be revoked before it expires; clients renew through
# POST /auth/refresh (with the refresh token, or with the expired access token itself).
DEFAULT_ACCESS_LIFETIME = 15 * 60
REFRESH_LIFETIME = 30 * 24 * 3600
SERVICE_USER_ID = "service"
MINIMUM_SECRET_BYTES = 32

_REQUIRED_CLAIMS = ["sub", "typ", "iat", "exp", "jti"]
_LOGIN_HINT = "Log in again with POST /api/v1/auth/login, or renew with POST /api/v1/auth/refresh."

# The claim of an access token issued while its person must still choose their own password (a
# one-time password from the administrator, docs/auth.md "People"). Every service refuses such a
# token (403 `password_change_required`) except for what choosing the password needs: no database
# read, so the AI core and services without a database refuse it too.
PASSWORD_CHANGE_CLAIM = "pcr"
# What such a token still opens (logout and refresh read their credentials themselves).
PASSWORD_CHANGE_OPENS = frozenset({("POST", "/api/v1/auth/password"), ("GET", "/api/v1/profile"),
                                   ("HEAD", "/api/v1/profile"), ("POST", "/api/v1/auth/logout"),
                                   ("POST", "/api/v1/auth/refresh")})
# Set on a request made with such a token, for the profile's answer without a database.
PASSWORD_CHANGE_PENDING: web.RequestKey[bool] = web.RequestKey("auth.password_change_required")


def invalid_token(error: str = "The token is invalid.", error_type: str = "invalid_token",
                  hint: str = _LOGIN_HINT) -> Unauthorized:
    return Unauthorized(error, error_type=error_type, hint=hint)


class JwtTokens:
    """Issues and checks tokens signed with one secret; provided to other plugins as the `TOKENS`
    contract, and used whole (refresh tokens too) by the auth plugin's sign-in routes."""

    def __init__(self, secret: str, access_lifetime: int = DEFAULT_ACCESS_LIFETIME,
                 refresh_lifetime: int = REFRESH_LIFETIME, service_token: str = ""):
        if len(secret.encode("utf-8")) < MINIMUM_SECRET_BYTES:
            # RFC 7518 wants at least the hash size for HS256; a short secret can be brute-forced.
            raise ValueError(f"auth.jwt_secret (JWT_SECRET) must be at least {MINIMUM_SECRET_BYTES} bytes; "
                             f"unset it to have one generated")
        self._secret = secret
        self.access_lifetime = int(access_lifetime)
        self.refresh_lifetime = int(refresh_lifetime)
        self._service_token = service_token

    # -- access tokens
    def issue_access(self, identity: Identity, *, family: str | None = None,
                     generation: int | None = None, password_change_required: bool = False) -> tuple[str, int]:
        """A signed access token for `identity` and its expiry (Unix seconds). `family` ties the
        token to a login's refresh-token family, so revoking the family also stops this token
        from being traded in at /auth/refresh; `generation` is the person's token generation
        (standing.py), which ends the token when the person is disabled, deleted or demoted;
        `password_change_required` limits it to choosing a password (PASSWORD_CHANGE_CLAIM)."""
        now = int(time.time())
        expires = now + self.access_lifetime
        claims = {"sub": identity.user_id, "username": identity.username,
                  "nickname": identity.nickname, "adm": bool(identity.is_admin), "typ": ACCESS,
                  "iat": now, "exp": expires, "jti": uuid.uuid4().hex}
        if family:
            claims["fam"] = family
        if generation is not None:
            claims["gen"] = int(generation)
        if password_change_required:
            claims[PASSWORD_CHANGE_CLAIM] = True
        return jwt.encode(claims, self._secret, algorithm=ALGORITHM), expires

    def verify_access(self, token: str) -> Identity:
        return identity_from_claims(self.access_claims(token))

    def access_claims(self, token: str) -> dict:
        """The claims of a valid, unexpired access token; raises Unauthorized otherwise."""
        return self._decode(token, ACCESS, verify_exp=True)

    def decode_access_for_refresh(self, token: str) -> dict:
        """Claims of an access token whose signature is valid, expired or not, provided it was
        issued within the refresh lifetime: /auth/refresh accepts such a token."""
        claims = self._decode(token, ACCESS, verify_exp=False)
        if claims["iat"] < time.time() - self.refresh_lifetime:
            raise invalid_token("The token is too old to be renewed.", "token_expired")
        return claims

    # -- refresh tokens
    def issue_refresh(self, identity: Identity, family: str) -> tuple[str, dict]:
        now = int(time.time())
        claims = {"sub": identity.user_id, "username": identity.username, "typ": REFRESH,
                  "fam": family, "iat": now, "exp": now + self.refresh_lifetime,
                  "jti": uuid.uuid4().hex}
        return jwt.encode(claims, self._secret, algorithm=ALGORITHM), claims

    def verify_refresh(self, token: str) -> dict:
        claims = self._decode(token, REFRESH, verify_exp=True)
        if not claims.get("fam"):
            raise invalid_token("The refresh token is invalid.")
        return claims

    # -- the service credential
    def is_service_token(self, token: str) -> bool:
        return bool(self._service_token) and hmac.compare_digest(
            token.encode("utf-8"), self._service_token.encode("utf-8"))

    def _decode(self, token: str, expected_type: str, *, verify_exp: bool) -> dict:
        try:
            claims = jwt.decode(token, self._secret, algorithms=[ALGORITHM],
                                options={"require": _REQUIRED_CLAIMS, "verify_exp": verify_exp})
        except jwt.ExpiredSignatureError:
            raise invalid_token("The token has expired.", "token_expired") from None
        except jwt.PyJWTError:
            raise invalid_token() from None
        if claims.get("typ") != expected_type or not isinstance(claims.get("sub"), str):
            raise invalid_token(f"This is not an {expected_type} token." if expected_type == ACCESS
                                else f"This is not a {expected_type} token.")
        if not isinstance(claims.get("iat"), (int, float)):
            raise invalid_token()
        return claims


def identity_from_claims(claims: dict) -> Identity:
    return Identity(user_id=claims["sub"], username=str(claims.get("username") or ""),
                    is_admin=claims.get("adm") is True,
                    nickname=str(claims.get("nickname") or ""), kind="user")


SERVICE_IDENTITY = Identity(user_id=SERVICE_USER_ID, username=SERVICE_USER_ID, is_admin=True,
                            kind="service")


def bearer_token(request: web.Request) -> str | None:
    """The bearer token of the request: the Authorization header, and for WebSocket upgrades
    also the `token` query parameter (browsers cannot set headers on a WebSocket)."""
    header = request.headers.get("Authorization")
    if header is not None:
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise invalid_token("Only bearer tokens are accepted.", "unauthorized",
                                hint="Send Authorization: Bearer <access token>.")
        return value.strip()
    if request.headers.get("Upgrade", "").lower() == "websocket":
        return request.query.get("token") or None
    return None


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def rest_scope(request: web.Request) -> str | None:
    """The scope a personal API key needs for a REST call: `read` to look, `write` to change
    (`write` includes `read`); None outside /api/, where each route asks with `require_scope`."""
    if not request.path.startswith("/api/"):
        return None
    return "read" if request.method in SAFE_METHODS else "write"


def scope_refused(scope: str) -> Forbidden:
    return Forbidden(f"This API key does not have the `{scope}` scope.", error_type="insufficient_scope",
                     hint=f"Create a key with the `{scope}` scope (POST /api/v1/auth/api-keys).")


def password_change_required() -> Forbidden:
    return Forbidden("Choose your own password before anything else: this login used a one-time password.",
                     error_type="password_change_required",
                     hint="Choose your own password with POST /api/v1/auth/password.")


def opens_before_password_change(request: web.Request) -> bool:
    """Whether a token limited to choosing a password may make this request."""
    return (request.method, request.path) in PASSWORD_CHANGE_OPENS


def allows(identity: Identity, scope: str) -> bool:
    """Whether `identity` may act within `scope`: a sign-in token always; a key when it has the
    scope (`write` covers `read`)."""
    if identity.scopes is None:
        return True
    return scope in identity.scopes or (scope == "read" and "write" in identity.scopes)


class BearerAuthenticator:
    """The core's `authenticator` service: who is calling, from the bearer credential (an access
    token, a personal API key, or the service credential)."""

    def __init__(self, tokens: JwtTokens, standings: "Standings | None" = None, admin_username: str = "admin"):
        self.tokens = tokens
        self.standings = standings
        self.admin_username = admin_username

    async def identify(self, request: web.Request) -> Identity | None:
        token = bearer_token(request)
        if token is None:
            return None
        if self.tokens.is_service_token(token):
            return SERVICE_IDENTITY
        if token.startswith(API_KEY_PREFIX):
            if self.standings is None:
                raise invalid_token("This service does not accept API keys.", "api_key_not_accepted")
            identity = await self.standings.identify_key(token, self.admin_username)
            scope = rest_scope(request)
            if scope is not None and not allows(identity, scope):
                raise scope_refused(scope)
            return identity
        claims = self.tokens.access_claims(token)
        if self.standings is not None:
            await self.standings.check_token(claims)
        if claims.get(PASSWORD_CHANGE_CLAIM) is True:
            if not opens_before_password_change(request):
                raise password_change_required()
            request[PASSWORD_CHANGE_PENDING] = True
        return identity_from_claims(claims)

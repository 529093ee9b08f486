"""A push service on a loopback port, speaking Web Push (RFC 8030) as a browser vendor's does,
and the browser behind it: each `subscribe()` makes a browser's P-256 key pair and 16-byte auth
secret and answers the PushSubscription JSON a browser would give the page.

`POST /push/<token>` (the subscription's endpoint) is checked as a push service checks it: the
`Authorization: vapid t=<JWT>, k=<key>` header (RFC 8292: ES256 signature by `k`, `aud` this
server's origin, `exp` in the future and at most 24 hours away, a `sub`), `TTL` and
`Content-Encoding: aes128gcm`; then the body is decrypted with the subscription's private key
and auth secret (RFC 8291, written here from the RFC and not from the product's code) and kept
in `received`. Answers 201; a test scripts other answers per subscription with `answer(...)`.
`decrypt` is usable alone (RFC 8291 Appendix A's example is a test)."""
from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import struct
import time
from dataclasses import dataclass, field

import jwt
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _hmac(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


def _hkdf_expand_one_block(prk: bytes, info: bytes, length: int) -> bytes:
    # RFC 5869: T(1) = HMAC(PRK, info || 0x01); every length Web Push needs fits one block.
    return _hmac(prk, info + b"\x01")[:length]


def decrypt(body: bytes, ua_private: ec.EllipticCurvePrivateKey, auth_secret: bytes) -> bytes:
    """The plaintext of an aes128gcm Web Push message (RFC 8291 section 3, RFC 8188 section 2);
    ValueError when it is not one."""
    if len(body) < 21:
        raise ValueError("shorter than the aes128gcm header")
    salt, (record_size, id_length) = body[:16], struct.unpack("!IB", body[16:21])
    as_public = body[21:21 + id_length]
    ciphertext = body[21 + id_length:]
    if id_length != 65 or as_public[0] != 4:
        raise ValueError("the keyid is not the sender's uncompressed P-256 key")
    if record_size < 18 or len(ciphertext) > record_size:
        raise ValueError("Web Push allows one record")
    ua_public = ua_private.public_key().public_bytes(serialization.Encoding.X962,
                                                      serialization.PublicFormat.UncompressedPoint)
    shared = ua_private.exchange(ec.ECDH(), ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), as_public))
    # IKM = HKDF(auth_secret, ecdh_secret, "WebPush: info" || 0x00 || ua_public || as_public, 32)
    ikm = _hkdf_expand_one_block(_hmac(auth_secret, shared), b"WebPush: info\x00" + ua_public + as_public, 32)
    prk = _hmac(salt, ikm)
    cek = _hkdf_expand_one_block(prk, b"Content-Encoding: aes128gcm\x00", 16)
    nonce = _hkdf_expand_one_block(prk, b"Content-Encoding: nonce\x00", 12)
    padded = AESGCM(cek).decrypt(nonce, ciphertext, None)
    end = len(padded.rstrip(b"\x00"))
    if end == 0 or padded[end - 1] != 2:
        raise ValueError("the last (only) record must end with the padding delimiter 0x02")
    return padded[:end - 1]


@dataclass
class Browser:
    token: str
    private_key: ec.EllipticCurvePrivateKey
    auth_secret: bytes
    answers: list[tuple[int, dict]] = field(default_factory=list)  # scripted, first used first

    def keys(self) -> dict:
        public = self.private_key.public_key().public_bytes(serialization.Encoding.X962,
                                                            serialization.PublicFormat.UncompressedPoint)
        return {"p256dh": b64(public), "auth": b64(self.auth_secret)}


@dataclass
class Received:
    token: str
    payload: dict
    headers: dict
    claims: dict


class FakePushService:
    def __init__(self) -> None:
        self.url = ""  # set by `serve_fake_push`
        self.browsers: dict[str, Browser] = {}
        self.received: list[Received] = []
        self.refused: list[tuple[str, int, str]] = []  # token, status, why
        self.attempts: list[str] = []  # every POST's token, in order
        self.vapid_key: str | None = None  # when set, the only `k` accepted
        self.arrived = asyncio.Event()
        self.app = web.Application()
        self.app.router.add_post("/push/{token}", self.push)

    def subscribe(self) -> dict:
        """A new browser's PushSubscription.toJSON()."""
        browser = Browser(b64(os.urandom(12)), ec.generate_private_key(ec.SECP256R1()), os.urandom(16))
        self.browsers[browser.token] = browser
        return {"endpoint": f"{self.url}/push/{browser.token}", "expirationTime": None, "keys": browser.keys()}

    def answer(self, subscription: dict, status: int, headers: dict | None = None) -> None:
        """The next push to `subscription` is answered `status` (then 201 again)."""
        token = subscription["endpoint"].rsplit("/", 1)[1]
        self.browsers[token].answers.append((status, headers or {}))

    def payloads(self, subscription: dict) -> list[dict]:
        token = subscription["endpoint"].rsplit("/", 1)[1]
        return [r.payload for r in self.received if r.token == token]

    def _refuse(self, token: str, status: int, why: str) -> web.Response:
        self.refused.append((token, status, why))
        self.arrived.set()
        return web.json_response({"code": status, "errno": 0, "error": why}, status=status)

    async def push(self, request: web.Request) -> web.Response:
        token = request.match_info["token"]
        self.attempts.append(token)
        browser = self.browsers.get(token)
        if browser is None:
            return self._refuse(token, 404, "no such subscription")
        body = await request.read()
        # RFC 8292: Authorization: vapid t=<JWT>, k=<public key>
        scheme, _, parameters = request.headers.get("Authorization", "").partition(" ")
        values = dict(part.strip().split("=", 1) for part in parameters.split(",") if "=" in part)
        if scheme.lower() != "vapid" or "t" not in values or "k" not in values:
            return self._refuse(token, 401, "no vapid authorization")
        if self.vapid_key is not None and values["k"] != self.vapid_key:
            return self._refuse(token, 403, "not the key the subscription was made with")
        try:
            public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64(values["k"]))
            claims = jwt.decode(values["t"], public, algorithms=["ES256"], audience=self.url,
                                options={"require": ["aud", "exp", "sub"]})
        except (ValueError, jwt.PyJWTError) as error:
            return self._refuse(token, 403, f"vapid token refused: {error}")
        if claims["exp"] > time.time() + 24 * 3600:
            return self._refuse(token, 403, "vapid exp more than 24 hours ahead")
        if not str(claims["sub"]).startswith(("mailto:", "https://")):
            return self._refuse(token, 403, "vapid sub is neither mailto: nor https:")
        if request.headers.get("Content-Encoding") != "aes128gcm":
            return self._refuse(token, 415, "Content-Encoding must be aes128gcm")
        if not request.headers.get("TTL", "").isdigit():
            return self._refuse(token, 400, "TTL header missing")
        if browser.answers:
            status, headers = browser.answers.pop(0)
            self.arrived.set()
            return web.Response(status=status, headers=headers)
        try:
            payload = json.loads(decrypt(body, browser.private_key, browser.auth_secret))
        except Exception as error:  # noqa: BLE001 - whatever fails, the push is refused and the test sees why
            return self._refuse(token, 400, f"cannot decrypt: {type(error).__name__}: {error}")
        self.received.append(Received(token, payload, dict(request.headers), claims))
        self.arrived.set()
        return web.Response(status=201, headers={"Location": f"{self.url}/message/{len(self.received)}"})


async def serve_fake_push(aiohttp_server) -> FakePushService:
    service = FakePushService()
    server = await aiohttp_server(service.app)
    service.url = str(server.make_url("")).rstrip("/")
    return service

"""`--web.config.file`: real TLS handshakes, client certificates and basic auth over sockets.

Certificates come from trustme, made fresh for each module run; the exporter app runs on a
loopback port with no targets, and one test runs the real CLI end to end.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import bcrypt
import pytest
import trustme
from aiohttp import web

from exporter.cli import main as cli_main
from exporter.config import ConfigError, load_settings
from exporter.server import build_app
from exporter.web import BasicAuthUsers, RequestGuard, WebConfig, load_web_config, reread
from exporter.web.cache import SuccessCache
from tests.conftest import REPO, cli_env, run_cli

TIMEOUT = aiohttp.ClientTimeout(total=15)
PASSWORD = "correct horse battery staple"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()


@dataclass
class Pki:
    """A server CA and certificate, and a separate CA for client certificates."""

    ca: trustme.CA
    server: trustme.LeafCert
    client_ca: trustme.CA
    client: trustme.LeafCert
    other_san: trustme.LeafCert
    stranger: trustme.LeafCert

    def write(self, directory: Path) -> None:
        self.server.cert_chain_pems[0].write_to_path(directory / "server.pem")
        self.server.private_key_pem.write_to_path(directory / "server.key")
        self.client_ca.cert_pem.write_to_path(directory / "client-ca.pem")

    def client_context(
        self, cert: trustme.LeafCert | None = None, *, max_version: ssl.TLSVersion | None = None
    ) -> ssl.SSLContext:
        """A client that trusts only the test CA, and so verifies the server is ours."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self.ca.configure_trust(context)
        if cert is not None:
            cert.configure_cert(context)
        if max_version is not None:
            context.maximum_version = max_version
        return context


@pytest.fixture(scope="module")
def pki() -> Pki:
    ca, client_ca = trustme.CA(), trustme.CA()
    return Pki(
        ca=ca,
        server=ca.issue_cert("127.0.0.1", "localhost", common_name="exporter"),
        client_ca=client_ca,
        client=client_ca.issue_cert("prometheus.example", common_name="prometheus"),
        other_san=client_ca.issue_cert("intruder.example", common_name="intruder"),
        stranger=trustme.CA().issue_cert("prometheus.example", common_name="stranger"),
    )


def web_config(directory: Path, text: str) -> Path:
    path = directory / "web.yml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


TLS_FILES = """
tls_server_config:
  cert_file: server.pem
  key_file: server.key
"""


@asynccontextmanager
async def serving(config: WebConfig, tmp_path: Path) -> AsyncIterator[int]:
    """The exporter app with no targets behind `config`; yields its port."""
    empty = tmp_path / "exporter.yaml"
    empty.write_text("", encoding="utf-8")
    settings = load_settings(empty, {"demo": True})  # demo only waives "no targets"
    runner = web.AppRunner(build_app(settings, request_guard=RequestGuard(config)))
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=config.ssl_context())
        await site.start()
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


def basic(user: str, password: str) -> str:
    return aiohttp.encode_basic_auth(user, password)


async def get(
    url: str, context: ssl.SSLContext | None = None, authorization: str | None = None
) -> tuple[int, Any, str]:
    headers = {"Authorization": authorization} if authorization else {}
    async with (
        aiohttp.ClientSession(timeout=TIMEOUT) as session,
        session.get(url, ssl=context or True, headers=headers) as response,
    ):
        return response.status, response.headers, await response.text()


async def peer_certificate(port: int, context: ssl.SSLContext) -> dict[str, Any]:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    try:
        cert: dict[str, Any] = writer.get_extra_info("peercert")
        return cert
    finally:
        writer.close()
        await writer.wait_closed()


def common_name(cert: dict[str, Any]) -> str:
    return str(next(v for rdn in cert["subject"] for k, v in rdn if k == "commonName"))


async def test_tls_serves_metrics_to_a_client_that_verifies_the_certificate(
    pki: Pki, tmp_path: Path
) -> None:
    pki.write(tmp_path)
    path = web_config(
        tmp_path,
        TLS_FILES + "http_server_config:\n  headers:\n    X-Frame-Options: deny\n",
    )
    config = load_web_config(path)  # relative file names resolve against the file's directory
    async with serving(config, tmp_path) as port:
        status, headers, body = await get(f"https://127.0.0.1:{port}/metrics", pki.client_context())
        cert = await peer_certificate(port, pki.client_context())
    assert status == 200
    assert "# TYPE" in body
    assert headers["X-Frame-Options"] == "deny"
    assert common_name(cert) == "exporter"


async def test_plain_http_to_the_tls_port_gets_no_http_response(pki: Pki, tmp_path: Path) -> None:
    pki.write(tmp_path)
    config = load_web_config(web_config(tmp_path, TLS_FILES))
    async with serving(config, tmp_path) as port:
        with pytest.raises(aiohttp.ClientError):
            await get(f"http://127.0.0.1:{port}/metrics")
        # The listener survives the bad client.
        status, _, _ = await get(f"https://127.0.0.1:{port}/-/healthy", pki.client_context())
    assert status == 200


async def test_min_version_refuses_older_clients(pki: Pki, tmp_path: Path) -> None:
    pki.write(tmp_path)
    config = load_web_config(web_config(tmp_path, TLS_FILES + "  min_version: TLS13\n"))
    async with serving(config, tmp_path) as port:
        url = f"https://127.0.0.1:{port}/-/healthy"
        with pytest.raises(aiohttp.ClientError):
            await get(url, pki.client_context(max_version=ssl.TLSVersion.TLSv1_2))
        status, _, _ = await get(url, pki.client_context())
    assert status == 200


async def test_cipher_suites_take_go_names_and_bind_tls12(pki: Pki, tmp_path: Path) -> None:
    pki.write(tmp_path)
    text = TLS_FILES + "  cipher_suites: [TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256]\n"
    config = load_web_config(web_config(tmp_path, text))
    tls12 = pki.client_context(max_version=ssl.TLSVersion.TLSv1_2)
    async with serving(config, tmp_path) as port:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls12)
        negotiated = writer.get_extra_info("cipher")[0]
        writer.close()
        await writer.wait_closed()
        other = pki.client_context(max_version=ssl.TLSVersion.TLSv1_2)
        other.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256")
        with pytest.raises(aiohttp.ClientError):
            await get(f"https://127.0.0.1:{port}/-/healthy", other)
    assert negotiated == "ECDHE-ECDSA-CHACHA20-POLY1305"


async def test_require_and_verify_client_cert(pki: Pki, tmp_path: Path) -> None:
    pki.write(tmp_path)
    text = TLS_FILES + (
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: client-ca.pem\n"
    )
    config = load_web_config(web_config(tmp_path, text))
    async with serving(config, tmp_path) as port:
        url = f"https://127.0.0.1:{port}/metrics"
        status, _, _ = await get(url, pki.client_context(pki.client))
        with pytest.raises(aiohttp.ClientError):
            await get(url, pki.client_context())
        with pytest.raises(aiohttp.ClientError):
            await get(url, pki.client_context(pki.stranger))
    assert status == 200


async def test_verify_client_cert_if_given(pki: Pki, tmp_path: Path) -> None:
    pki.write(tmp_path)
    text = TLS_FILES + (
        "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: client-ca.pem\n"
    )
    config = load_web_config(web_config(tmp_path, text))
    async with serving(config, tmp_path) as port:
        url = f"https://127.0.0.1:{port}/metrics"
        without, _, _ = await get(url, pki.client_context())
        with_cert, _, _ = await get(url, pki.client_context(pki.client))
        with pytest.raises(aiohttp.ClientError):
            await get(url, pki.client_context(pki.stranger))
    assert (without, with_cert) == (200, 200)


async def test_client_allowed_sans(pki: Pki, tmp_path: Path) -> None:
    pki.write(tmp_path)
    text = TLS_FILES + (
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: client-ca.pem\n"
        "  client_allowed_sans: [prometheus.example]\n"
    )
    config = load_web_config(web_config(tmp_path, text))
    async with serving(config, tmp_path) as port:
        url = f"https://127.0.0.1:{port}/metrics"
        allowed, _, _ = await get(url, pki.client_context(pki.client))
        refused, _, _ = await get(url, pki.client_context(pki.other_san))
    assert (allowed, refused) == (200, 403)


async def test_inline_certificate_key_and_client_ca(pki: Pki, tmp_path: Path) -> None:
    def block(pem: bytes) -> str:
        return "|\n" + textwrap.indent(pem.decode(), "    ")

    text = (
        "tls_server_config:\n"
        f"  cert: {block(pki.server.cert_chain_pems[0].bytes())}"
        f"  key: {block(pki.server.private_key_pem.bytes())}"
        f"  client_ca: {block(pki.client_ca.cert_pem.bytes())}"
        "  client_auth_type: RequireAndVerifyClientCert\n"
    )
    config = load_web_config(web_config(tmp_path, text))
    async with serving(config, tmp_path) as port:
        url = f"https://127.0.0.1:{port}/metrics"
        status, _, _ = await get(url, pki.client_context(pki.client))
        with pytest.raises(aiohttp.ClientError):
            await get(url, pki.client_context())
    assert status == 200


async def test_changed_certificate_files_are_used_from_the_next_handshake(
    pki: Pki, tmp_path: Path
) -> None:
    pki.write(tmp_path)
    config = load_web_config(web_config(tmp_path, TLS_FILES))
    renewed = pki.ca.issue_cert("127.0.0.1", common_name="renewed")
    async with serving(config, tmp_path) as port:
        before = common_name(await peer_certificate(port, pki.client_context()))
        # As a Kubernetes secret update does: new files swapped in, not rewritten in place.
        for blob, name in (
            (renewed.cert_chain_pems[0], "server.pem"),
            (renewed.private_key_pem, "server.key"),
        ):
            blob.write_to_path(tmp_path / f"{name}.new")
            os.replace(tmp_path / f"{name}.new", tmp_path / name)
        after = common_name(await peer_certificate(port, pki.client_context()))
        (tmp_path / "server.pem").write_text("half-written", encoding="utf-8")
        still = common_name(await peer_certificate(port, pki.client_context()))
    assert (before, after, still) == ("exporter", "renewed", "renewed")


async def test_basic_auth_protects_every_path(tmp_path: Path) -> None:
    text = f"""
    basic_auth_users:
      alice: {HASH}
    http_server_config:
      headers:
        X-Content-Type-Options: nosniff
    """
    config = load_web_config(web_config(tmp_path, text))
    right = basic("alice", PASSWORD)
    async with serving(config, tmp_path) as port:
        base = f"http://127.0.0.1:{port}"
        anonymous = await get(f"{base}/metrics")
        wrong = await get(f"{base}/metrics", authorization=basic("alice", "wrong"))
        stranger = await get(f"{base}/metrics", authorization=basic("mallory", PASSWORD))
        health = await get(f"{base}/-/healthy")
        landing = await get(f"{base}/")
        allowed = await get(f"{base}/metrics", authorization=right)
        healthy = await get(f"{base}/-/healthy", authorization=right)
    for status, headers, _ in (anonymous, wrong, stranger, health, landing):
        assert status == 401
        assert headers["WWW-Authenticate"] == "Basic"
        assert headers["X-Content-Type-Options"] == "nosniff"
    assert allowed[0] == 200 and "# TYPE" in allowed[2]
    assert allowed[1]["X-Content-Type-Options"] == "nosniff"
    assert healthy[0] == 200


async def test_basic_auth_over_tls_with_a_client_certificate(pki: Pki, tmp_path: Path) -> None:
    pki.write(tmp_path)
    text = TLS_FILES + (
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: client-ca.pem\n"
        f"basic_auth_users:\n  alice: {HASH}\n"
    )
    config = load_web_config(web_config(tmp_path, text))
    async with serving(config, tmp_path) as port:
        url = f"https://127.0.0.1:{port}/metrics"
        context = pki.client_context(pki.client)
        anonymous, _, _ = await get(url, context)
        allowed, _, _ = await get(url, context, basic("alice", PASSWORD))
    assert (anonymous, allowed) == (401, 200)


async def test_bcrypt_runs_once_for_working_credentials_and_each_time_for_wrong_ones() -> None:
    users = BasicAuthUsers({"alice": HASH.encode()})
    right = basic("alice", PASSWORD)
    wrong = basic("alice", "guess")
    unknown = basic("mallory", PASSWORD)
    results = [await users.allows(right) for _ in range(5)]
    assert results == [True] * 5
    assert users.bcrypt_checks == 1
    # Failures are not cached: each costs a bcrypt, and none can take a success's place.
    assert [await users.allows(wrong) for _ in range(3)] == [False] * 3
    assert users.bcrypt_checks == 4
    # Unknown users pay for a bcrypt too, against a decoy, so timing does not reveal names.
    assert await users.allows(unknown) is False
    assert users.bcrypt_checks == 5
    assert await users.allows(None) is False
    assert await users.allows("Bearer abc") is False
    assert await users.allows("Basic !!!") is False
    assert users.bcrypt_checks == 5


async def test_guesses_never_evict_working_credentials() -> None:
    users = BasicAuthUsers({"alice": HASH.encode(), "bob": HASH.encode()})
    assert await users.allows(basic("alice", PASSWORD))
    for guess in range(150):  # more guesses than the cache holds entries
        assert not await users.allows(basic("alice", f"guess-{guess}"))
    checks = users.bcrypt_checks
    assert await users.allows(basic("alice", PASSWORD))
    assert users.bcrypt_checks == checks
    assert await users.allows(basic("bob", PASSWORD))
    assert users.bcrypt_checks == checks + 1


def test_the_success_cache_is_bounded_and_forgets_the_least_recently_used() -> None:
    cache = SuccessCache(size=2)
    cache.add(b"a")
    cache.add(b"b")
    assert cache.hit(b"a")  # now b is the least recently used
    cache.add(b"c")
    assert (cache.hit(b"a"), cache.hit(b"b"), cache.hit(b"c"), len(cache)) == (True, False, True, 2)


async def test_a_check_whose_client_has_gone_is_dropped() -> None:
    users = BasicAuthUsers({"alice": HASH.encode()})
    assert not await users.allows(basic("alice", PASSWORD), client_gone=lambda: True)
    assert (users.bcrypt_checks, users.dropped_checks) == (0, 1)
    assert await users.allows(basic("alice", PASSWORD), client_gone=lambda: False)
    assert (users.bcrypt_checks, users.dropped_checks) == (1, 1)


async def test_non_ascii_credentials_are_compared_as_utf8_bytes() -> None:
    hashed = bcrypt.hashpw("pässwörd".encode(), bcrypt.gensalt(rounds=4))
    users = BasicAuthUsers({"zoë": hashed})
    assert await users.allows(basic("zoë", "pässwörd"))
    assert not await users.allows(basic("zoe", "pässwörd"))


async def test_passwords_compare_on_their_first_72_bytes_as_in_go() -> None:
    long_password = "p" * 72 + "ignored by bcrypt"
    hashed = bcrypt.hashpw(long_password[:72].encode(), bcrypt.gensalt(rounds=4))
    users = BasicAuthUsers({"bob": hashed})
    assert await users.allows(basic("bob", long_password))
    assert not await users.allows(basic("bob", "p" * 71))


async def test_rate_limit_answers_429_past_the_burst(tmp_path: Path) -> None:
    config = load_web_config(web_config(tmp_path, "rate_limit:\n  interval: 1h\n  burst: 2\n"))
    async with serving(config, tmp_path) as port:
        statuses = [(await get(f"http://127.0.0.1:{port}/-/healthy"))[0] for _ in range(3)]
    assert statuses == [200, 200, 429]


async def test_empty_file_means_plain_http_without_auth(tmp_path: Path) -> None:
    config = load_web_config(web_config(tmp_path, "# nothing configured\n"))
    assert config.ssl_context() is None
    async with serving(config, tmp_path) as port:
        statuses = [(await get(f"http://127.0.0.1:{port}/-/healthy"))[0] for _ in range(3)]
    assert statuses == [200, 200, 200]


def test_reread_keeps_the_listeners_tls_and_the_users_cache(pki: Pki, tmp_path: Path) -> None:
    pki.write(tmp_path)
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()
    users = f"basic_auth_users:\n  prom: '{hashed}'\n"
    path = web_config(tmp_path, TLS_FILES + users)
    first = load_web_config(path)
    same, tls_changed = reread(first)
    assert not tls_changed and same.tls is first.tls and same.users is first.users
    # TLS settings wait for a restart, and keep saying so until then; headers go live.
    web_config(tmp_path, TLS_FILES + "  min_version: TLS13\n" + users)
    changed, tls_changed = reread(same)
    assert tls_changed and changed.tls is first.tls
    _, tls_changed = reread(changed)
    assert tls_changed
    web_config(tmp_path, TLS_FILES + "http_server_config:\n  headers:\n    X-Frame-Options: deny\n")
    headers, tls_changed = reread(first)
    assert not tls_changed and headers.users is None
    assert headers.headers == {"X-Frame-Options": "deny"}
    web_config(tmp_path, TLS_FILES + "basic_auth_users:\n  prom: plain\n")
    with pytest.raises(ConfigError) as refused:
        reread(first)
    assert all(p.startswith("web.config.file: ") for p in refused.value.problems)


def test_notes_for_settings_python_cannot_honour_exactly(pki: Pki, tmp_path: Path) -> None:
    pki.write(tmp_path)
    text = TLS_FILES + "  client_auth_type: RequestClientCert\n  curve_preferences: [X25519]\n"
    config = load_web_config(web_config(tmp_path, text))
    context = config.ssl_context()
    assert context is not None and context.verify_mode == ssl.CERT_NONE
    assert any("RequestClientCert" in note for note in config.notes)
    assert any("curve_preferences" in note for note in config.notes)


BAD_CONFIGS = {
    "unknown top-level key": ("tls_server_konfig: {}\n", "tls_server_konfig: unknown key"),
    "unknown nested key": (
        TLS_FILES + "  certfile: x.pem\n",
        "tls_server_config.certfile: unknown key",
    ),
    "missing cert file": (
        "tls_server_config:\n  cert_file: absent.pem\n  key_file: server.key\n",
        "tls_server_config.cert_file: cannot read",
    ),
    "bad client_auth_type": (
        TLS_FILES + "  client_auth_type: RequireSomething\n",
        "tls_server_config.client_auth_type: Input should be",
    ),
    "bad bcrypt hash": (
        "basic_auth_users:\n  alice: plaintext-password\n",
        "basic_auth_users.alice: not a bcrypt hash",
    ),
    "bad YAML": ("tls_server_config:\n  cert_file: [unclosed\n", "invalid YAML in"),
    "duplicate key": (
        "basic_auth_users:\n  alice: x\n  alice: y\n",
        "duplicate key 'alice'",
    ),
    "not a mapping": ("- a\n- b\n", "must hold a mapping of keys, not a list"),
    "key without certificate": (
        "tls_server_config:\n  key_file: server.key\n",
        "tls_server_config.cert_file: required",
    ),
    "TLS options without certificate": (
        "tls_server_config:\n  min_version: TLS13\n",
        "tls_server_config.cert_file: required",
    ),
    "cert and cert_file": (
        TLS_FILES + "  cert: inline\n",
        "tls_server_config.cert: set cert or cert_file, not both",
    ),
    "unknown TLS version": (
        TLS_FILES + "  min_version: TLS14\n",
        "tls_server_config.min_version: Input should be",
    ),
    "min above max": (
        TLS_FILES + "  min_version: TLS13\n  max_version: TLS12\n",
        "tls_server_config.min_version: TLS13 is above max_version",
    ),
    "CA without client auth": (
        TLS_FILES + "  client_ca_file: client-ca.pem\n",
        "tls_server_config.client_auth_type: NoClientCert ignores the client CA",
    ),
    "verifying without a CA": (
        TLS_FILES + "  client_auth_type: RequireAndVerifyClientCert\n",
        "tls_server_config.client_ca_file: required",
    ),
    "SANs without a required certificate": (
        TLS_FILES + "  client_auth_type: VerifyClientCertIfGiven\n"
        "  client_ca_file: client-ca.pem\n  client_allowed_sans: [a.example]\n",
        "tls_server_config.client_allowed_sans: needs client_auth_type",
    ),
    "unknown cipher suite": (
        TLS_FILES + "  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n",
        "tls_server_config.cipher_suites[0]: unknown cipher suite",
    ),
    "header that cannot be set": (
        "http_server_config:\n  headers:\n    Server: nginx\n",
        "http_server_config.headers.Server: cannot be configured",
    ),
    "header value not allowed": (
        "http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
        "http_server_config.headers.X-Frame-Options: must be one of deny, sameorigin",
    ),
    "rate limit without burst": (
        "rate_limit:\n  interval: 1s\n",
        "rate_limit.burst: must be at least 1",
    ),
    "file that is not a certificate": (
        "tls_server_config:\n  cert_file: web.yml\n  key_file: server.key\n",
        "tls_server_config.cert_file: no PEM certificate in",
    ),
    "client CA that is not a certificate": (
        TLS_FILES
        + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: server.key\n",
        "tls_server_config.client_ca_file: no valid PEM certificate in",
    ),
}


@pytest.mark.parametrize("case", BAD_CONFIGS, ids=str)
def test_bad_web_config_names_the_key(case: str, pki: Pki, tmp_path: Path) -> None:
    text, expected = BAD_CONFIGS[case]
    pki.write(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_web_config(web_config(tmp_path, text))
    assert any(
        p.startswith("web.config.file: ") and expected in p for p in caught.value.problems
    ), caught.value.problems


def test_key_that_does_not_match_the_certificate(pki: Pki, tmp_path: Path) -> None:
    pki.write(tmp_path)
    pki.client.private_key_pem.write_to_path(tmp_path / "server.key")
    with pytest.raises(ConfigError) as caught:
        load_web_config(web_config(tmp_path, TLS_FILES))
    assert caught.value.problems == [
        "web.config.file: tls_server_config.key_file: cannot be used with the certificate: "
        "key values mismatch"
    ]


def test_problems_never_quote_secrets(tmp_path: Path) -> None:
    text = """
    tls_server_config:
      cert: not-a-certificate
      key: |
        -----BEGIN PRIVATE KEY-----
        c2VjcmV0LWtleS1tYXRlcmlhbA==
        -----END PRIVATE KEY-----
    basic_auth_users:
      alice: hunter2-is-not-a-hash
    """
    with pytest.raises(ConfigError) as caught:
        load_web_config(web_config(tmp_path, text))
    joined = "\n".join(caught.value.problems)
    assert "hunter2" not in joined and "c2VjcmV0" not in joined
    assert "basic_auth_users.alice: not a bcrypt hash" in joined
    assert "tls_server_config.cert: no PEM certificate inline" in joined


CLI_BAD_CASES = [
    "unknown top-level key",
    "missing cert file",
    "bad client_auth_type",
    "bad bcrypt hash",
    "bad YAML",
]


def cli_args(pki: Pki, tmp_path: Path, case: str) -> list[str]:
    pki.write(tmp_path)
    path = web_config(tmp_path, BAD_CONFIGS[case][0])
    return ["--demo", "--web.config.file", str(path), "--web.listen-address", "127.0.0.1:0"]


def assert_stopped_on(case: str, code: int, stderr: str) -> None:
    assert code == 2, stderr
    assert f"web.config.file: {BAD_CONFIGS[case][1]}" in stderr
    assert "Traceback" not in stderr
    assert "plaintext-password" not in stderr


@pytest.mark.parametrize("case", CLI_BAD_CASES)
def test_cli_stops_with_exit_2_on_a_bad_web_config(
    case: str, pki: Pki, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the command line's entry point (`training-job-exporter`), in this process;
    the test below runs it as its own process."""
    code = cli_main(cli_args(pki, tmp_path, case))
    assert_stopped_on(case, code, capsys.readouterr().err)


def test_the_cli_process_exits_2_on_a_bad_web_config(pki: Pki, tmp_path: Path) -> None:
    result = run_cli(*cli_args(pki, tmp_path, CLI_BAD_CASES[0]))
    assert_stopped_on(CLI_BAD_CASES[0], result.returncode, result.stderr)


async def test_cli_serves_tls_and_basic_auth_end_to_end(pki: Pki, tmp_path: Path) -> None:
    pki.write(tmp_path)
    path = web_config(tmp_path, TLS_FILES + f"basic_auth_users:\n  alice: {HASH}\n")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "exporter", "--demo",
        "--web.config.file", str(path), "--web.listen-address", "127.0.0.1:0",
        cwd=REPO, env=cli_env(), stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    lines: list[str] = []
    try:
        port = await asyncio.wait_for(_listening_port(process.stderr, lines), timeout=30)
        drain = asyncio.create_task(_collect(process.stderr, lines))
        url = f"https://127.0.0.1:{port}/metrics"
        anonymous, headers, _ = await get(url, pki.client_context())
        allowed, _, body = await get(url, pki.client_context(), basic("alice", PASSWORD))
        with pytest.raises(aiohttp.ClientError):
            await get(f"http://127.0.0.1:{port}/metrics")
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        returncode = await asyncio.wait_for(process.wait(), timeout=15)
    await drain
    assert (anonymous, headers["WWW-Authenticate"], allowed) == (401, "Basic", 200)
    assert "# TYPE" in body
    assert returncode == 0
    log = "\n".join(lines)
    assert '"web config loaded"' in log
    assert PASSWORD not in log and "Authorization" not in log


async def _listening_port(stream: asyncio.StreamReader, lines: list[str]) -> int:
    while line := (await stream.readline()).decode():
        lines.append(line)
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("event") == "listening":
            return int(event["bound"][0].rsplit(":", 1)[1])
    raise AssertionError("exporter exited before listening:\n" + "".join(lines))


async def _collect(stream: asyncio.StreamReader, lines: list[str]) -> None:
    while line := (await stream.readline()).decode():
        lines.append(line)

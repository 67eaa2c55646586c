"""`--web.config.file`: TLS, client certificates and basic auth, in exporter-toolkit's format.

The file has the keys node_exporter reads (prometheus/exporter-toolkit `docs/web-configuration.md`):
`tls_server_config`, `http_server_config`, `basic_auth_users` and `rate_limit`. Every problem
stops the process before it listens: one line per problem naming the key, never a secret value.

Which paths are protected: all of them. exporter-toolkit wraps the whole HTTP handler, so
node_exporter (which has no health path) and Prometheus (whose `/-/healthy` and `/-/ready` sit
behind the same wrapper) ask for credentials on every path. This exporter does the same:
`/metrics`, `/-/healthy`, `/-/ready` and the landing page all need the client certificate and
the password when those are configured. Kubernetes probes should then use `tcpSocket`.

Where Python's TLS stack differs from Go's, the stricter reading wins or the start fails:
- `RequestClientCert` cannot ask for a certificate without verifying it, so none is asked for;
  as in Go every client is let in. `RequireAnyClientCert` cannot skip verification, so it
  verifies against `client_ca_file`/`client_ca`, which it therefore needs.
- `VerifyClientCertIfGiven` and `RequireAndVerifyClientCert` need a client CA; Go would fall
  back to the system roots, which would let in any certificate from a public CA.
- `client_allowed_sans` is checked per request (403) instead of during the handshake.
- Any `tls_server_config` key without a certificate and key is an error (Go would silently
  serve plain HTTP); so are `cert` with `cert_file`, `key` with `key_file`, `client_ca` with
  `client_ca_file`, a `min_version` above `max_version`, and encrypted private keys.
- `cipher_suites` take Go's names and apply to TLS 1.2 and older (TLS 1.3 suites are not
  configurable in Go either); `curve_preferences` are checked and ignored with a note (OpenSSL's
  defaults are X25519 and the NIST curves); `http2` is ignored (aiohttp speaks HTTP/1.1).
- Relative file names are relative to the web config file, as in exporter-toolkit. The
  certificate, key and client CA files are re-read at the next handshake after they change
  (exporter-toolkit re-reads them on every handshake); a change that does not load is logged
  and the previous certificate stays in use. Other changes to the file need a restart.

Basic auth follows exporter-toolkit: `WWW-Authenticate: Basic` on 401, unknown users checked
against a decoy hash of the same cost so timing does not reveal names, one bcrypt at a time,
and results cached (100 entries) so a scraper's repeated credentials cost one bcrypt in total.
The cache is keyed by an HMAC with a per-process random key, so it holds no plain password.
Passwords are compared on their first 72 bytes, as Go's and OpenBSD's bcrypt do.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import ipaddress
import re
import secrets
import ssl
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import bcrypt
import yaml
from aiohttp import hdrs, web
from aiohttp.typedefs import Handler, Middleware
from aiolimiter import AsyncLimiter
from pydantic import AfterValidator, BeforeValidator, Field, SecretStr, ValidationError

from exporter.config import ConfigError, Duration, StrictModel, format_loc
from exporter.logs import get_logger

log = get_logger(__name__)

PREFIX = "web.config.file"
BCRYPT_CACHE_SIZE = 100
BCRYPT_MAX_PASSWORD = 72

# crypto/tls CipherSuites() names (and the RSA key-exchange ones older Go releases listed),
# with their IANA code points; OpenSSL names them differently but shares the code points.
GO_CIPHER_SUITES: dict[str, int] = {
    "TLS_RSA_WITH_AES_128_CBC_SHA": 0x002F,
    "TLS_RSA_WITH_AES_256_CBC_SHA": 0x0035,
    "TLS_RSA_WITH_AES_128_GCM_SHA256": 0x009C,
    "TLS_RSA_WITH_AES_256_GCM_SHA384": 0x009D,
    "TLS_AES_128_GCM_SHA256": 0x1301,
    "TLS_AES_256_GCM_SHA384": 0x1302,
    "TLS_CHACHA20_POLY1305_SHA256": 0x1303,
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": 0xC009,
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": 0xC00A,
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": 0xC013,
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": 0xC014,
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": 0xC02B,
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": 0xC02C,
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": 0xC02F,
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": 0xC030,
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": 0xCCA8,
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": 0xCCA9,
}
TLS13_CIPHER_SUITES = frozenset({0x1301, 0x1302, 0x1303})

TLS_VERSIONS: dict[str, ssl.TLSVersion] = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}

# The only headers exporter-toolkit lets a web config set, with their allowed values if fixed.
EXTRA_HEADERS: dict[str, tuple[str, ...]] = {
    "Strict-Transport-Security": (),
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": (),
    "Content-Security-Policy": (),
}

_BCRYPT_HASH = re.compile(r"\$2[abxy]\$(?P<cost>0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")
_BCRYPT_ALPHABET = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

ClientAuthType = Literal[
    "NoClientCert",
    "RequestClientCert",
    "RequireAnyClientCert",
    "VerifyClientCertIfGiven",
    "RequireAndVerifyClientCert",
]
VERIFYING_CLIENT_AUTH = frozenset(
    {"RequireAnyClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"}
)
REQUIRING_CLIENT_AUTH = frozenset({"RequireAnyClientCert", "RequireAndVerifyClientCert"})


def _blank_is_unset(value: object) -> object:
    # exporter-toolkit reads an empty string as "not set".
    return None if value == "" else value


def _client_auth_alias(value: object) -> object:
    if value in ("", None):
        return "NoClientCert"
    # exporter-toolkit still accepts the old spelling.
    return "RequireAnyClientCert" if value == "RequireClientCert" else value


def _known_cipher(name: str) -> str:
    if name not in GO_CIPHER_SUITES:
        raise ValueError(
            f"unknown cipher suite {name!r}: use a Go crypto/tls name such as "
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
        )
    return name


OptionalText = Annotated[str | None, BeforeValidator(_blank_is_unset)]
OptionalSecret = Annotated[SecretStr | None, BeforeValidator(_blank_is_unset)]
OptionalPath = Annotated[Path | None, BeforeValidator(_blank_is_unset)]
TlsVersionName = Literal["TLS10", "TLS11", "TLS12", "TLS13"]
CipherSuiteName = Annotated[str, AfterValidator(_known_cipher)]
CurveName = Literal["CurveP256", "CurveP384", "CurveP521", "X25519"]


class TlsServerConfig(StrictModel):
    cert: OptionalText = None
    key: OptionalSecret = None
    client_ca: OptionalText = None
    cert_file: OptionalPath = None
    key_file: OptionalPath = None
    client_auth_type: Annotated[ClientAuthType, BeforeValidator(_client_auth_alias)] = (
        "NoClientCert"
    )
    client_ca_file: OptionalPath = None
    client_allowed_sans: list[str] | None = None
    min_version: TlsVersionName = "TLS12"
    max_version: TlsVersionName = "TLS13"
    cipher_suites: list[CipherSuiteName] | None = None
    prefer_server_cipher_suites: bool = True
    curve_preferences: list[CurveName] | None = None

    @property
    def has_client_ca(self) -> bool:
        return self.client_ca is not None or self.client_ca_file is not None


class HttpServerConfig(StrictModel):
    http2: bool = True
    headers: dict[str, str] | None = None


class RateLimitConfig(StrictModel):
    interval: Duration = 0.0
    burst: Annotated[int, Field(ge=0)] = 0


class WebConfigFile(StrictModel):
    """The file as written; `load_web_config` checks what the types alone cannot."""

    tls_server_config: TlsServerConfig | None = None
    http_server_config: HttpServerConfig | None = None
    rate_limit: RateLimitConfig | None = None
    basic_auth_users: dict[str, SecretStr] | None = None


def load_web_config(path: str | Path) -> WebConfig:
    """Read and check the web config file; raise ConfigError with every problem found."""
    path = Path(path)
    model = _parse(path, _read_yaml(path))
    tls_problems = _tls_problems(model.tls_server_config)
    problems = [
        *tls_problems,
        *_header_problems(model.http_server_config),
        *_rate_limit_problems(model.rate_limit),
        *_user_problems(model.basic_auth_users),
    ]
    tls, tls_config = None, model.tls_server_config
    if tls_config is not None and _tls_enabled(tls_config) and not tls_problems:
        try:
            tls = TlsContexts(tls_config, path.parent)
        except ConfigError as exc:
            problems += exc.problems
    if problems:
        raise ConfigError(_prefixed(problems))
    return WebConfig(path=path, model=model, tls=tls)


def _prefixed(problems: Iterable[str]) -> list[str]:
    return [f"{PREFIX}: {problem}" for problem in problems]


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; Go's strict decoder refuses them, and so do we."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue
            if key_node.value in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key_node.value!r}", key_node.start_mark
                )
            seen.add(key_node.value)
        return super().construct_mapping(node, deep)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc.__class__.__name__
        raise ConfigError(_prefixed([f"cannot read {path}: {reason}"])) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError(_prefixed([f"invalid YAML in {path}{where}: {problem}"])) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise ConfigError(_prefixed([f"{path} must hold a mapping of keys, not a {kind}"]))
    return data


def _parse(path: Path, data: Mapping[str, Any]) -> WebConfigFile:
    try:
        return WebConfigFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            _prefixed(_describe(error) for error in exc.errors(include_input=False))
        ) from None


def _describe(error: Mapping[str, Any]) -> str:
    loc = [p for p in error["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
    message = str(error["msg"])
    if error["type"] == "extra_forbidden":
        message = "unknown key"
    return f"{format_loc(loc)}: {message.removeprefix('Value error, ')}"


def _tls_enabled(tls: TlsServerConfig) -> bool:
    # An empty `tls_server_config:` means plain HTTP, as in exporter-toolkit; any key in it
    # asks for TLS (and then needs a certificate and key, see `_tls_problems`).
    return bool(tls.model_fields_set)


def _tls_problems(tls: TlsServerConfig | None) -> list[str]:
    if tls is None or not _tls_enabled(tls):
        return []
    at = "tls_server_config"
    problems = []
    for inline, file in (("cert", "cert_file"), ("key", "key_file")):
        given = [name for name in (inline, file) if getattr(tls, name) is not None]
        if not given:
            problems.append(f"{at}.{file}: required (or {inline} inline) to serve TLS")
        elif len(given) == 2:
            problems.append(f"{at}.{inline}: set {inline} or {file}, not both")
    if tls.client_ca is not None and tls.client_ca_file is not None:
        problems.append(f"{at}.client_ca: set client_ca or client_ca_file, not both")
    if TLS_VERSIONS[tls.min_version] > TLS_VERSIONS[tls.max_version]:
        problems.append(f"{at}.min_version: {tls.min_version} is above max_version")
    auth = tls.client_auth_type
    if auth == "NoClientCert" and tls.has_client_ca:
        problems.append(
            f"{at}.client_auth_type: NoClientCert ignores the client CA; "
            "use RequireAndVerifyClientCert to check client certificates"
        )
    if auth in VERIFYING_CLIENT_AUTH and not tls.has_client_ca:
        problems.append(f"{at}.client_ca_file: required (or client_ca inline) with {auth}")
    if tls.client_allowed_sans is not None:
        if auth not in REQUIRING_CLIENT_AUTH:
            problems.append(
                f"{at}.client_allowed_sans: needs client_auth_type RequireAndVerifyClientCert"
            )
        elif not tls.client_allowed_sans:
            problems.append(f"{at}.client_allowed_sans: list at least one SAN, or drop the key")
    return problems


def _header_problems(http: HttpServerConfig | None) -> list[str]:
    problems = []
    for name, value in (http.headers if http and http.headers else {}).items():
        at = f"http_server_config.headers.{name}"
        if name not in EXTRA_HEADERS:
            problems.append(f"{at}: cannot be configured; allowed: {', '.join(EXTRA_HEADERS)}")
        elif value and EXTRA_HEADERS[name] and value not in EXTRA_HEADERS[name]:
            problems.append(f"{at}: must be one of {', '.join(EXTRA_HEADERS[name])}")
    return problems


def _rate_limit_problems(rate: RateLimitConfig | None) -> list[str]:
    if rate is not None and rate.interval > 0 and rate.burst < 1:
        return ["rate_limit.burst: must be at least 1 when interval is set"]
    return []


def _user_problems(users: Mapping[str, SecretStr] | None) -> list[str]:
    return [
        f"basic_auth_users.{name}: not a bcrypt hash (want $2y$, $2b$ or $2a$ with cost 04-31, "
        "as made by `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)"
        for name, hashed in (users or {}).items()
        if not _BCRYPT_HASH.fullmatch(hashed.get_secret_value())
    ]


@dataclass(frozen=True)
class _PemSource:
    """One certificate, key or CA: inline text or a file, and the key that names it."""

    key: str
    inline: str | None
    file: Path | None

    def read(self) -> str:
        if self.file is None:
            return self.inline or ""
        try:
            return self.file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or exc.__class__.__name__
            raise ConfigError([f"{self.key}: cannot read {self.file}: {reason}"]) from None

    def where(self) -> str:
        return f"in {self.file}" if self.file is not None else "inline"


class TlsContexts:
    """The server's SSLContext, rebuilt at a handshake when a certificate file has changed.

    `base` goes to the listening socket; its SNI callback (called for every handshake, with or
    without SNI) swaps in the newest context, which only changes the certificate, key and
    trusted client CAs: the protocol settings come from the file, which is read once.
    """

    def __init__(self, tls: TlsServerConfig, base_dir: Path) -> None:
        def source(name: str, inline: str | None, file: Path | None) -> _PemSource:
            at = "tls_server_config"
            if file is None:
                return _PemSource(f"{at}.{name}", inline, None)
            return _PemSource(f"{at}.{name}_file", None, base_dir / file)

        self.settings = tls
        key = tls.key.get_secret_value() if tls.key is not None else None
        self._cert = source("cert", tls.cert, tls.cert_file)
        self._key = source("key", key, tls.key_file)
        self._client_ca = (
            source("client_ca", tls.client_ca, tls.client_ca_file) if tls.has_client_ca else None
        )
        self.notes: list[str] = []
        self._signature = self._file_signature()
        self._failed_signature: object = None
        self.base = self._build()
        self._current = self.base
        if any(s.file is not None for s in self._sources()):
            self.base.sni_callback = self._on_client_hello

    def _sources(self) -> list[_PemSource]:
        return [self._cert, self._key, *([self._client_ca] if self._client_ca else [])]

    def _file_signature(self) -> tuple[tuple[int, int, int] | None, ...]:
        signature: list[tuple[int, int, int] | None] = []
        for source in self._sources():
            if source.file is None:
                continue
            try:
                st = source.file.stat()
            except OSError:
                signature.append(None)
            else:
                signature.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(signature)

    def _on_client_hello(self, ssl_object: Any, server_name: str | None, _: Any) -> None:
        try:
            self._reload_if_changed()
            if ssl_object.context is not self._current:
                ssl_object.context = self._current
        except Exception as exc:  # an exception here would fail the handshake
            log.error("TLS certificate reload failed", error=exc.__class__.__name__)

    def _reload_if_changed(self) -> None:
        signature = self._file_signature()
        if signature in (self._signature, self._failed_signature):
            return
        try:
            context = self._build()
        except ConfigError as exc:
            self._failed_signature = signature
            log.warning(
                "TLS files changed but do not load; serving the previous certificate",
                problems=_prefixed(exc.problems),
            )
            return
        self._current, self._signature, self._failed_signature = context, signature, None
        log.info("TLS certificate reloaded")

    def _build(self) -> ssl.SSLContext:
        tls = self.settings
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = TLS_VERSIONS[tls.min_version]
        context.maximum_version = TLS_VERSIONS[tls.max_version]
        if tls.prefer_server_cipher_suites:
            context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
        else:
            context.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
        notes: list[str] = []
        problems = _apply_cipher_suites(context, tls, notes)
        problems += self._load_certificate(context)
        problems += self._load_client_ca(context)
        if problems:
            raise ConfigError(problems)
        context.verify_mode = _verify_mode(tls.client_auth_type)
        if tls.client_auth_type == "RequestClientCert":
            notes.append(
                "RequestClientCert: client certificates are not requested (Python's TLS cannot "
                "request one without verifying it); every client is let in, as with Go"
            )
        elif tls.client_auth_type == "RequireAnyClientCert":
            notes.append("RequireAnyClientCert: client certificates are verified against the CA")
        if tls.curve_preferences:
            notes.append("curve_preferences: ignored; OpenSSL's default groups are used")
        self.notes = notes
        return context

    def _load_certificate(self, context: ssl.SSLContext) -> list[str]:
        problems = []
        try:
            cert_text = self._cert.read()
        except ConfigError as exc:
            problems += exc.problems
            cert_text = None
        try:
            key_text = self._key.read()
        except ConfigError as exc:
            problems += exc.problems
            key_text = None
        if cert_text is not None and "-----BEGIN CERTIFICATE-----" not in cert_text:
            problems.append(f"{self._cert.key}: no PEM certificate {self._cert.where()}")
        elif cert_text is not None and not _parses_as_certificates(cert_text):
            problems.append(f"{self._cert.key}: invalid PEM certificate {self._cert.where()}")
        if key_text is not None and "PRIVATE KEY-----" not in key_text:
            problems.append(f"{self._key.key}: no PEM private key {self._key.where()}")
        elif key_text is not None and "ENCRYPTED" in key_text:
            problems.append(f"{self._key.key}: encrypted private keys are not supported")
        if problems or cert_text is None or key_text is None:
            return problems
        with _pem_files(self._cert, cert_text, self._key, key_text) as (cert_path, key_path):
            try:
                context.load_cert_chain(cert_path, key_path, password=_no_passphrase)
            except (ssl.SSLError, OSError) as exc:
                return [f"{self._key.key}: cannot be used with the certificate: {_reason(exc)}"]
        return []

    def _load_client_ca(self, context: ssl.SSLContext) -> list[str]:
        if self._client_ca is None:
            return []
        try:
            text = self._client_ca.read()
        except ConfigError as exc:
            return exc.problems
        if not _parses_as_certificates(text):
            return [f"{self._client_ca.key}: no valid PEM certificate {self._client_ca.where()}"]
        context.load_verify_locations(cadata=text)
        return []


def _parses_as_certificates(text: str) -> bool:
    scratch = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        scratch.load_verify_locations(cadata=text)
    except (ssl.SSLError, ValueError):
        return False
    return scratch.cert_store_stats()["x509"] > 0


def _no_passphrase() -> bytes:
    # Without a callback OpenSSL would prompt on the terminal for an encrypted key.
    return b""


def _reason(exc: Exception) -> str:
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and reason:
        return reason.lower().replace("_", " ")
    return getattr(exc, "strerror", None) or exc.__class__.__name__


@contextmanager
def _pem_files(
    cert: _PemSource, cert_text: str, key: _PemSource, key_text: str
) -> Iterator[tuple[Path, Path]]:
    """File names for load_cert_chain, which takes no PEM text: inline ones go to a private dir."""
    if cert.file is not None and key.file is not None:
        yield cert.file, key.file
        return
    with tempfile.TemporaryDirectory(prefix="tje-tls-") as scratch:
        cert_path = cert.file or Path(scratch, "cert.pem")
        key_path = key.file or Path(scratch, "key.pem")
        if cert.file is None:
            cert_path.write_text(cert_text, encoding="utf-8")
        if key.file is None:
            key_path.touch(mode=0o600)
            key_path.write_text(key_text, encoding="utf-8")
        yield cert_path, key_path


def _apply_cipher_suites(
    context: ssl.SSLContext, tls: TlsServerConfig, notes: list[str]
) -> list[str]:
    if not tls.cipher_suites:
        return []
    scratch = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    scratch.set_ciphers("ALL")
    available = {c["id"] & 0xFFFF: c["name"] for c in scratch.get_ciphers()}
    names, problems = [], []
    for index, go_name in enumerate(tls.cipher_suites):
        code = GO_CIPHER_SUITES[go_name]
        if code in TLS13_CIPHER_SUITES:
            continue
        if code not in available:
            problems.append(
                f"tls_server_config.cipher_suites[{index}]: {go_name} is not available "
                f"in {ssl.OPENSSL_VERSION}"
            )
        else:
            names.append(available[code])
    if problems:
        return problems
    if names:
        context.set_ciphers(":".join(names))
        return []
    # Only TLS 1.3 suites listed: Go then has nothing to offer a TLS 1.2 client either.
    if TLS_VERSIONS[tls.max_version] < ssl.TLSVersion.TLSv1_3:
        return ["tls_server_config.cipher_suites: only TLS 1.3 suites, but max_version is below"]
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    notes.append("cipher_suites: only TLS 1.3 suites listed, so only TLS 1.3 is offered")
    return []


def _verify_mode(client_auth: str) -> ssl.VerifyMode:
    if client_auth in REQUIRING_CLIENT_AUTH:
        return ssl.CERT_REQUIRED
    if client_auth == "VerifyClientCertIfGiven":
        return ssl.CERT_OPTIONAL
    return ssl.CERT_NONE


@dataclass
class BasicAuthUsers:
    """Checks `Authorization: Basic` headers against bcrypt hashes, caching the outcomes."""

    hashes: Mapping[str, bytes]
    bcrypt_checks: int = 0
    _names: list[tuple[bytes, bytes]] = field(init=False, repr=False)
    _decoy: bytes = field(init=False, repr=False)
    _cache_key: bytes = field(init=False, repr=False)
    _cache: dict[bytes, bool] = field(init=False, repr=False, default_factory=dict)
    _lock: asyncio.Lock = field(init=False, repr=False, default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        self._names = [(_digest(name.encode()), hashed) for name, hashed in self.hashes.items()]
        self._decoy = _decoy_hash(max(_cost(h) for h in self.hashes.values()))
        self._cache_key = secrets.token_bytes(32)

    async def allows(self, authorization: str | None) -> bool:
        credentials = _basic_credentials(authorization) if authorization else None
        if credentials is None:
            return False
        user, password = credentials
        stored = self._lookup(user)
        hashed = stored if stored is not None else self._decoy
        key = hmac.new(
            self._cache_key, b"%d:%s%s%s" % (len(user), user, hashed, password), hashlib.sha256
        ).digest()
        matches = self._cache.get(key)
        if matches is None:
            matches = await self._check(key, password, hashed)
        return matches and stored is not None

    def _lookup(self, user: bytes) -> bytes | None:
        """The user's hash, looking at every name so the time taken does not depend on which."""
        wanted = _digest(user)
        found = None
        for name, hashed in self._names:
            if hmac.compare_digest(name, wanted):
                found = hashed
        return found

    async def _check(self, key: bytes, password: bytes, hashed: bytes) -> bool:
        # One bcrypt at a time, as in exporter-toolkit: a flood of guesses queues up instead of
        # taking every core; cached callers (the scrapers) never wait for the lock.
        async with self._lock:
            matches = self._cache.get(key)
            if matches is None:
                matches = await asyncio.to_thread(_bcrypt_matches, password, hashed)
                self.bcrypt_checks += 1
                if len(self._cache) >= BCRYPT_CACHE_SIZE:
                    del self._cache[next(iter(self._cache))]
                self._cache[key] = matches
        return matches


def _basic_credentials(header: str) -> tuple[bytes, bytes] | None:
    """(user, password) from `Basic base64(user:password)`, read as Go's Request.BasicAuth does.

    aiohttp's BasicAuth.decode would do this, but aiohttp 3.14 deprecates the class for removal.
    """
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        return None
    user, colon, password = decoded.partition(b":")
    return (user, password) if colon else None


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


def _cost(hashed: bytes) -> int:
    return int(hashed[4:6])


def _decoy_hash(cost: int) -> bytes:
    """A well-formed hash of the given cost that no password matches, for unknown users."""
    checksum = "".join(secrets.choice(_BCRYPT_ALPHABET) for _ in range(31))
    return bcrypt.gensalt(rounds=cost) + checksum.encode()


def _bcrypt_matches(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password[:BCRYPT_MAX_PASSWORD], hashed)
    except ValueError:
        return False


def _peer_sans(peercert: Mapping[str, Any]) -> set[str]:
    values = set()
    for kind, value in peercert.get("subjectAltName", ()):
        if kind in ("DNS", "email", "URI"):
            values.add(value)
        elif kind == "IP Address":
            values.add(_normal_ip(value))
    return values


def _normal_ip(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        return text


class WebConfig:
    """A loaded web config: the TLS context for the listener and the aiohttp middlewares."""

    def __init__(self, *, path: Path, model: WebConfigFile, tls: TlsContexts | None) -> None:
        self.path = path
        self.model = model
        self.tls = tls
        http = model.http_server_config
        self.headers = {k: v for k, v in ((http.headers if http else None) or {}).items() if v}
        rate = model.rate_limit
        self.limiter: AsyncLimiter | None = None
        if rate is not None and rate.interval > 0:
            # Go's rate.NewLimiter(Every(interval), burst): `burst` tokens, one back per interval.
            self.limiter = AsyncLimiter(rate.burst, rate.burst * rate.interval)
        self.users: BasicAuthUsers | None = None
        if model.basic_auth_users:
            self.users = BasicAuthUsers(
                {n: h.get_secret_value().encode() for n, h in model.basic_auth_users.items()}
            )
        sans = tls.settings.client_allowed_sans if tls else None
        self.allowed_sans = {_normal_ip(s) for s in sans} if sans is not None else None
        self._middlewares = self._build_middlewares()

    @property
    def notes(self) -> list[str]:
        return self.tls.notes if self.tls else []

    def ssl_context(self) -> ssl.SSLContext | None:
        return self.tls.base if self.tls else None

    def middlewares(self) -> list[Middleware]:
        return list(self._middlewares)

    def log_summary(self) -> None:
        tls = self.tls.settings if self.tls else None
        log.info(
            "web config loaded",
            path=str(self.path),
            tls=tls is not None,
            client_auth=tls.client_auth_type if tls else None,
            basic_auth_users=len(self.users.hashes) if self.users else 0,
            rate_limit=self.limiter is not None,
        )
        for note in self.notes:
            log.warning("web config note", note=note)

    def _build_middlewares(self) -> list[Middleware]:
        chain: list[Middleware] = []
        if self.headers:
            chain.append(self._add_headers)
        if self.limiter is not None:
            chain.append(self._rate_limit)
        if self.allowed_sans is not None:
            chain.append(self._check_client_sans)
        if self.users is not None:
            chain.append(self._basic_auth)
        return chain

    @web.middleware
    async def _add_headers(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            exc.headers.update(self.headers)
            raise
        if not response.prepared:
            response.headers.update(self.headers)
        return response

    @web.middleware
    async def _rate_limit(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        assert self.limiter is not None
        if not self.limiter.has_capacity():
            raise web.HTTPTooManyRequests(text="Too Many Requests\n")
        await self.limiter.acquire()
        return await handler(request)

    @web.middleware
    async def _check_client_sans(
        self, request: web.Request, handler: Handler
    ) -> web.StreamResponse:
        assert self.allowed_sans is not None
        transport = request.transport
        peercert = transport.get_extra_info("peercert") if transport is not None else None
        if not peercert or not _peer_sans(peercert) & self.allowed_sans:
            log.debug("client certificate SAN not allowed", peer=request.remote)
            raise web.HTTPForbidden(text="Forbidden\n")
        return await handler(request)

    @web.middleware
    async def _basic_auth(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        assert self.users is not None
        if await self.users.allows(request.headers.get(hdrs.AUTHORIZATION)):
            return await handler(request)
        # Neither the user name nor the header is logged: a password typed as a user name
        # would end up in the log.
        log.debug("basic auth rejected", peer=request.remote)
        raise web.HTTPUnauthorized(headers={hdrs.WWW_AUTHENTICATE: "Basic"}, text="Unauthorized\n")

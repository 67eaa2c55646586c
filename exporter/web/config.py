"""The `--web.config.file` format: exporter-toolkit's keys, read and checked before listening.

The keys are those node_exporter reads (prometheus/exporter-toolkit `docs/web-configuration.md`):
`tls_server_config`, `http_server_config`, `basic_auth_users` and `rate_limit`. The file is
read by `exporter.configfile` (size, depth and alias bounds, duplicate keys refused, as Go's
strict decoder does). Every problem stops the process before it listens: one line per problem
naming the key (`web.config.file: tls_server_config.cert_file: ...`), never a secret value.

Where Go would accept something Python cannot honour, the stricter reading wins: any
`tls_server_config` key without a certificate and key is an error (Go would silently serve
plain HTTP); so are `cert` with `cert_file`, `key` with `key_file`, `client_ca` with
`client_ca_file`, a `min_version` above `max_version`, and client-certificate modes without a
client CA (Go would fall back to the system roots and let in any public CA's certificate).
`exporter.web.tls_config` lists the differences of the TLS stack itself.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, SecretStr, ValidationError

from exporter.configfile import ConfigError, read_yaml, validation_problems
from exporter.configkit import Duration, StrictModel

PREFIX = "web.config.file"
# Users, SANs and cipher suites are short lists in practice; the bounds keep a file from making
# every request loop over 100,000 names.
MAX_USERS = 1_000
MAX_LIST = 256


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
    client_allowed_sans: list[str] | None = Field(default=None, max_length=MAX_LIST)
    min_version: TlsVersionName = "TLS12"
    max_version: TlsVersionName = "TLS13"
    cipher_suites: list[CipherSuiteName] | None = Field(default=None, max_length=MAX_LIST)
    prefer_server_cipher_suites: bool = True
    curve_preferences: list[CurveName] | None = Field(default=None, max_length=MAX_LIST)

    @property
    def has_client_ca(self) -> bool:
        return self.client_ca is not None or self.client_ca_file is not None


class HttpServerConfig(StrictModel):
    http2: bool = True
    headers: dict[str, str] | None = Field(default=None, max_length=MAX_LIST)


class RateLimitConfig(StrictModel):
    interval: Duration = 0.0
    burst: Annotated[int, Field(ge=0)] = 0


class WebConfigFile(StrictModel):
    """The file as written; `file_problems` checks what the types alone cannot."""

    tls_server_config: TlsServerConfig | None = None
    http_server_config: HttpServerConfig | None = None
    rate_limit: RateLimitConfig | None = None
    basic_auth_users: dict[str, SecretStr] | None = Field(default=None, max_length=MAX_USERS)


def read_web_config_file(path: Path) -> WebConfigFile:
    """The file's model; ConfigError when it is no valid YAML or its types are wrong."""
    data = read_yaml(path, PREFIX)
    try:
        return WebConfigFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc, f"{PREFIX}: ")) from None


def file_problems(model: WebConfigFile) -> list[str]:
    """What the types alone cannot check, unprefixed (the PEM files are read later)."""
    return [
        *tls_problems(model.tls_server_config),
        *_header_problems(model.http_server_config),
        *_rate_limit_problems(model.rate_limit),
        *_user_problems(model.basic_auth_users),
    ]


def prefixed(problems: Iterable[str]) -> list[str]:
    return [f"{PREFIX}: {problem}" for problem in problems]


def tls_enabled(tls: TlsServerConfig | None) -> bool:
    # An empty `tls_server_config:` means plain HTTP, as in exporter-toolkit; any key in it
    # asks for TLS (and then needs a certificate and key, see `tls_problems`).
    return tls is not None and bool(tls.model_fields_set)


def tls_problems(tls: TlsServerConfig | None) -> list[str]:
    if tls is None or not tls_enabled(tls):
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

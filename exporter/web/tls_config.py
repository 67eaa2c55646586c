"""TLS for the listener: the SSLContext a web config's `tls_server_config` describes.

Where Python's TLS stack differs from Go's, the stricter reading wins or the start fails:
- `RequestClientCert` cannot ask for a certificate without verifying it, so none is asked for;
  as in Go every client is let in. `RequireAnyClientCert` cannot skip verification, so it
  verifies against `client_ca_file`/`client_ca`, which it therefore needs.
- `client_allowed_sans` is checked per request (403, `exporter.web.handler`) instead of during
  the handshake.
- `cipher_suites` take Go's names and apply to TLS 1.2 and older (TLS 1.3 suites are not
  configurable in Go either); `curve_preferences` are checked and ignored with a note (OpenSSL's
  defaults are X25519 and the NIST curves); `http2` is ignored (aiohttp speaks HTTP/1.1).
- Encrypted private keys are refused (OpenSSL would prompt on the terminal).
- Relative file names are relative to the web config file, as in exporter-toolkit. The
  certificate, key and client CA files are re-read at the next handshake after they change
  (exporter-toolkit re-reads them on every handshake); a change that does not load is logged
  and the previous certificate stays in use. Other changes to the file need a restart.
"""

from __future__ import annotations

import ipaddress
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.configfile import ConfigError
from exporter.logs import get_logger
from exporter.web.config import (
    GO_CIPHER_SUITES,
    REQUIRING_CLIENT_AUTH,
    TLS13_CIPHER_SUITES,
    TLS_VERSIONS,
    TlsServerConfig,
    prefixed,
)

log = get_logger(__name__)


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
                problems=prefixed(exc.problems),
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


def peer_sans(peercert: Mapping[str, Any]) -> set[str]:
    values = set()
    for kind, value in peercert.get("subjectAltName", ()):
        if kind in ("DNS", "email", "URI"):
            values.add(value)
        elif kind == "IP Address":
            values.add(normal_ip(value))
    return values


def normal_ip(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        return text

"""TLS for client connections: the server's `ssl.SSLContext` from Redis' tls-* settings.

The same protocol is served over TLS as over plain TCP (the listener only wraps the
socket). As in Redis 7.0: TLS 1.2 and 1.3 (its default `tls-protocols`), and
`tls-auth-clients` yes (the default) requires a client certificate signed by the CA in
`tls-ca-cert-file`, optional verifies one only if the client sends it, no asks for none.
"""

from __future__ import annotations

import ssl

AUTH_CLIENTS = {"yes": ssl.CERT_REQUIRED, "optional": ssl.CERT_OPTIONAL, "no": ssl.CERT_NONE}


class TLSConfigError(Exception):
    """The TLS settings cannot be used (Redis' start-up texts where it has one)."""


def _no_password() -> bytes:
    # An encrypted key would otherwise make OpenSSL prompt on the terminal.
    raise TLSConfigError("the private key is encrypted; give an unencrypted tls-key-file")


def server_context(
    cert_file: str | None,
    key_file: str | None,
    ca_cert_file: str | None,
    auth_clients: str = "yes",
) -> ssl.SSLContext:
    """A server-side context, or TLSConfigError naming what is wrong."""
    if not cert_file:
        raise TLSConfigError("No tls-cert-file configured!")
    if not key_file:
        raise TLSConfigError("No tls-key-file configured!")
    verify = AUTH_CLIENTS.get(auth_clients.lower())
    if verify is None:
        raise TLSConfigError("tls-auth-clients must be one of: no, yes, optional")
    if verify != ssl.CERT_NONE and not ca_cert_file:
        raise TLSConfigError(
            "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, "
            "tls-replication or tls-auth-clients are enabled!"
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert_file, key_file, password=_no_password)
    except (OSError, ssl.SSLError) as e:
        raise TLSConfigError(f"Failed to load certificate: {cert_file}: {e}") from None
    if ca_cert_file:
        try:
            ctx.load_verify_locations(cafile=ca_cert_file)
        except (OSError, ssl.SSLError) as e:
            raise TLSConfigError(
                f"Failed to configure CA certificate(s) file/directory: {e}"
            ) from None
    ctx.verify_mode = verify
    return ctx

//! One bounded HTTPS exchange with a server named by its IP address or by
//! a DNS name (the Kubernetes API server, `proto::k8s_host`): rustls with
//! the ring provider trimmed to what an API server uses, the certificate
//! verified against one given CA (no system roots, no way to skip the
//! check) by the address's IP SAN or the name's DNS SAN (the name sent as
//! SNI, an address never), and drainit's own request bytes and response
//! decoder over rustls's stream.
//!
//! The bounds: one deadline for the whole exchange (a name's lookup,
//! connect, handshake, request, answer; the lookup is the HTTP client's,
//! `io::http::connect_host`, on a thread of its own that the exchange
//! waits for only until the deadline, in the platform's own slots, which
//! the app's hung names never take), every socket read and write waits
//! at most until it, and what the server sends passes the HTTP client's
//! `Decoder` with the API server's larger bounds
//! (`proto::k8s::API_BODY_LIMIT`, a pod can be over a MiB, and
//! `API_EXCHANGE_LIMIT`); rustls itself holds at most one
//! TLS record and one handshake message per direction. A server that
//! dribbles, stalls after the handshake or sends without end costs a
//! bounded amount of memory and at most the deadline.
//!
//! The provider: ECDHE over X25519 and P-256; AES-GCM suites for TLS 1.3
//! and for TLS 1.2 with ECDSA and RSA certificates; signatures ECDSA
//! P-256/P-384 (k3s's CAs, EKS's serving certificates) and RSA PKCS#1 and
//! PSS (kubeadm's CAs). No ChaCha20, no P-384 key exchange, no Ed25519, no
//! client certificates, no session resumption.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::crypto::ring::{cipher_suite, kx_group};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::crypto::{CryptoProvider, GetRandomFailed, KeyProvider, SecureRandom};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, DnsName, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, SignatureScheme};
use webpki::ring as alg;

use crate::proto::http::{Failure, Kind, Response};
use crate::proto::http_decoder::{Decoder, Limits, Step, HEAD_LIMIT};
use crate::proto::k8s::{API_BODY_LIMIT, API_EXCHANGE_LIMIT};
use crate::proto::k8s_host::Host;

/// Largest CA bundle read (a few certificates during a CA rotation are a
/// few KiB).
pub const CA_LIMIT: usize = 64 * 1024;
/// Certificates taken from one bundle.
pub const MAX_CAS: usize = 16;

/// Signature algorithms: ECDSA P-256/P-384 and RSA (2048 to 8192 bits)
/// with PKCS#1 v1.5 or PSS; nothing else verifies.
static SIGNATURES: WebPkiSupportedAlgorithms = WebPkiSupportedAlgorithms {
    all: &[
        alg::ECDSA_P256_SHA256,
        alg::ECDSA_P256_SHA384,
        alg::ECDSA_P384_SHA256,
        alg::ECDSA_P384_SHA384,
        alg::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
        alg::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
        alg::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
        alg::RSA_PKCS1_2048_8192_SHA256,
        alg::RSA_PKCS1_2048_8192_SHA384,
        alg::RSA_PKCS1_2048_8192_SHA512,
    ],
    mapping: &[
        (
            SignatureScheme::ECDSA_NISTP384_SHA384,
            &[alg::ECDSA_P384_SHA384, alg::ECDSA_P256_SHA384],
        ),
        (
            SignatureScheme::ECDSA_NISTP256_SHA256,
            &[alg::ECDSA_P256_SHA256, alg::ECDSA_P384_SHA256],
        ),
        (
            SignatureScheme::RSA_PSS_SHA512,
            &[alg::RSA_PSS_2048_8192_SHA512_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA384,
            &[alg::RSA_PSS_2048_8192_SHA384_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA256,
            &[alg::RSA_PSS_2048_8192_SHA256_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA512,
            &[alg::RSA_PKCS1_2048_8192_SHA512],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA384,
            &[alg::RSA_PKCS1_2048_8192_SHA384],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA256,
            &[alg::RSA_PKCS1_2048_8192_SHA256],
        ),
    ],
};

/// Randomness from the kernel (`getrandom(2)`), without ring's own
/// provider object (which would pull in every suite it knows).
#[derive(Debug)]
struct KernelRandom;

impl SecureRandom for KernelRandom {
    fn fill(&self, mut buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        while !buf.is_empty() {
            // SAFETY: writes at most `buf.len()` bytes into `buf`.
            let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(GetRandomFailed);
            }
            buf = &mut buf[n as usize..];
        }
        Ok(())
    }
}

/// drainit never presents a client certificate: no key is ever loaded.
#[derive(Debug)]
struct NoKeys;

impl KeyProvider for NoKeys {
    fn load_private_key(
        &self,
        _key: PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn rustls::sign::SigningKey>, rustls::Error> {
        Err(rustls::Error::General("no client keys".into()))
    }
}

/// The trimmed provider (see the file's comment).
pub fn provider() -> CryptoProvider {
    CryptoProvider {
        cipher_suites: vec![
            cipher_suite::TLS13_AES_128_GCM_SHA256,
            cipher_suite::TLS13_AES_256_GCM_SHA384,
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        ],
        kx_groups: vec![kx_group::X25519, kx_group::SECP256R1],
        signature_verification_algorithms: SIGNATURES,
        secure_random: &KernelRandom,
        key_provider: &NoKeys,
    }
}

/// The client configuration trusting exactly the certificates of
/// `ca_pem` (a PEM bundle): TLS 1.3 and 1.2, no client certificate.
pub fn config(ca_pem: &[u8]) -> Result<ClientConfig, Failure> {
    let bad = |what: &str| Failure::new(Kind::Tls, &format!("the CA file {what}"));
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem).take(MAX_CAS) {
        let cert = cert.map_err(|e| bad(&format!("is not PEM ({e})")))?;
        roots
            .add(cert)
            .map_err(|_| bad("holds a certificate that cannot be a trust anchor"))?;
    }
    if roots.is_empty() {
        return Err(bad("holds no certificate"));
    }
    let mut config = ClientConfig::builder_with_provider(Arc::new(provider()))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|_| Failure::new(Kind::Internal, "TLS set-up: no usable protocol version"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // One exchange per connection: nothing to resume.
    config.resumption = rustls::client::Resumption::disabled();
    // No SNI unless `send` names the server by a DNS name.
    config.enable_sni = false;
    Ok(config)
}

fn left(deadline: Instant) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::ErrorKind::TimedOut.into());
    }
    Ok(left)
}

/// The socket as rustls sees it: every read and write waits at most until
/// the deadline, so no loop inside rustls can outlast it.
struct Timed<'a> {
    tcp: &'a TcpStream,
    deadline: Instant,
}

impl Read for Timed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.tcp.set_read_timeout(Some(left(self.deadline)?))?;
        self.tcp.read(buf)
    }
}

impl Write for Timed<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tcp.set_write_timeout(Some(left(self.deadline)?))?;
        self.tcp.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What went wrong in a handshake, in a few fixed words: rustls's own
/// `Display` formats its nested enums with `Debug`, which would put all
/// their names into the binary for a message nobody needs in detail.
/// `by_name`: the server was named by a DNS name, not an address.
fn tls_text(e: &rustls::Error, by_name: bool) -> &'static str {
    use rustls::CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            C::UnknownIssuer => {
                "the API server's certificate is not signed by the service-account CA"
            }
            C::NotValidForName | C::NotValidForNameContext { .. } if by_name => {
                "the API server's certificate does not name KUBERNETES_SERVICE_HOST (no matching DNS SAN)"
            }
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                "the API server's certificate does not name its IP address (no matching IP SAN)"
            }
            C::Expired | C::ExpiredContext { .. } => "the API server's certificate has expired",
            C::NotValidYet | C::NotValidYetContext { .. } => {
                "the API server's certificate is not valid yet (is the clock right?)"
            }
            C::BadSignature => "the API server's certificate has a bad signature",
            C::UnsupportedSignatureAlgorithmContext { .. }
            | C::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
                "the API server's certificate uses a signature algorithm drainit does not verify"
            }
            _ => "the API server's certificate is refused",
        },
        rustls::Error::AlertReceived(_) => "the API server ended the handshake with an alert",
        rustls::Error::PeerIncompatible(_) => {
            "the API server offers no TLS version, suite or group drainit supports"
        }
        rustls::Error::NoCertificatesPresented => "the API server presented no certificate",
        _ => "the TLS handshake failed",
    }
}

/// A socket or TLS error as a request failure: rustls's own errors (a
/// certificate refused, a handshake failure) are `tls`.
fn failure(e: &io::Error, by_name: bool) -> Failure {
    if let Some(tls) = e.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
        return Failure::new(Kind::Tls, tls_text(tls, by_name));
    }
    match e.kind() {
        io::ErrorKind::ConnectionRefused => Failure::new(Kind::Refused, "connection refused"),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
            Failure::new(Kind::Timeout, "timed out")
        }
        io::ErrorKind::ConnectionReset => Failure::new(Kind::Reset, "connection reset"),
        io::ErrorKind::UnexpectedEof => Failure::new(Kind::Closed, "closed during the handshake"),
        _ => Failure::new(Kind::Io, &format!("I/O error: {e}")),
    }
}

/// What one exchange is made of: where, whom to trust, what to send.
pub struct Exchange<'a> {
    /// The server: an address, or a name looked up within the deadline.
    pub host: &'a Host,
    pub port: u16,
    /// The PEM bundle the server's certificate must chain to.
    pub ca_pem: &'a [u8],
    /// The whole request, head and body (see `proto::k8s::request`).
    pub request: &'a [u8],
    /// The whole exchange's time, a name's lookup to the answer's last
    /// byte.
    pub timeout: Duration,
}

/// Sends one request over TLS and decodes the answer; with it come the
/// answer's first bytes (at most `decoder::HEAD_LIMIT`), where its head
/// is, for the headers the decoder does not keep (`Retry-After`). The request is sent
/// only after the handshake has verified the server: a certificate that
/// does not chain to the CA or does not name the host (the address's IP
/// SAN, the name's DNS SAN) ends the exchange with a `tls` failure and
/// nothing written. A name that does not resolve (or not in time) is a
/// `resolve` (or `timeout`) failure, and nothing is sent anywhere.
pub fn send(exchange: &Exchange) -> Result<(Response, Vec<u8>), Failure> {
    let deadline = Instant::now() + exchange.timeout.max(Duration::from_millis(1));
    let mut config = config(exchange.ca_pem)?;
    let (name, by_name) = match exchange.host {
        Host::Ip(ip) => (ServerName::IpAddress((*ip).into()), false),
        Host::Name(name) => {
            let dns = DnsName::try_from(name.clone())
                .map_err(|_| Failure::new(Kind::Internal, "TLS set-up: not a DNS name"))?;
            (ServerName::DnsName(dns), true)
        }
    };
    // rustls sends SNI for a DNS name only; an address has none to send.
    config.enable_sni = by_name;
    let mut conn = ClientConnection::new(Arc::new(config), name)
        .map_err(|_| Failure::new(Kind::Internal, "TLS set-up: no client connection"))?;
    let failure = |e: io::Error| failure(&e, by_name);
    let tcp = crate::io::http::connect_host(
        &exchange.host.to_string(),
        exchange.port,
        deadline,
        crate::io::http::Lookups::Platform,
    )?;
    let _ = tcp.set_nodelay(true);
    let mut sock = Timed {
        tcp: &tcp,
        deadline,
    };
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).map_err(failure)?;
    }
    let mut stream = rustls::Stream::new(&mut conn, &mut sock);
    stream
        .write_all(exchange.request)
        .and_then(|()| stream.flush())
        .map_err(failure)?;
    let mut decoder = Decoder::with_limits(
        false,
        Limits {
            exchange: API_EXCHANGE_LIMIT,
            body: API_BODY_LIMIT,
            ..Limits::DEFAULT
        },
    );
    let mut head = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let step = match stream.read(&mut chunk) {
            Ok(0) => decoder.finish(),
            Ok(n) => {
                let room = HEAD_LIMIT.saturating_sub(head.len()).min(n);
                head.extend_from_slice(&chunk[..room]);
                decoder.feed(&chunk[..n])
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // Closed without close_notify: the decoder judges whether the
            // answer was whole (its length or chunks say so).
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => decoder.finish(),
            Err(e) => return Err(failure(e)),
        };
        match step {
            Step::NeedMore => continue,
            Step::Done(response) => return Ok((response, head)),
            Step::Failed(failure) => return Err(failure),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provider_is_trimmed() {
        let p = provider();
        assert_eq!(p.cipher_suites.len(), 6);
        assert_eq!(p.kx_groups.len(), 2);
        assert!(p.signature_verification_algorithms.mapping.len() == 8);
        let mut buf = [0u8; 64];
        p.secure_random.fill(&mut buf).unwrap();
        assert_ne!(buf, [0u8; 64]);
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        for pem in [&b""[..], b"not pem", b"-----BEGIN CERTIFICATE-----\nAAAA\n"] {
            let err = config(pem).unwrap_err();
            assert_eq!(err.kind, Kind::Tls, "{err}");
        }
    }

    #[test]
    fn nothing_is_sent_past_the_deadline() {
        // A port nobody listens on and no time at all: a timeout, at once.
        let started = Instant::now();
        let e = Exchange {
            host: &Host::Ip("127.0.0.1".parse().unwrap()),
            port: 9,
            ca_pem: b"x",
            request: b"",
            timeout: Duration::ZERO,
        };
        assert!(send(&e).is_err());
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}

//! Transport security for the coordinator, the agents and farmctl: the
//! three files of mutual TLS, the configurations tonic takes (rustls), and
//! the one rule of plaintext — loopback only, unless asked for by name.
//!
//! Plaintext off loopback puts tokens on the wire in clear and lets an
//! on-path host inject assignments into agents that run as root, so it is
//! refused by default on both ends: the coordinator will not listen on it,
//! agents and farmctl will not dial it.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

use crate::secret;

/// How long a peer may take over its TLS handshake. tonic sets no limit,
/// and a connection that never finishes one holds a descriptor and a task:
/// without this, anyone who reaches the port could shut agents out by
/// opening connections and saying nothing.
pub const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The certificate authority both ends trust, and this end's certificate
/// and private key (PEM files, as `farm-coordinator pki` writes them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Secret(#[from] secret::Error),
    #[error("{path}: no PEM {what} in it")]
    NotPem { path: PathBuf, what: &'static str },
    #[error(
        "--tls-ca, --tls-cert and --tls-key go together; {0} is missing (`farm-coordinator pki` \
         issues all three)"
    )]
    Incomplete(&'static str),
    #[error(
        "{url}: plaintext to a host that is not loopback is refused (tokens would cross the \
         network in clear); use an https:// URL with --tls-ca, --tls-cert and --tls-key, or \
         pass --insecure-plaintext"
    )]
    PlaintextOffLoopback { url: String },
    #[error(
        "--listen {addr}: plaintext on an address that is not loopback is refused; give \
         --tls-cert, --tls-key and --tls-ca, or pass --insecure-plaintext"
    )]
    PlaintextListen { addr: SocketAddr },
    #[error("{url}: TLS is configured, so the URL must be https://")]
    NotHttps { url: String },
    #[error("{url}: an https:// URL needs --tls-ca, --tls-cert and --tls-key")]
    HttpsWithoutTls { url: String },
    #[error("{url}: not a URL with a host (e.g. https://coordinator.example:7700)")]
    BadUrl { url: String },
}

/// The transport options of every binary (the coordinator, the agent,
/// farmctl): one definition, so that each spells and explains them alike.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TransportArgs {
    /// The farm's certificate authority (`farm-coordinator pki init`). With
    /// --tls-cert and --tls-key: mutual TLS (https:// URLs), each end known
    /// by its certificate; tokens are then neither sent nor accepted.
    #[arg(long, global = true, env = "FARM_TLS_CA", value_name = "PEM")]
    pub tls_ca: Option<PathBuf>,
    /// This end's certificate, from that authority (`farm-coordinator pki
    /// init`, `issue-agent NAME`, `issue-client NAME`).
    #[arg(long, global = true, env = "FARM_TLS_CERT", value_name = "PEM")]
    pub tls_cert: Option<PathBuf>,
    /// This end's private key (mode 0600 or stricter).
    #[arg(long, global = true, env = "FARM_TLS_KEY", value_name = "PEM")]
    pub tls_key: Option<PathBuf>,
    /// Plaintext on or to an address that is not loopback: tokens, and the
    /// runs that root agents execute, then cross the network in clear.
    #[arg(long, global = true, env = "FARM_INSECURE_PLAINTEXT")]
    pub insecure_plaintext: bool,
}

impl TransportArgs {
    /// The TLS files, if the options give them (all three, or none).
    pub fn files(&self) -> Result<Option<TlsFiles>, Error> {
        TlsFiles::of_options(
            self.tls_ca.clone(),
            self.tls_cert.clone(),
            self.tls_key.clone(),
        )
    }
}

impl TlsFiles {
    /// The three options together, or none of them; anything between is an
    /// error naming what is missing.
    pub fn of_options(
        ca: Option<PathBuf>,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
    ) -> Result<Option<TlsFiles>, Error> {
        match (ca, cert, key) {
            (None, None, None) => Ok(None),
            (Some(ca), Some(cert), Some(key)) => Ok(Some(TlsFiles { ca, cert, key })),
            (ca, cert, _) => Err(Error::Incomplete(if ca.is_none() {
                "--tls-ca"
            } else if cert.is_none() {
                "--tls-cert"
            } else {
                "--tls-key"
            })),
        }
    }

    fn read(&self) -> Result<(Certificate, Identity), Error> {
        let ca = read_pem(&self.ca, "CERTIFICATE")?;
        let cert = read_pem(&self.cert, "CERTIFICATE")?;
        let key = secret::read_private(&self.key)?;
        if !contains_pem(&key, "PRIVATE KEY") {
            return Err(Error::NotPem {
                path: self.key.clone(),
                what: "PRIVATE KEY",
            });
        }
        Ok((Certificate::from_pem(ca), Identity::from_pem(cert, key)))
    }

    /// The coordinator's side: its certificate, and client certificates
    /// required, checked against the CA.
    pub fn server(&self) -> Result<ServerTlsConfig, Error> {
        let (ca, identity) = self.read()?;
        Ok(ServerTlsConfig::new()
            .identity(identity)
            .client_ca_root(ca)
            .client_auth_optional(false)
            .timeout(HANDSHAKE_TIMEOUT))
    }

    /// An agent's or farmctl's side: the coordinator's certificate checked
    /// against the CA (and its name against the URL's host), this end's
    /// certificate presented.
    pub fn client(&self) -> Result<ClientTlsConfig, Error> {
        let (ca, identity) = self.read()?;
        Ok(ClientTlsConfig::new().ca_certificate(ca).identity(identity))
    }
}

fn read_pem(path: &Path, what: &'static str) -> Result<Vec<u8>, Error> {
    let bytes = secret::read_trusted(path)?;
    if !contains_pem(&bytes, what) {
        return Err(Error::NotPem {
            path: path.into(),
            what,
        });
    }
    Ok(bytes)
}

/// Whether `bytes` has a PEM block whose label ends with `label` (so
/// "PRIVATE KEY" also takes "EC PRIVATE KEY"): a wrong file named by an
/// option is then told at start, not as a handshake failure later.
fn contains_pem(bytes: &[u8], label: &str) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    text.lines().any(|l| {
        l.strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
            .is_some_and(|l| l.ends_with(label))
    })
}

/// Whether `host` (a URL's host: a name, an IPv4 address or a bracketed
/// IPv6 one) is this machine's loopback.
fn is_loopback_host(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        // Only the one name every resolver maps to loopback; any other
        // name could resolve anywhere.
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    }
}

/// How a client (an agent, farmctl) dials `url`: TLS with `files`, or
/// plaintext — which only a loopback host or `insecure_plaintext` allows.
/// The scheme must say what the files say, so that a URL never silently
/// downgrades to plaintext.
pub fn client_config(
    url: &str,
    files: Option<&TlsFiles>,
    insecure_plaintext: bool,
) -> Result<Option<ClientTlsConfig>, Error> {
    let uri: tonic::codegen::http::Uri = url.parse().map_err(|_| Error::BadUrl {
        url: farm_spec::excerpt(url),
    })?;
    let Some(host) = uri.host() else {
        return Err(Error::BadUrl {
            url: farm_spec::excerpt(url),
        });
    };
    let https = uri.scheme_str() == Some("https");
    match files {
        Some(f) if https => Ok(Some(f.client()?)),
        Some(_) => Err(Error::NotHttps {
            url: farm_spec::excerpt(url),
        }),
        None if https => Err(Error::HttpsWithoutTls {
            url: farm_spec::excerpt(url),
        }),
        None if insecure_plaintext || is_loopback_host(host) => Ok(None),
        None => Err(Error::PlaintextOffLoopback {
            url: farm_spec::excerpt(url),
        }),
    }
}

/// Whether the coordinator may listen on `addr` without TLS.
pub fn check_plaintext_listen(addr: SocketAddr, insecure_plaintext: bool) -> Result<(), Error> {
    if addr.ip().is_loopback() || insecure_plaintext {
        Ok(())
    } else {
        Err(Error::PlaintextListen { addr })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_only_on_loopback() {
        let ok = [
            "http://127.0.0.1:7700",
            "http://127.3.4.5:1",
            "http://localhost:7700",
            "http://LOCALHOST:7700",
            "http://[::1]:7700",
        ];
        for url in ok {
            assert!(matches!(client_config(url, None, false), Ok(None)), "{url}");
        }
        let off = [
            "http://10.0.0.5:7700",
            "http://coordinator.example:7700",
            "http://[fe80::1]:7700",
            "http://0.0.0.0:7700",
            "http://localhost.example:7700",
        ];
        for url in off {
            let e = client_config(url, None, false).unwrap_err();
            assert!(
                matches!(&e, Error::PlaintextOffLoopback { url: u } if u == url),
                "{url}: {e}"
            );
            assert!(matches!(client_config(url, None, true), Ok(None)), "{url}");
        }
        assert!(matches!(
            client_config("https://10.0.0.5:7700", None, true),
            Err(Error::HttpsWithoutTls { .. })
        ));
        let files = TlsFiles {
            ca: "ca".into(),
            cert: "c".into(),
            key: "k".into(),
        };
        assert_eq!(
            client_config("http://10.0.0.5:7700", Some(&files), false)
                .unwrap_err()
                .to_string(),
            "http://10.0.0.5:7700: TLS is configured, so the URL must be https://"
        );
        assert!(matches!(
            client_config("not a url", None, false),
            Err(Error::BadUrl { .. })
        ));
    }

    #[test]
    fn listening_in_plaintext_only_on_loopback() {
        for (addr, insecure, ok) in [
            ("127.0.0.1:7700", false, true),
            ("[::1]:7700", false, true),
            ("0.0.0.0:7700", false, false),
            ("10.1.2.3:7700", false, false),
            ("0.0.0.0:7700", true, true),
        ] {
            let addr: SocketAddr = addr.parse().unwrap();
            assert_eq!(
                check_plaintext_listen(addr, insecure).is_ok(),
                ok,
                "{addr} {insecure}"
            );
        }
        assert_eq!(
            check_plaintext_listen("0.0.0.0:7700".parse().unwrap(), false)
                .unwrap_err()
                .to_string(),
            "--listen 0.0.0.0:7700: plaintext on an address that is not loopback is refused; \
             give --tls-cert, --tls-key and --tls-ca, or pass --insecure-plaintext"
        );
    }

    #[test]
    fn the_three_files_go_together() {
        let p = |s: &str| Some(PathBuf::from(s));
        assert_eq!(TlsFiles::of_options(None, None, None).unwrap(), None);
        assert!(
            TlsFiles::of_options(p("a"), p("b"), p("c"))
                .unwrap()
                .is_some()
        );
        for (ca, cert, key, missing) in [
            (None, p("b"), p("c"), "--tls-ca"),
            (p("a"), None, p("c"), "--tls-cert"),
            (p("a"), p("b"), None, "--tls-key"),
            (None, None, p("c"), "--tls-ca"),
        ] {
            assert!(
                matches!(TlsFiles::of_options(ca, cert, key), Err(Error::Incomplete(m)) if m == missing),
                "{missing}"
            );
        }
    }

    #[test]
    fn pem_labels() {
        assert!(contains_pem(
            b"-----BEGIN CERTIFICATE-----\nx\n",
            "CERTIFICATE"
        ));
        assert!(contains_pem(
            b"-----BEGIN PRIVATE KEY-----\n",
            "PRIVATE KEY"
        ));
        assert!(contains_pem(
            b"-----BEGIN EC PRIVATE KEY-----\n",
            "PRIVATE KEY"
        ));
        assert!(!contains_pem(
            b"-----BEGIN CERTIFICATE-----\n",
            "PRIVATE KEY"
        ));
        assert!(!contains_pem(b"hello", "CERTIFICATE"));
        assert!(!contains_pem(&[0xff, 0xfe], "CERTIFICATE"));
    }
}

//! `farm-coordinator pki`: the farm's own certificate authority, so that a
//! farm of several machines gets mutual TLS in minutes (as etcd's and
//! Consul's operators get theirs from `cfssl` or `consul tls`).
//!
//! One directory holds it all:
//!
//! ```text
//! ca.crt  ca.key                    the authority (init)
//! coordinator.crt  coordinator.key  the coordinator's server certificate (init)
//! agents/NAME.crt  agents/NAME.key  an agent's client certificate (issue-agent)
//! submitters/NAME.crt  .key         a submitter's (issue-client)
//! ```
//!
//! Private keys are written mode 0600 from the start (`create_new` with the
//! mode, never a chmod after), certificates 0644: they are public. Nothing
//! is ever overwritten: reissuing a name means removing its files first,
//! which makes rotating a key a deliberate act; and a command that fails
//! half-way removes what it wrote, so no key is left without its
//! certificate. A certificate never outlives its authority. Keys are ECDSA P-256,
//! which rustls (ring) serves and every gRPC client accepts.

use std::fs;
use std::io::{self, Write};
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use time::OffsetDateTime;

use crate::identity::{self, Principal};

pub const CA_CERT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const COORDINATOR_CERT: &str = "coordinator.crt";
pub const COORDINATOR_KEY: &str = "coordinator.key";

/// The authority's lifetime: it outlives every certificate it issues.
pub const CA_DAYS: u32 = 3650;
/// A certificate's default lifetime. There is no revocation list, so a
/// lost key stays valid until it expires: long enough that a lab's farm is
/// not broken every year, short enough that a lost key does not live for
/// ever.
pub const DEFAULT_DAYS: u32 = 825;
/// The most hosts a coordinator certificate names.
pub const MAX_HOSTS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{0} exists: remove it first to issue it again")]
    Exists(PathBuf),
    #[error("{path}: {source}")]
    Secret {
        path: PathBuf,
        source: farm_runtime::secret::Error,
    },
    #[error("certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error(transparent)]
    Name(#[from] identity::Error),
    #[error("host {0:?} is neither an IP address nor a DNS name")]
    BadHost(String),
    #[error("{0} hosts given; a certificate names at most {MAX_HOSTS}")]
    TooManyHosts(usize),
    #[error("--days must be 1 to {CA_DAYS}, not {0}")]
    Days(u32),
}

/// The files one issue wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Creates the authority and the coordinator's certificate for `hosts`
/// (names and addresses agents and farmctl dial; loopback is always in).
pub fn init(dir: &Path, hosts: &[String], days: u32) -> Result<(Issued, Issued), Error> {
    check_days(days)?;
    let sans = server_names(hosts)?;
    create_dir(dir)?;
    let ca = Issued {
        cert: dir.join(CA_CERT),
        key: dir.join(CA_KEY),
    };
    let server = Issued {
        cert: dir.join(COORDINATOR_CERT),
        key: dir.join(COORDINATOR_KEY),
    };
    for p in [&ca.cert, &ca.key, &server.cert, &server.key] {
        if p.exists() {
            return Err(Error::Exists(p.clone()));
        }
    }
    let ca_key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, "farm certificate authority");
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut params, CA_DAYS);
    let ca_cert = params.self_signed(&ca_key)?;
    let ca_until = params.not_after;
    let mut files = Files::default();
    files.write(&ca.key, ca_key.serialize_pem().as_bytes(), KEY_MODE)?;
    files.write(&ca.cert, ca_cert.pem().as_bytes(), CERT_MODE)?;

    let issuer = Issuer::new(params, ca_key);
    let mut leaf = leaf_params("farm coordinator", days, ca_until);
    leaf.subject_alt_names = sans;
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    sign(&issuer, leaf, &server, &mut files)?;
    files.keep();
    Ok((ca, server))
}

/// Issues a client certificate for `principal` (an agent or a submitter)
/// with the authority in `dir`.
pub fn issue(dir: &Path, principal: &Principal, days: u32) -> Result<Issued, Error> {
    check_days(days)?;
    let (sub, name) = match principal {
        Principal::Agent(n) => ("agents", n),
        Principal::Submitter(n) => ("submitters", n),
    };
    let out = dir.join(sub);
    let issued = Issued {
        cert: out.join(format!("{name}.crt")),
        key: out.join(format!("{name}.key")),
    };
    for p in [&issued.cert, &issued.key] {
        if p.exists() {
            return Err(Error::Exists(p.clone()));
        }
    }
    let (issuer, ca_until) = load_issuer(dir)?;
    create_dir(&out)?;
    let mut params = leaf_params(name.as_str(), days, ca_until);
    params.subject_alt_names = vec![SanType::URI(principal.uri().try_into()?)];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let mut files = Files::default();
    sign(&issuer, params, &issued, &mut files)?;
    files.keep();
    Ok(issued)
}

/// The authority in `dir`, and when it expires.
fn load_issuer(dir: &Path) -> Result<(Issuer<'static, KeyPair>, OffsetDateTime), Error> {
    let cert_path = dir.join(CA_CERT);
    let key_path = dir.join(CA_KEY);
    let pem = fs::read_to_string(&cert_path).map_err(|source| Error::Io {
        path: cert_path.clone(),
        source,
    })?;
    let key = farm_runtime::secret::read_private(&key_path).map_err(|source| Error::Secret {
        path: key_path.clone(),
        source,
    })?;
    let key = String::from_utf8_lossy(&key);
    let key = KeyPair::from_pem(&key)?;
    let until = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .ok()
        .and_then(|(_, p)| {
            p.parse_x509()
                .ok()
                .map(|c| c.validity().not_after.to_datetime())
        })
        .ok_or(Error::Certificate(rcgen::Error::CouldNotParseCertificate))?;
    Ok((Issuer::from_ca_cert_pem(&pem, key)?, until))
}

/// A leaf's parameters, valid for `days` but never past `ca_until`: a
/// certificate that outlived its authority would fail every handshake
/// without saying why.
fn leaf_params(common_name: &str, days: u32, ca_until: OffsetDateTime) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.use_authority_key_identifier_extension = true;
    validity(&mut params, days);
    params.not_after = params.not_after.min(ca_until);
    params
}

fn sign(
    issuer: &Issuer<'_, KeyPair>,
    params: CertificateParams,
    to: &Issued,
    files: &mut Files,
) -> Result<(), Error> {
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, issuer)?;
    files.write(&to.key, key.serialize_pem().as_bytes(), KEY_MODE)?;
    files.write(&to.cert, cert.pem().as_bytes(), CERT_MODE)
}

const KEY_MODE: u32 = 0o600;
const CERT_MODE: u32 = 0o644;

/// The files one command wrote: removed again unless [`Files::keep`] is
/// called, so a command that fails half-way leaves nothing behind.
#[derive(Default)]
struct Files(Vec<PathBuf>);

impl Files {
    fn write(&mut self, path: &Path, bytes: &[u8], mode: u32) -> Result<(), Error> {
        write_new(path, bytes, mode)?;
        self.0.push(path.to_owned());
        Ok(())
    }

    fn keep(mut self) {
        self.0.clear();
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = fs::remove_file(p);
        }
    }
}

/// From yesterday (machines' clocks differ) for `days` days.
fn validity(params: &mut CertificateParams, days: u32) {
    use chrono::Datelike;
    let today = chrono::Utc::now().date_naive();
    let ymd = |d: chrono::NaiveDate| rcgen::date_time_ymd(d.year(), d.month() as u8, d.day() as u8);
    params.not_before = ymd(today - chrono::Days::new(1));
    params.not_after = ymd(today + chrono::Days::new(u64::from(days)));
}

fn check_days(days: u32) -> Result<(), Error> {
    if (1..=CA_DAYS).contains(&days) {
        Ok(())
    } else {
        Err(Error::Days(days))
    }
}

/// The subject alternative names of a coordinator certificate: each host
/// as an address or a DNS name, then loopback, so that agents on the
/// coordinator's own machine dial it by `localhost` or `127.0.0.1`.
fn server_names(hosts: &[String]) -> Result<Vec<SanType>, Error> {
    if hosts.len() > MAX_HOSTS {
        return Err(Error::TooManyHosts(hosts.len()));
    }
    let mut sans = Vec::new();
    let loopback = ["localhost", "127.0.0.1", "::1"].map(String::from);
    for h in hosts.iter().chain(&loopback) {
        let san = match h.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) if is_dns_name(h) => SanType::DnsName(
                h.as_str()
                    .try_into()
                    .map_err(|_| Error::BadHost(farm_spec::excerpt(h)))?,
            ),
            Err(_) => return Err(Error::BadHost(farm_spec::excerpt(h))),
        };
        if !sans.contains(&san) {
            sans.push(san);
        }
    }
    Ok(sans)
}

/// Labels of letters, digits and inner hyphens, joined by dots (RFC 1123).
fn is_dns_name(h: &str) -> bool {
    h.len() <= 253
        && h.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

fn create_dir(dir: &Path) -> Result<(), Error> {
    fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.into(),
        source,
    })
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), Error> {
    let io_err = |source| Error::Io {
        path: path.into(),
        source,
    };
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                Error::Exists(path.into())
            } else {
                io_err(e)
            }
        })?;
    f.write_all(bytes).map_err(io_err)?;
    f.sync_all().map_err(io_err)
}

#[cfg(test)]
mod tests;

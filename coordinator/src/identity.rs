//! Who a TLS peer is: the principal its client certificate names.
//!
//! Each certificate the farm's CA issues (`farm-coordinator pki`) carries
//! exactly one URI subject alternative name, `urn:farm:agent:NAME` or
//! `urn:farm:submitter:NAME`: the role and the name in one field that
//! rustls has already verified against the CA by the time it is read
//! here. The role decides the service a peer may call (agents only
//! `AgentService`, submitters only `FarmService`), the name is what an
//! agent id is bound to.

use std::fmt;

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

const AGENT_URN: &str = "urn:farm:agent:";
const SUBMITTER_URN: &str = "urn:farm:submitter:";

/// The longest principal name: it becomes a file name under the PKI
/// directory and a label in logs.
pub const MAX_PRINCIPAL_NAME_BYTES: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("the peer presented no client certificate")]
    NoCertificate,
    #[error("the client certificate does not parse")]
    Unparsable,
    #[error(
        "the client certificate names no farm principal (a URI urn:farm:agent:NAME or \
         urn:farm:submitter:NAME); issue it with `farm-coordinator pki`"
    )]
    NoPrincipal,
    #[error("the client certificate names {0} farm principals; it must name one")]
    Several(usize),
    #[error(
        "principal name {0:?}: 1 to {MAX_PRINCIPAL_NAME_BYTES} letters, digits, '.', '_' or '-', \
         starting with a letter or digit"
    )]
    BadName(String),
}

/// An agent or a submitter, with the name its certificate gives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Principal {
    Agent(Name),
    Submitter(Name),
}

/// A principal's name: short, and safe as a file name and a log label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(String);

impl Name {
    pub fn parse(s: &str) -> Result<Name, Error> {
        let ok = !s.is_empty()
            && s.len() <= MAX_PRINCIPAL_NAME_BYTES
            && s.as_bytes()[0].is_ascii_alphanumeric()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if ok {
            Ok(Name(s.to_owned()))
        } else {
            Err(Error::BadName(farm_spec::excerpt(s)))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Principal {
    /// The URI its certificate carries.
    pub fn uri(&self) -> String {
        match self {
            Principal::Agent(n) => format!("{AGENT_URN}{n}"),
            Principal::Submitter(n) => format!("{SUBMITTER_URN}{n}"),
        }
    }

    /// The principal a URI names; `None` for a URI that is not the farm's.
    pub fn of_uri(uri: &str) -> Option<Result<Principal, Error>> {
        if let Some(n) = uri.strip_prefix(AGENT_URN) {
            Some(Name::parse(n).map(Principal::Agent))
        } else {
            uri.strip_prefix(SUBMITTER_URN)
                .map(|n| Name::parse(n).map(Principal::Submitter))
        }
    }

    /// The one principal a (verified) DER certificate names.
    pub fn of_certificate(der: &[u8]) -> Result<Principal, Error> {
        let (_, cert) = X509Certificate::from_der(der).map_err(|_| Error::Unparsable)?;
        let san = cert
            .subject_alternative_name()
            .map_err(|_| Error::Unparsable)?
            .ok_or(Error::NoPrincipal)?;
        let mut found: Vec<Principal> = Vec::new();
        for name in &san.value.general_names {
            if let GeneralName::URI(uri) = name
                && let Some(p) = Principal::of_uri(uri)
            {
                found.push(p?);
            }
        }
        match found.len() {
            0 => Err(Error::NoPrincipal),
            1 => Ok(found.remove(0)),
            n => Err(Error::Several(n)),
        }
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Principal::Agent(n) => write!(f, "agent {n}"),
            Principal::Submitter(n) => write!(f, "submitter {n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "node-17", "s390x.lab_2", "A9"] {
            assert_eq!(Name::parse(ok).unwrap().as_str(), ok);
        }
        let long = "a".repeat(MAX_PRINCIPAL_NAME_BYTES + 1);
        for bad in ["", "-a", ".a", "a/b", "a b", "../x", "é", long.as_str()] {
            assert!(
                matches!(Name::parse(bad), Err(Error::BadName(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn uris_round_trip() {
        for p in [
            Principal::Agent(Name::parse("n1").unwrap()),
            Principal::Submitter(Name::parse("alice").unwrap()),
        ] {
            assert_eq!(Principal::of_uri(&p.uri()), Some(Ok(p.clone())));
        }
        assert_eq!(Principal::of_uri("https://example.com"), None);
        assert_eq!(
            Principal::of_uri("urn:farm:agent:a/b"),
            Some(Err(Error::BadName("a/b".into())))
        );
    }
}

//! Who may call what.
//!
//! Two roles with disjoint rights: agents may only call `AgentService`,
//! submitters only `FarmService`. An agent credential that leaks from a
//! benchmark host therefore cannot submit work, and a submitter cannot pose
//! as a host and receive (or forge results of) other people's runs.
//!
//! A coordinator proves roles one of two ways ([`Access`]):
//! - **certificates** (mutual TLS, `--tls-*`): the role and the name are
//!   the client certificate's farm principal ([`crate::identity`]); the
//!   principal goes into the request's extensions, where the agent service
//!   reads the identity an agent id is bound to. Tokens are not accepted
//!   then: a bearer secret is weaker than a key that never leaves its host.
//! - **tokens** (plaintext, loopback unless `--insecure-plaintext`):
//!   `authorization: Bearer <token>`, one secret per role in the data
//!   directory. Agents have no identity beyond the token then.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use tonic::{Request, Status};

use crate::identity::Principal;

pub const AGENT_TOKEN_FILE: &str = "agent.token";
pub const SUBMIT_TOKEN_FILE: &str = "submit.token";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Secret(#[from] farm_runtime::secret::Error),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Agent,
    Submitter,
}

impl Role {
    fn service(self) -> &'static str {
        match self {
            Role::Agent => "AgentService",
            Role::Submitter => "FarmService",
        }
    }
}

/// How this coordinator's callers prove their role.
#[derive(Debug, Clone)]
pub enum Access {
    Tokens(Tokens),
    Certificates,
}

impl Access {
    /// Checks a request for a service that requires `role`; with
    /// certificates, the caller's [`Principal`] is left in the request's
    /// extensions for the service.
    pub fn check<T>(&self, role: Role, req: &mut Request<T>) -> Result<(), Status> {
        match self {
            Access::Tokens(t) => t.check(role, req),
            Access::Certificates => {
                let principal = principal_of(req)?;
                let granted = matches!(
                    (&principal, role),
                    (Principal::Agent(_), Role::Agent) | (Principal::Submitter(_), Role::Submitter)
                );
                if !granted {
                    return Err(Status::permission_denied(format!(
                        "the certificate of {principal} may not call {}",
                        role.service()
                    )));
                }
                req.extensions_mut().insert(principal);
                Ok(())
            }
        }
    }
}

/// The principal of a request's verified client certificate (the leaf,
/// first in the chain rustls hands over).
fn principal_of<T>(req: &Request<T>) -> Result<Principal, Status> {
    let certs = req.peer_certs().ok_or_else(|| {
        Status::unauthenticated(crate::identity::Error::NoCertificate.to_string())
    })?;
    let leaf = certs.first().ok_or_else(|| {
        Status::unauthenticated(crate::identity::Error::NoCertificate.to_string())
    })?;
    Principal::of_certificate(leaf).map_err(|e| Status::permission_denied(e.to_string()))
}

/// The two secrets of one coordinator.
#[derive(Clone)]
pub struct Tokens {
    pub agent: String,
    pub submit: String,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print secrets, not even in debug logs.
        f.write_str("Tokens { .. }")
    }
}

impl Tokens {
    /// Reads the tokens from `dir`, creating each missing one with mode 0600.
    pub fn load_or_create(dir: &Path) -> Result<Tokens, Error> {
        Ok(Tokens {
            agent: load_or_create_one(&dir.join(AGENT_TOKEN_FILE))?,
            submit: load_or_create_one(&dir.join(SUBMIT_TOKEN_FILE))?,
        })
    }

    /// Checks a request's token for a service that requires `role`.
    pub fn check<T>(&self, role: Role, req: &Request<T>) -> Result<(), Status> {
        let Some(value) = req.metadata().get(farm_proto::AUTHORIZATION) else {
            return Err(Status::unauthenticated(
                "missing token (authorization: Bearer <token>)",
            ));
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| Status::unauthenticated("malformed authorization header"))?;
        let (mine, other, other_role) = match role {
            Role::Agent => (&self.agent, &self.submit, Role::Submitter),
            Role::Submitter => (&self.submit, &self.agent, Role::Agent),
        };
        if constant_time_eq(token.as_bytes(), mine.as_bytes()) {
            Ok(())
        } else if constant_time_eq(token.as_bytes(), other.as_bytes()) {
            Err(Status::permission_denied(format!(
                "a {} token may not call {}",
                match other_role {
                    Role::Agent => "agent",
                    Role::Submitter => "submitter",
                },
                role.service()
            )))
        } else {
            Err(Status::unauthenticated("invalid token"))
        }
    }
}

/// Reads a token written by a coordinator, refused when others may read it.
pub fn read_token(path: &Path) -> Result<String, Error> {
    Ok(farm_runtime::secret::read_token(path)?)
}

fn load_or_create_one(path: &Path) -> Result<String, Error> {
    let io_err = |source| Error::Io {
        path: path.into(),
        source,
    };
    match fs::metadata(path) {
        Ok(_) => read_token(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let mut bytes = [0u8; 32];
            rand::fill(&mut bytes);
            let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            // create_new + 0600 from the start: the secret is never readable by
            // others, not even for the instant a chmod would take.
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(io_err)?;
            writeln!(f, "{token}").map_err(io_err)?;
            f.sync_all().map_err(io_err)?;
            Ok(token)
        }
        Err(e) => Err(io_err(e)),
    }
}

/// Compares secrets without an early exit, so timing does not leak a prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn tokens_are_created_private_and_stable() {
        let dir = tempfile::tempdir().unwrap();
        let first = Tokens::load_or_create(dir.path()).unwrap();
        let second = Tokens::load_or_create(dir.path()).unwrap();
        assert_eq!(first.agent, second.agent);
        assert_eq!(first.submit, second.submit);
        assert_ne!(first.agent, first.submit);
        for f in [AGENT_TOKEN_FILE, SUBMIT_TOKEN_FILE] {
            let mode = fs::metadata(dir.path().join(f))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{f}");
        }
    }

    #[test]
    fn roles_are_checked() {
        let t = Tokens {
            agent: "aa".into(),
            submit: "bb".into(),
        };
        let req = |v: Option<&str>| {
            let mut r = Request::new(());
            if let Some(v) = v {
                r.metadata_mut()
                    .insert(farm_proto::AUTHORIZATION, v.parse().unwrap());
            }
            r
        };
        let cases = [
            (Role::Agent, None, Some(tonic::Code::Unauthenticated)),
            (
                Role::Agent,
                Some("Bearer zz"),
                Some(tonic::Code::Unauthenticated),
            ),
            (Role::Agent, Some("aa"), Some(tonic::Code::Unauthenticated)),
            (
                Role::Agent,
                Some("Bearer bb"),
                Some(tonic::Code::PermissionDenied),
            ),
            (Role::Agent, Some("Bearer aa"), None),
            (
                Role::Submitter,
                Some("Bearer aa"),
                Some(tonic::Code::PermissionDenied),
            ),
            (Role::Submitter, Some("Bearer bb"), None),
        ];
        for (role, header, want) in cases {
            let got = t.check(role, &req(header)).err().map(|s| s.code());
            assert_eq!(got, want, "{role:?} {header:?}");
        }
    }

    #[test]
    fn world_readable_token_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        Tokens::load_or_create(dir.path()).unwrap();
        let p = dir.path().join(AGENT_TOKEN_FILE);
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            Tokens::load_or_create(dir.path()),
            Err(Error::Secret(farm_runtime::secret::Error::TooOpen {
                mode: 0o644,
                ..
            }))
        ));
    }
}

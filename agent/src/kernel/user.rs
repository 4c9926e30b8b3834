//! The unprivileged user every build step runs as (`--build-user`).

use std::path::PathBuf;

/// Why `--build-user` names no user builds can run as.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserError {
    #[error("--build-user {0}: no such user (create one, e.g. `useradd --system farm-build`)")]
    NoUser(String),
    #[error("--build-user {0}: is root; builds run unprivileged")]
    RootUser(String),
}

/// The unprivileged user builds run as.
#[derive(Debug, Clone)]
pub struct BuildUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

impl BuildUser {
    /// The user `name` of this machine, which must not be root.
    pub fn lookup(name: &str) -> Result<BuildUser, UserError> {
        let user = nix::unistd::User::from_name(name)
            .ok()
            .flatten()
            .ok_or_else(|| UserError::NoUser(farm_spec::excerpt(name)))?;
        if user.uid.is_root() {
            return Err(UserError::RootUser(name.to_owned()));
        }
        Ok(BuildUser {
            name: name.to_owned(),
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            home: user.dir,
        })
    }
}

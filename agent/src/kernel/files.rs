//! The operator's build files: base configurations (`--build-configs DIR`)
//! and patches (`--build-patches DIR`) that a matrix's `[build]` names.
//!
//! A matrix gives only a name (`farm_spec::FileName`: one path component);
//! the file must be a regular file directly in the directory, is read by
//! the agent whole and bounded, and is copied into the build's work
//! directory, so the build user needs no access to the operator's
//! directories and a file changed mid-build changes nothing.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use farm_spec::FileName;

/// The largest base configuration or patch read: a distribution's
/// `.config` is about 250 KB, and a patch series for one investigation far
/// less than this.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Which directory a file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Config,
    Patch,
}

impl Kind {
    pub fn flag(self) -> &'static str {
        match self {
            Kind::Config => "--build-configs",
            Kind::Patch => "--build-patches",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::Config => "base configuration",
            Kind::Patch => "patch",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{flag} {}: not a directory: {why}", dir.display())]
    Dir {
        flag: &'static str,
        dir: PathBuf,
        why: String,
    },
    #[error("{what} `{name}`: this agent has no {flag} directory", what = kind.what(), flag = kind.flag())]
    NoDir { kind: Kind, name: String },
    #[error("{what} `{name}`: not a file of {flag} {}: {why}", dir.display(), what = kind.what(), flag = kind.flag())]
    Missing {
        kind: Kind,
        name: String,
        dir: PathBuf,
        why: String,
    },
    #[error("{what} `{name}`: larger than {MAX_FILE_BYTES} bytes", what = kind.what())]
    TooLarge { kind: Kind, name: String },
}

/// The operator's two directories, either left out.
#[derive(Debug, Clone, Default)]
pub struct Files {
    configs: Option<PathBuf>,
    patches: Option<PathBuf>,
}

impl Files {
    /// Checks that each directory given is one, so that a typo fails the
    /// agent's start rather than every build.
    pub fn new(configs: Option<PathBuf>, patches: Option<PathBuf>) -> Result<Files, Error> {
        let check = |flag, d: Option<PathBuf>| -> Result<Option<PathBuf>, Error> {
            let Some(d) = d else { return Ok(None) };
            let bad = |why: String| Error::Dir {
                flag,
                dir: d.clone(),
                why,
            };
            let canon = fs::canonicalize(&d).map_err(|e| bad(e.to_string()))?;
            if !canon.is_dir() {
                return Err(bad("not a directory".into()));
            }
            Ok(Some(canon))
        };
        Ok(Files {
            configs: check(Kind::Config.flag(), configs)?,
            patches: check(Kind::Patch.flag(), patches)?,
        })
    }

    fn dir(&self, kind: Kind) -> Option<&Path> {
        match kind {
            Kind::Config => self.configs.as_deref(),
            Kind::Patch => self.patches.as_deref(),
        }
    }

    /// The names a matrix may give, sorted: the regular files of the
    /// directory whose names are `FileName`s (others can never be named).
    pub fn names(&self, kind: Kind) -> Vec<String> {
        let Some(dir) = self.dir(kind) else {
            return Vec::new();
        };
        let mut out: Vec<String> = fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.parse::<FileName>().is_ok())
            .collect();
        out.sort();
        out
    }

    /// The contents of `name`, whole.
    pub fn read(&self, kind: Kind, name: &FileName) -> Result<Vec<u8>, Error> {
        let dir = self.dir(kind).ok_or_else(|| Error::NoDir {
            kind,
            name: name.to_string(),
        })?;
        let path = dir.join(name.as_str());
        let missing = |why: String| Error::Missing {
            kind,
            name: name.to_string(),
            dir: dir.to_owned(),
            why,
        };
        // Not followed out of the directory: a link is no file of it.
        let meta = fs::symlink_metadata(&path).map_err(|e| missing(e.to_string()))?;
        if !meta.is_file() {
            return Err(missing("not a regular file".into()));
        }
        let mut bytes = Vec::new();
        fs::File::open(&path)
            .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| missing(e.to_string()))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(Error::TooLarge {
                kind,
                name: name.to_string(),
            });
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_regular_files_a_matrix_can_name() {
        let d = tempfile::tempdir().unwrap();
        for n in ["b.patch", "a.patch", ".hidden", "has space"] {
            fs::write(d.path().join(n), "x").unwrap();
        }
        fs::create_dir(d.path().join("sub.patch")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("link.patch")).unwrap();
        let f = Files::new(None, Some(d.path().to_owned())).unwrap();
        assert_eq!(f.names(Kind::Patch), ["a.patch", "b.patch"]);
        assert_eq!(f.names(Kind::Config), Vec::<String>::new());
        assert_eq!(
            f.read(Kind::Patch, &"a.patch".parse().unwrap()).unwrap(),
            b"x"
        );
        let err = f
            .read(Kind::Patch, &"link.patch".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "patch `link.patch`: not a file of --build-patches {}: not a regular file",
                fs::canonicalize(d.path()).unwrap().display()
            )
        );
        let err = f
            .read(Kind::Config, &"fleet.config".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "base configuration `fleet.config`: this agent has no --build-configs directory"
        );
        let err = Files::new(Some("/nonexistent-dir".into()), None)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "--build-configs /nonexistent-dir: not a directory: No such file or directory (os \
             error 2)"
        );
    }
}

//! Whether the build user can reach the cache its builds are made in.
//!
//! The agent runs as root, but every build step runs as the build user in a
//! work directory under `<cache>/builds`. That user must be able to search
//! every directory on the way there: a cache under root's home (mode 0700,
//! the default of `~/.cache` for root before this check) made every build
//! fail after 0.9 s with a `Permission denied` from `git archive`. The
//! agent checks this once, before it takes any run, and refuses to start
//! with one line naming the directory, the user and the fix.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::user::BuildUser;

/// Where root's guest cache is when nothing names another: a farm-owned
/// directory that any build user can reach (`/var/cache` is 0755).
pub const ROOT_CACHE: &str = "/var/cache/farm/guests";

/// A directory on the way to the builds that the build user cannot search.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "guest cache {}: the build user {user} cannot reach {} (mode {mode:04o}, owner uid {owner}), \
     and kernels are built under {}; give the agent a cache it can reach (--guest-cache DIR, \
     e.g. {ROOT_CACHE}, root's default) or let it through (chmod o+x {})",
    cache.display(), dir.display(), builds.display(), dir.display()
)]
pub struct Unreachable {
    pub cache: PathBuf,
    pub builds: PathBuf,
    pub user: String,
    pub dir: PathBuf,
    pub mode: u32,
    pub owner: u32,
}

/// A directory's owner and permission bits, as `stat` gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Perms {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// Whether a user (`uid`, in groups `gids`) may search a directory with
/// `perms`: the owner's bits for its owner, the group's for its groups,
/// the others' for everyone else — the kernel's order, where a denying
/// owner or group class is not rescued by the others' bits. (POSIX ACLs
/// are not read: a directory that needs one is reported, and the fix the
/// message names works without it.)
pub fn searchable(perms: Perms, uid: u32, gids: &[u32]) -> bool {
    let bit = if perms.uid == uid {
        0o100
    } else if gids.contains(&perms.gid) {
        0o010
    } else {
        0o001
    };
    perms.mode & bit != 0
}

/// The first directory of `dirs` (outermost first) that the user cannot
/// search, with its permissions.
pub fn first_unsearchable<'a>(
    dirs: &'a [(PathBuf, Perms)],
    uid: u32,
    gids: &[u32],
) -> Option<&'a (PathBuf, Perms)> {
    dirs.iter().find(|(_, p)| !searchable(*p, uid, gids))
}

/// Why a cache cannot hold builds.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
    #[error("guest cache {}: {source}", cache.display())]
    Io {
        cache: PathBuf,
        source: std::io::Error,
    },
}

/// Makes `<cache>/builds` (as root, for root's agent) and checks that
/// `user` can search every directory from `/` down to it.
pub fn check(cache: &Path, user: &BuildUser) -> Result<(), Error> {
    let io = |source| Error::Io {
        cache: cache.to_path_buf(),
        source,
    };
    let builds = cache.join("builds");
    // What this creates is the farm's, and made for the build user to pass
    // through, whatever the umask (deploy/systemd's is 0077): the
    // directories missing on the way, the cache and its builds.
    let mut made: Vec<PathBuf> = builds
        .ancestors()
        .take_while(|d| !d.exists())
        .map(Path::to_path_buf)
        .collect();
    std::fs::create_dir_all(&builds).map_err(io)?;
    made.extend([cache.to_path_buf(), builds.clone()]);
    for d in &made {
        traversable(d).map_err(io)?;
    }
    let builds = std::fs::canonicalize(&builds).map_err(io)?;
    let mut dirs = Vec::new();
    for dir in builds.ancestors() {
        let m = std::fs::metadata(dir).map_err(io)?;
        dirs.push((
            dir.to_path_buf(),
            Perms {
                mode: m.mode() & 0o7777,
                uid: m.uid(),
                gid: m.gid(),
            },
        ));
    }
    dirs.reverse();
    let gids = groups(user);
    match first_unsearchable(&dirs, user.uid, &gids) {
        None => Ok(()),
        Some((dir, p)) => Err(Unreachable {
            cache: cache.to_path_buf(),
            builds: builds.clone(),
            user: user.name.clone(),
            dir: dir.clone(),
            mode: p.mode,
            owner: p.uid,
        }
        .into()),
    }
}

/// Lets the build user pass through `dir` to what it owns below: execute
/// for group and others, never read (it lists nothing). An agent under
/// `UMask=0077` (deploy/systemd) makes its directories 0700.
pub fn traversable(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir)?.permissions().mode();
    if mode & 0o011 != 0o011 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o011))?;
    }
    Ok(())
}

/// The user's groups: its primary group and those that list it.
fn groups(user: &BuildUser) -> Vec<u32> {
    let name = std::ffi::CString::new(user.name.as_str()).ok();
    let gid = nix::unistd::Gid::from_raw(user.gid);
    let listed = name
        .and_then(|n| nix::unistd::getgrouplist(&n, gid).ok())
        .unwrap_or_default();
    let mut gids: Vec<u32> = listed.into_iter().map(|g| g.as_raw()).collect();
    if !gids.contains(&user.gid) {
        gids.push(user.gid);
    }
    gids
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(mode: u32, uid: u32, gid: u32) -> Perms {
        Perms { mode, uid, gid }
    }

    #[test]
    fn the_class_that_applies_decides_as_the_kernel_does() {
        // (perms, uid, groups, searchable)
        let cases = [
            (p(0o700, 0, 0), 65534, vec![65534], false), // root's home
            (p(0o755, 0, 0), 65534, vec![65534], true),
            (p(0o711, 0, 0), 65534, vec![65534], true),
            (p(0o750, 0, 100), 65534, vec![100], true), // through the group
            (p(0o705, 0, 100), 65534, vec![100], false), // group class denies
            (p(0o070, 65534, 0), 65534, vec![0], false), // owner class denies
            (p(0o700, 65534, 0), 65534, vec![65534], true),
        ];
        for (perms, uid, gids, want) in cases {
            assert_eq!(searchable(perms, uid, &gids), want, "{perms:?} {uid}");
        }
    }

    #[test]
    fn the_first_closed_directory_on_the_way_is_named() {
        let dirs = vec![
            (PathBuf::from("/"), p(0o755, 0, 0)),
            (PathBuf::from("/root"), p(0o700, 0, 0)),
            (PathBuf::from("/root/.cache"), p(0o700, 0, 0)),
            (PathBuf::from("/root/.cache/farm"), p(0o755, 0, 0)),
        ];
        let (dir, perms) = first_unsearchable(&dirs, 65534, &[65534]).unwrap();
        assert_eq!(dir, Path::new("/root"));
        let e = Unreachable {
            cache: "/root/.cache/farm/guests".into(),
            builds: "/root/.cache/farm/guests/builds".into(),
            user: "nobody".into(),
            dir: dir.clone(),
            mode: perms.mode,
            owner: perms.uid,
        };
        assert_eq!(
            e.to_string(),
            "guest cache /root/.cache/farm/guests: the build user nobody cannot reach /root \
             (mode 0700, owner uid 0), and kernels are built under \
             /root/.cache/farm/guests/builds; give the agent a cache it can reach (--guest-cache \
             DIR, e.g. /var/cache/farm/guests, root's default) or let it through (chmod o+x /root)"
        );
        assert_eq!(first_unsearchable(&dirs[..1], 65534, &[65534]), None);
    }

    /// On this machine, as root: a 0700 directory of root's on the way is
    /// refused by name, and opening it lets the same user through.
    #[test]
    fn a_cache_behind_a_closed_directory_is_refused_by_name() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "makes directories owned by root and checks them for nobody: run as root"
        );
        let user = BuildUser::lookup("nobody").unwrap();
        let top = tempfile::tempdir().unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let closed = top.path().join("home");
        std::fs::create_dir(&closed).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        let cache = closed.join(".cache/farm/guests");
        let Err(Error::Unreachable(why)) = check(&cache, &user) else {
            panic!("a cache behind {} was let through", closed.display());
        };
        assert_eq!(why.dir, std::fs::canonicalize(&closed).unwrap());
        assert_eq!((why.mode, why.owner), (0o700, 0));
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o711)).unwrap();
        check(&cache, &user).unwrap();
    }

    #[test]
    fn a_directory_made_under_a_strict_umask_becomes_traversable_not_readable() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let dir = tempfile::tempdir().unwrap();
        let strict = dir.path().join("strict");
        std::fs::create_dir(&strict).unwrap();
        std::fs::set_permissions(&strict, std::fs::Permissions::from_mode(0o700)).unwrap();
        traversable(&strict).unwrap();
        assert_eq!(mode(&strict), 0o711);
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        traversable(&open).unwrap();
        assert_eq!(mode(&open), 0o755);
    }

    /// As deploy/systemd's agent makes them (`UMask=0077`): the directories
    /// the check creates are the farm's, and opened for the build user to
    /// pass through; those it did not create are left as they were.
    #[test]
    fn what_the_check_creates_under_a_strict_umask_lets_the_build_user_through() {
        use std::os::unix::fs::PermissionsExt;
        assert!(
            nix::unistd::geteuid().is_root(),
            "checks directories for nobody: run as root"
        );
        let user = BuildUser::lookup("nobody").unwrap();
        let top = tempfile::tempdir().unwrap();
        std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o750)).unwrap();
        let cache = top.path().join("farm/guests");
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
        let checked = check(&cache, &user);
        nix::sys::stat::umask(old);
        // The top is the operator's, 0750: nobody is refused there, by name.
        let Err(Error::Unreachable(why)) = checked else {
            panic!("{checked:?}");
        };
        assert_eq!(why.dir, std::fs::canonicalize(top.path()).unwrap());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        for d in [top.path().join("farm"), cache.clone(), cache.join("builds")] {
            assert_eq!(mode(&d), 0o711, "{}", d.display());
        }
        assert_eq!(mode(top.path()), 0o750);
        std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o751)).unwrap();
        check(&cache, &user).unwrap();
    }
}

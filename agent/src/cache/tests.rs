use super::*;

const T0: u64 = 1_700_000_000;
const MIN: u64 = 60;
const HOUR: u64 = 3600;
const DAY: u64 = 24 * HOUR;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn entry(path: &str, bytes: u64, used: u64, kind: Kind) -> Entry {
    Entry {
        path: PathBuf::from(path),
        bytes,
        used: at(used),
        kind,
    }
}

fn chosen(entries: &[Entry], budget: u64, now: u64) -> Vec<&str> {
    choose(entries, budget, at(now), IN_USE)
        .into_iter()
        .map(|i| entries[i].path.to_str().unwrap())
        .collect()
}

#[test]
fn nothing_chosen_within_budget() {
    let es = [
        entry("a", 100, T0, Kind::Image),
        entry("b", 200, T0 + 1, Kind::Kernel),
    ];
    assert!(chosen(&es, 300, T0 + DAY,).is_empty());
    assert!(chosen(&es, 1000, T0 + DAY).is_empty());
    assert!(chosen(&[], 0, T0).is_empty());
}

#[test]
fn least_recently_used_first_and_only_as_many_as_needed() {
    let es = [
        entry("new", 100, T0 + 3 * HOUR, Kind::Image),
        entry("oldest", 100, T0, Kind::Kernel),
        entry("middle", 100, T0 + 2 * HOUR, Kind::Sysroot),
        entry("old", 100, T0 + HOUR, Kind::Image),
    ];
    let now = T0 + DAY;
    assert_eq!(chosen(&es, 399, now), ["oldest"]);
    assert_eq!(chosen(&es, 300, now), ["oldest"]);
    assert_eq!(chosen(&es, 250, now), ["oldest", "old"]);
    assert_eq!(chosen(&es, 0, now), ["oldest", "old", "middle", "new"]);
}

#[test]
fn a_big_entry_can_cover_the_excess() {
    let es = [
        entry("small-old", 10, T0, Kind::Image),
        entry("big", 1000, T0 + HOUR, Kind::Kernel),
        entry("small-new", 10, T0 + 2 * HOUR, Kind::Image),
    ];
    assert_eq!(chosen(&es, 500, T0 + DAY), ["small-old", "big"]);
}

#[test]
fn recently_used_entries_are_kept_but_count() {
    let now = T0 + DAY;
    let es = [
        entry("just-used", 1000, now - MIN, Kind::Kernel),
        entry("nine-minutes", 1000, now - 9 * MIN, Kind::Image),
        entry("eleven-minutes", 10, now - 11 * MIN, Kind::Image),
        entry("yesterday", 10, T0, Kind::Image),
    ];
    // Over budget by the recent ones alone: every other one goes.
    assert_eq!(chosen(&es, 100, now), ["yesterday", "eleven-minutes"]);
    assert_eq!(chosen(&es, 0, now), ["yesterday", "eleven-minutes"]);
    // Exactly the window's edge counts as old.
    let edge = [entry("edge", 10, now - 10 * MIN, Kind::Image)];
    assert_eq!(chosen(&edge, 0, now), ["edge"]);
}

#[test]
fn times_in_the_future_count_as_recent() {
    let es = [entry("skewed", 100, T0 + HOUR, Kind::Kernel)];
    assert!(chosen(&es, 0, T0).is_empty());
}

#[test]
fn ties_go_to_the_cheaper_kind_then_the_path() {
    let es = [
        entry("k", 10, T0, Kind::Kernel),
        entry("s", 10, T0, Kind::Sysroot),
        entry("i2", 10, T0, Kind::Image),
        entry("i1", 10, T0, Kind::Image),
    ];
    assert_eq!(chosen(&es, 0, T0 + DAY), ["i1", "i2", "s", "k"]);
    assert_eq!(chosen(&es, 25, T0 + DAY), ["i1", "i2"]);
}

#[test]
fn huge_sizes_do_not_overflow() {
    let es = [
        entry("a", u64::MAX, T0, Kind::Kernel),
        entry("b", u64::MAX, T0 + 1, Kind::Kernel),
    ];
    assert_eq!(chosen(&es, 0, T0 + DAY), ["a", "b"]);
    assert_eq!(chosen(&es, u64::MAX, T0 + DAY), ["a"]);
}

#[test]
fn temporary_names() {
    assert_eq!(temp_base("6.1.0-9-amd64.tmp-123-4"), Some("6.1.0-9-amd64"));
    assert_eq!(temp_base("busybox-static.tmp-1-0"), Some("busybox-static"));
    assert_eq!(temp_base("tmp-123-4"), Some(""));
    assert_eq!(temp_base("tmp-123-4.gz"), Some(""));
    assert_eq!(temp_base("6.1.0-9-amd64"), None);
    assert_eq!(temp_base("6.1.0-9-amd64.lock"), None);
    assert_eq!(temp_base("x.tmp-123-4.gz"), None);
    assert_eq!(temp_base("x.tmp-12a-4"), None);
    assert_eq!(temp_base("x.tmp-123-"), None);
    assert_eq!(temp_base("xtmp-1-2"), None);
    assert_eq!(temp_base(".tmp-1-2"), None);
    assert_eq!(temp_base("abc.cpio.gz"), None);
    assert_eq!(
        temp_lock(Path::new("/c/kernels/v-amd64.tmp-1-2")),
        Some(PathBuf::from("/c/kernels/v-amd64.lock"))
    );
    assert_eq!(temp_lock(Path::new("/c/images/initramfs/tmp-1-2.gz")), None);
}

#[test]
fn entries_of_paths() {
    let c = Path::new("/c");
    let of = |p: &str| entry_of(c, Path::new(p));
    assert_eq!(
        of("/c/kernels/6.1-amd64/root/boot/vmlinuz-6.1-amd64"),
        Some(PathBuf::from("/c/kernels/6.1-amd64"))
    );
    assert_eq!(
        of("/c/kernels/6.1-amd64"),
        Some(PathBuf::from("/c/kernels/6.1-amd64"))
    );
    assert_eq!(
        of("/c/sysroots/s390x/busybox-static/root"),
        Some(PathBuf::from("/c/sysroots/s390x/busybox-static"))
    );
    assert_eq!(
        of("/c/images/initramfs/ab.cpio.gz"),
        Some(PathBuf::from("/c/images/initramfs/ab.cpio.gz"))
    );
    assert_eq!(of("/c/kernels"), None);
    assert_eq!(of("/c/sysroots/s390x"), None);
    assert_eq!(of("/c/images/other/x"), None);
    assert_eq!(of("/c/kvm-probe"), None);
    assert_eq!(of("/elsewhere/kernels/x"), None);
    assert_eq!(of("/c/kernels/../kvm-probe"), None);
}

// A fake cache on disk.

fn ago(secs: u64) -> SystemTime {
    SystemTime::now() - Duration::from_secs(secs)
}

fn set_age(path: &Path, secs: u64) {
    File::open(path).unwrap().set_modified(ago(secs)).unwrap();
}

/// A file of `bytes` bytes, changed `secs` ago.
fn file(path: &Path, bytes: usize, secs: u64) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, vec![b'x'; bytes]).unwrap();
    set_age(path, secs);
}

/// A kernel entry of 1000 bytes used `secs` ago, with its lock file.
fn kernel(cache: &Path, version: &str, secs: u64) -> PathBuf {
    let e = cache.join("kernels").join(version);
    file(&e.join("manifest"), 100, secs);
    file(&e.join(format!("root/boot/vmlinuz-{version}")), 900, secs);
    set_age(&e.join("root/boot"), secs);
    set_age(&e.join("root"), secs);
    set_age(&e, secs);
    fs::write(cache.join("kernels").join(format!("{version}.lock")), "").unwrap();
    e
}

/// A sysroot entry of 1000 bytes used `secs` ago, with its lock file.
fn sysroot(cache: &Path, key: &str, secs: u64) -> PathBuf {
    let dir = cache.join("sysroots/s390x");
    let e = dir.join(key);
    file(&e.join("manifest"), 200, secs);
    file(&e.join("root/bin/busybox"), 800, secs);
    set_age(&e.join("root/bin"), secs);
    set_age(&e.join("root"), secs);
    set_age(&e, secs);
    fs::write(dir.join(format!("{key}.lock")), "").unwrap();
    e
}

/// A kept build of 1000 bytes used `secs` ago, with its lock file, and
/// beside it what the builder keeps of its own: a failure, a work directory.
fn build(cache: &Path, key: &str, secs: u64) -> PathBuf {
    let dir = cache.join("builds");
    let e = dir.join(key);
    file(&e.join("bzImage"), 900, secs);
    file(&e.join("config"), 100, secs);
    set_age(&e, secs);
    fs::write(dir.join(format!("{key}.lock")), "").unwrap();
    file(&dir.join(format!("{key}x.failed")), 10, 9 * DAY);
    file(
        &dir.join(format!("work-{key}y-AbC/src/Makefile")),
        10,
        9 * DAY,
    );
    e
}

fn image(cache: &Path, sha: &str, bytes: usize, secs: u64) -> PathBuf {
    let p = cache.join(format!("images/initramfs/{sha}.cpio.gz"));
    file(&p, bytes, secs);
    p
}

fn removed(e: &Evicted) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = e.removed.iter().map(|r| r.path.clone()).collect();
    v.sort();
    v
}

#[test]
fn over_budget_evicts_least_recently_used_first() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path();
    let k = kernel(c, "6.1.0-9-amd64", 3 * DAY);
    let s = sysroot(c, "stress-ng", 2 * DAY);
    let i1 = image(c, "aa", 1000, DAY);
    let i2 = image(c, "bb", 1000, HOUR);
    file(&c.join("kvm-probe"), 50, 400 * DAY);

    let ev = evict(c, 2500).unwrap();
    assert_eq!(ev.removed.len(), 2, "{ev:?}");
    assert_eq!(ev.removed[0].path, k);
    assert_eq!(ev.removed[0].kind, Kind::Kernel);
    assert_eq!(ev.removed[1].path, s);
    assert_eq!(ev.bytes, 2000);
    assert_eq!(ev.kept_bytes, 2000);
    assert!(ev.failed.is_empty() && ev.locked.is_empty());
    assert!(!k.exists() && !s.exists());
    assert!(i1.is_file() && i2.is_file());
    // Lock files stay; nothing is left beside them.
    assert!(c.join("kernels/6.1.0-9-amd64.lock").is_file());
    assert!(c.join("sysroots/s390x/stress-ng.lock").is_file());
    assert_eq!(fs::read_dir(c.join("kernels")).unwrap().count(), 1);
    assert!(c.join("kvm-probe").is_file());

    // Within the budget now: nothing more.
    let again = evict(c, 2500).unwrap();
    assert!(again.removed.is_empty());
    assert_eq!(again.kept_bytes, 2000);
}

#[test]
fn kept_builds_are_entries_evicted_by_last_use_under_their_lock() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path();
    let old = build(c, "aaaa", 3 * DAY);
    let locked = build(c, "bbbb", 2 * DAY);
    let used = build(c, "cccc", 4 * DAY);
    touch(&used);
    assert_eq!(entry_of(c, &used.join("bzImage")), Some(used.clone()));
    let k = kernel(c, "6.1.0-9-amd64", DAY);
    // A builder holds one build's lock: it is being read or made.
    let held = File::create(c.join("builds/bbbb.lock")).unwrap();
    held.lock().unwrap();

    let ev = evict(c, 1000).unwrap();
    // The oldest first; the locked one counts as used now, so the kernel
    // goes next.
    assert_eq!(removed(&ev), [old.as_path(), k.as_path()], "{ev:?}");
    assert_eq!(
        (&ev.removed[0].path, ev.removed[0].kind),
        (&old, Kind::Build)
    );
    assert_eq!(ev.locked, [locked.as_path()]);
    assert_eq!(ev.kept_bytes, 2000);
    assert!(locked.is_dir() && used.is_dir());
    // The builder's own files stay, and so do the locks.
    assert!(c.join("builds/aaaax.failed").is_file());
    assert!(c.join("builds/work-aaaay-AbC/src/Makefile").is_file());
    assert!(c.join("builds/aaaa.lock").is_file());
    drop(held);
}

#[test]
fn recent_entries_are_kept_even_over_budget() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path();
    let k = kernel(c, "6.1.0-9-amd64", MIN);
    let fresh = image(c, "aa", 5000, 5 * MIN);
    let old = image(c, "bb", 10, DAY);
    let ev = evict(c, 0).unwrap();
    assert_eq!(removed(&ev), [old.as_path()]);
    assert_eq!(ev.kept_bytes, 6000);
    assert!(k.is_dir() && fresh.is_file() && !old.exists());
}

#[test]
fn touched_entries_count_as_recent() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path();
    let k = kernel(c, "6.1.0-9-amd64", 3 * DAY);
    let i = image(c, "aa", 10, 3 * DAY);
    touch(&k);
    touch(&i);
    let ev = evict(c, 0).unwrap();
    assert!(ev.removed.is_empty(), "{ev:?}");
    assert!(k.is_dir() && i.is_file());
    // A missing entry is only logged.
    touch(&c.join("kernels/missing"));
}

#[test]
fn an_entry_touched_after_the_scan_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path();
    let k = kernel(c, "6.1.0-9-amd64", 3 * DAY);
    let i = image(c, "aa", 10, 3 * DAY);
    let now = SystemTime::now();
    let scanned = |path: &Path, kind| Entry {
        path: path.to_path_buf(),
        bytes: 1000,
        used: ago(3 * DAY),
        kind,
    };
    touch(&k);
    touch(&i);
    assert!(matches!(
        remove_entry(&scanned(&k, Kind::Kernel), now),
        Ok(Outcome::Touched)
    ));
    assert!(matches!(
        remove_entry(&scanned(&i, Kind::Image), now),
        Ok(Outcome::Touched)
    ));
    assert!(k.is_dir() && i.is_file());
    let gone = c.join("images/initramfs/gone.cpio.gz");
    assert!(matches!(
        remove_entry(&scanned(&gone, Kind::Image), now),
        Ok(Outcome::Gone)
    ));
}

#[test]
fn a_locked_entry_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path();
    let locked = kernel(c, "6.1.0-9-amd64", 3 * DAY);
    let next = kernel(c, "6.1.0-10-amd64", 2 * DAY);
    let young = image(c, "aa", 1000, DAY);
    // A builder (another open file description) holds the lock.
    let held = File::create(c.join("kernels/6.1.0-9-amd64.lock")).unwrap();
    held.lock().unwrap();

    let ev = evict(c, 2000).unwrap();
    assert_eq!(ev.locked, [locked.as_path()]);
    assert_eq!(removed(&ev), [next.as_path()]);
    assert!(locked.is_dir() && !next.exists() && young.is_file());
    assert_eq!(ev.kept_bytes, 2000);

    drop(held);
    // Other tests of this binary fork children; one forked while `held`
    // was open shares its open file description, and so its lock, until it
    // execs (the descriptor is close-on-exec). Wait for that to pass.
    let lock = c.join("kernels/6.1.0-9-amd64.lock");
    let t = std::time::Instant::now();
    while File::open(&lock).unwrap().try_lock().is_err() {
        assert!(t.elapsed().as_secs() < 10, "the lock stays held");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let ev = evict(c, 1000).unwrap();
    assert_eq!(removed(&ev), [locked.as_path()]);
    assert!(ev.locked.is_empty());
}

#[test]
fn stale_runs_and_temporaries_are_swept() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path();
    let stale_run = c.join("run-AbC123");
    file(&stale_run.join("console.log"), 300, 2 * DAY);
    set_age(&stale_run, 2 * DAY);
    // Old directory, recently written log: still running.
    let live_run = c.join("run-XyZ789");
    file(&live_run.join("console.log"), 300, MIN);
    set_age(&live_run, 2 * DAY);
    let stale_probe = c.join("kvm-probe-Q1w2E3");
    file(&stale_probe.join("console.log"), 10, 3 * DAY);
    set_age(&stale_probe, 3 * DAY);
    file(&c.join("kvm-probe"), 50, 400 * DAY);
    file(&c.join("run-not-a-dir"), 5, 3 * DAY);
    file(&c.join("unknown"), 5, 3 * DAY);

    let stale_tmp = c.join("kernels/6.1.0-9-amd64.tmp-4242-0");
    file(&stale_tmp.join("root/x"), 700, 2 * HOUR);
    set_age(&stale_tmp.join("root"), 2 * HOUR);
    set_age(&stale_tmp, 2 * HOUR);
    let fresh_tmp = c.join("kernels/6.1.0-10-amd64.tmp-4242-1");
    file(&fresh_tmp.join("x"), 700, 10 * MIN);
    set_age(&fresh_tmp, 10 * MIN);
    // Old, but its build holds the lock.
    let building = c.join("sysroots/s390x/sysbench.tmp-4242-2");
    file(&building.join("debs/x.deb"), 700, 5 * HOUR);
    set_age(&building.join("debs"), 5 * HOUR);
    set_age(&building, 5 * HOUR);
    let held = File::create(c.join("sysroots/s390x/sysbench.lock")).unwrap();
    held.lock().unwrap();
    let cpio = c.join("images/initramfs/tmp-4242-3");
    file(&cpio, 40, 2 * HOUR);
    let gz = c.join("images/initramfs/tmp-4242-4.gz");
    file(&gz, 20, 2 * HOUR);
    let fresh_gz = c.join("images/initramfs/tmp-4242-5.gz");
    file(&fresh_gz, 20, MIN);

    let ev = evict(c, u64::MAX).unwrap();
    let mut want = vec![stale_run, stale_probe, stale_tmp, cpio, gz];
    want.sort();
    assert_eq!(removed(&ev), want);
    assert!(want.iter().all(|p| !p.exists()));
    assert_eq!(ev.bytes, 300 + 10 + 700 + 40 + 20);
    for kept in [&live_run, &fresh_tmp, &building, &fresh_gz] {
        assert!(kept.exists(), "{}", kept.display());
    }
    assert!(c.join("kvm-probe").is_file());
    assert!(c.join("run-not-a-dir").is_file());
    assert!(c.join("unknown").is_file());
    // Temporaries are not entries: nothing counted against the budget.
    assert_eq!(ev.kept_bytes, 0);
    assert!(ev.failed.is_empty(), "{:?}", ev.failed);
}

#[test]
fn kvm_probe_and_locks_are_never_removed() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path();
    file(&c.join("kvm-probe"), 50, 400 * DAY);
    let k = kernel(c, "6.1.0-9-amd64", 400 * DAY);
    let s = sysroot(c, "busybox-static", 400 * DAY);
    let i = image(c, "aa", 100, 400 * DAY);
    let ev = evict(c, 0).unwrap();
    assert_eq!(removed(&ev).len(), 3);
    assert_eq!(ev.kept_bytes, 0);
    assert!(!k.exists() && !s.exists() && !i.exists());
    assert_eq!(fs::read_to_string(c.join("kvm-probe")).unwrap().len(), 50);
    assert!(c.join("kernels/6.1.0-9-amd64.lock").is_file());
    assert!(c.join("sysroots/s390x/busybox-static.lock").is_file());
}

#[test]
fn symlinks_are_neither_counted_nor_followed() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let precious = outside.path().join("precious");
    file(&precious, 10_000, DAY);
    let c = dir.path();
    let k = kernel(c, "6.1.0-9-amd64", 3 * DAY);
    std::os::unix::fs::symlink(outside.path(), k.join("root/lib")).unwrap();
    std::os::unix::fs::symlink(&precious, k.join("root/vmlinuz")).unwrap();
    set_age(&k.join("root"), 3 * DAY);
    set_age(&k, 3 * DAY);
    let ev = evict(c, 0).unwrap();
    assert_eq!(removed(&ev), [k.as_path()]);
    assert_eq!(ev.bytes, 1000);
    assert!(!k.exists());
    assert_eq!(fs::metadata(&precious).unwrap().len(), 10_000);
}

#[test]
fn a_missing_cache_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let ev = evict(&dir.path().join("nope"), 0).unwrap();
    assert!(ev.removed.is_empty() && ev.failed.is_empty());
    assert_eq!((ev.bytes, ev.kept_bytes), (0, 0));
}

#[test]
fn an_unlistable_layout_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    // `kernels` a file: listing it fails.
    fs::write(dir.path().join("kernels"), "").unwrap();
    let e = evict(dir.path(), 0).unwrap_err();
    assert_eq!(e.path, dir.path().join("kernels"));
    assert!(e.to_string().contains("kernels"), "{e}");
}

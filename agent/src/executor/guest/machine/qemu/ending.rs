//! How a guest is ending, read from its console as it is written.
//!
//! A kernel built from a tree often cannot power off. Without working ACPI,
//! `poweroff -f` only halts ("reboot: System halted") and QEMU runs until
//! the timeout. So the host does not wait for QEMU to exit by itself. It
//! stops QEMU as soon as the report is complete (the caller knows when:
//! [`super::Watch::report_complete`]), or when the console says the guest
//! halted, or a short grace after it said it powers off or panicked. The
//! grace lets a working power-off or `panic=-1`'s reset (which `-no-reboot`
//! turns into QEMU's exit) end it first, and lets a panic's call trace reach
//! the console. None of it needs anything of the guest kernel but its
//! console.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long QEMU may still run after the console said the guest powers off
/// or panicked: a power-off or a reset under TCG takes well under a second,
/// and a panic's trace a few hundred lines.
pub const GRACE: Duration = Duration::from_secs(5);

/// The longest panic line an error quotes.
const MAX_QUOTED: usize = 200;
/// The most of the console read at one look: a guest flooding its console
/// costs the host a bounded read every tick.
const MAX_READ: u64 = 1 << 20;
/// A line longer than this is cut: only the start of a line is matched.
const MAX_LINE: usize = 4096;

/// What a console line says of the guest's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The kernel halted: nothing more will happen.
    Halted,
    /// The kernel is powering off; QEMU should exit at once.
    PoweringOff,
    /// The kernel panicked: the line, cut to a short prefix.
    Panicked(String),
}

impl Ending {
    /// How long QEMU may still run after this was seen.
    pub fn grace(&self) -> Duration {
        match self {
            Ending::Halted => Duration::ZERO,
            Ending::PoweringOff | Ending::Panicked(_) => GRACE,
        }
    }
}

/// What `line` of the console says of the end, if anything. The kernel
/// prints these at KERN_EMERG, so `quiet` does not hide them.
pub fn ending_of(line: &str) -> Option<Ending> {
    if line.contains("reboot: System halted") {
        Some(Ending::Halted)
    } else if line.contains("reboot: Power down") {
        Some(Ending::PoweringOff)
    } else if let Some(at) = line.find("Kernel panic - not syncing") {
        let quoted: String = line[at..].trim_end().chars().take(MAX_QUOTED).collect();
        Some(Ending::Panicked(quoted))
    } else {
        None
    }
}

/// Reads a console log as it grows, line by line, from where it left off.
pub struct Scan {
    path: PathBuf,
    offset: u64,
    /// The start of a line not yet ended.
    partial: Vec<u8>,
}

impl Scan {
    pub fn new(path: &Path) -> Scan {
        Scan {
            path: path.to_owned(),
            offset: 0,
            partial: Vec::new(),
        }
    }

    /// The first ending in what was written since the last look. The first
    /// one counts: a panic after a halt changes nothing.
    pub fn look(&mut self) -> Option<Ending> {
        let mut f = fs::File::open(&self.path).ok()?;
        f.seek(SeekFrom::Start(self.offset)).ok()?;
        let mut new = Vec::new();
        let read = f.take(MAX_READ).read_to_end(&mut new).ok()?;
        self.offset += read as u64;
        self.take(&new)
    }

    /// The lines `bytes` completes, with what came before them.
    fn take(&mut self, bytes: &[u8]) -> Option<Ending> {
        let mut found = None;
        for piece in bytes.split_inclusive(|&b| b == b'\n') {
            let room = MAX_LINE.saturating_sub(self.partial.len());
            self.partial
                .extend_from_slice(&piece[..piece.len().min(room)]);
            if piece.last() != Some(&b'\n') {
                break;
            }
            if found.is_none() {
                found = ending_of(&String::from_utf8_lossy(&self.partial));
            }
            self.partial.clear();
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_own_lines_are_read_as_endings() {
        assert_eq!(
            ending_of("[    2.131415] reboot: System halted"),
            Some(Ending::Halted)
        );
        assert_eq!(ending_of("reboot: Power down"), Some(Ending::PoweringOff));
        assert_eq!(
            ending_of(
                "[    1.5] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100\r"
            ),
            Some(Ending::Panicked(
                "Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100".into()
            ))
        );
        assert_eq!(ending_of("Run /init as init process"), None);
        // A workload's own words on the console are not the kernel's.
        assert_eq!(ending_of("the system halted nicely"), None);
        let long = format!("Kernel panic - not syncing: {}", "x".repeat(1000));
        let Some(Ending::Panicked(q)) = ending_of(&long) else {
            panic!("not a panic");
        };
        assert_eq!(q.len(), MAX_QUOTED);
    }

    #[test]
    fn a_line_split_across_looks_is_read_once_whole() {
        let mut s = Scan::new(Path::new("/nonexistent"));
        assert_eq!(s.take(b"Booting\nreboot: Sys"), None);
        assert_eq!(s.take(b"tem hal"), None);
        assert_eq!(s.take(b"ted\nmore\n"), Some(Ending::Halted));
        assert_eq!(s.take(b"reboot: Power down\n"), Some(Ending::PoweringOff));
        // The first ending of one look counts.
        assert_eq!(
            s.take(b"reboot: System halted\nKernel panic - not syncing: x\n"),
            Some(Ending::Halted)
        );
    }

    #[test]
    fn a_file_is_read_from_where_the_last_look_ended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("console.log");
        let mut s = Scan::new(&path);
        assert_eq!(s.look(), None, "no file yet");
        fs::write(&path, "Linux version 6.1\nreboot: Power").unwrap();
        assert_eq!(s.look(), None);
        fs::write(&path, "Linux version 6.1\nreboot: Power down\n").unwrap();
        assert_eq!(s.look(), Some(Ending::PoweringOff));
        assert_eq!(s.look(), None, "nothing new");
    }
}

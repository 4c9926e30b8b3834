//! `/proc/<pid>/task/<tid>/stat`: one thread's run state, CPU and CPU time.
//!
//! The file is one line of space-separated fields (`proc(5)`): `tid (comm) state ppid
//! ...`. The comm is the thread's name in parentheses; a thread may name itself
//! anything of up to 15 bytes, spaces and parentheses included (`(a) R (b c)`), so the
//! comm runs from the first `(` to the *last* `)`, and the numbered fields are counted
//! from there. Fields used, by their `proc(5)` number:
//!
//! | # | field | meaning |
//! |---|---|---|
//! | 1 | tid | the thread id |
//! | 2 | comm | the thread name |
//! | 3 | state | `R` running or runnable, `S` sleeping, `D` uninterruptible, `T`, `t`, `X`, `Z`, `P`, `I` (idle kernel thread) |
//! | 14, 15 | utime, stime | CPU time in user and kernel mode, USER_HZ ticks |
//! | 20 | num_threads | threads in the thread group |
//! | 39 | processor | the CPU the thread runs on, is queued on, or last ran on |
//!
//! The number of context switches is not in this file (it is in `status` and `sched`).

#[cfg(test)]
mod tests;

use std::io;
use std::path::Path;

use super::error::{Error, ParseReason, Result};

/// The canonical name errors use; the readers replace it with the path they read.
const FILE: &str = "/proc/<pid>/task/<tid>/stat";

/// One thread at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSample {
    pub tid: u32,
    pub comm: String,
    /// `R` is runnable: running, or waiting for a CPU on `cpu`'s run queue.
    pub state: char,
    /// Where it runs or waits when `state` is `R`; otherwise where it last ran.
    pub cpu: u32,
    /// USER_HZ ticks, see [`super::procstat::user_hz`].
    pub utime: u64,
    pub stime: u64,
    /// Threads of its process; in a process's own `stat` (`/proc/<pid>/stat`) the
    /// other fields are those of the main thread, except the times, which are the
    /// whole process's, so a single-threaded process needs no second read.
    pub num_threads: u32,
}

impl TaskSample {
    /// Running or waiting for a CPU (state `R`).
    pub fn is_runnable(&self) -> bool {
        self.state == 'R'
    }
}

/// Parses the text of a task `stat` file.
pub fn parse(text: &str) -> Result<TaskSample> {
    let line = text.trim_end_matches('\n');
    let bad = |reason: &'static str| Error::parse(FILE, 1, reason, line);
    let (Some(open), Some(close)) = (line.find('('), line.rfind(')')) else {
        return Err(bad("no comm in parentheses"));
    };
    if close < open {
        return Err(bad("no comm in parentheses"));
    }
    let tid = line[..open]
        .trim()
        .parse::<u32>()
        .map_err(|_| bad("the tid is not a number"))?;
    let comm = line[open + 1..close].to_owned();
    // Field 3 onwards; `rest[i]` is field `i + 3`.
    let rest: Vec<&str> = line[close + 1..].split_ascii_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).copied();
    let mut state_chars = field(3).unwrap_or("").chars();
    let state = match (state_chars.next(), state_chars.next()) {
        (Some(c), None) if c.is_ascii_alphabetic() => c,
        _ => return Err(bad("the state is not a single letter")),
    };
    let number = |n: usize, name: &'static str| -> Result<u64> {
        field(n)
            .ok_or_else(|| Error::parse(FILE, 1, ParseReason::NoField { n, name }, line))?
            .parse::<u64>()
            .map_err(|_| Error::parse(FILE, 1, ParseReason::FieldNotNumber { n, name }, line))
    };
    let utime = number(14, "utime")?;
    let stime = number(15, "stime")?;
    let num_threads = u32::try_from(number(20, "num_threads")?)
        .map_err(|_| bad("field 20 (num_threads) is too large"))?;
    let cpu = u32::try_from(number(39, "processor")?)
        .map_err(|_| bad("field 39 (processor) is not a cpu number"))?;
    Ok(TaskSample {
        tid,
        comm,
        state,
        cpu,
        utime,
        stime,
        num_threads,
    })
}

/// Reads and parses `<root>/proc/<pid>/task/<tid>/stat`.
pub fn read(root: &Path, pid: u32, tid: u32) -> Result<TaskSample> {
    let path = super::files::path_below(root, &format!("/proc/{pid}/task/{tid}/stat"));
    parse(&super::files::read_text(&path)?).map_err(|e| e.at(&path))
}

/// Samples every thread of process `pid`, in tid order. A thread that exits between
/// listing the directory and reading its file is skipped; a process that has exited is
/// an [`Error::Read`] whose source has kind `NotFound`.
pub fn read_process(root: &Path, pid: u32) -> Result<Vec<TaskSample>> {
    let dir = super::files::path_below(root, &format!("/proc/{pid}/task"));
    let entries = std::fs::read_dir(&dir).map_err(|source| Error::Read {
        path: dir.clone(),
        source,
    })?;
    let mut tids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::Read {
            path: dir.clone(),
            source,
        })?;
        if let Some(tid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) {
            tids.push(tid);
        }
    }
    tids.sort_unstable();
    let mut samples = Vec::with_capacity(tids.len());
    for tid in tids {
        match read(root, pid, tid) {
            Ok(sample) => samples.push(sample),
            // ESRCH is what reading the stat of a thread reaped a moment ago can give.
            Err(Error::Read { source, .. })
                if source.kind() == io::ErrorKind::NotFound
                    || source.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(samples)
}

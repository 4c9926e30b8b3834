//! One build of a `git:` kernel the way the agent builds it (as the build
//! user, no network, ccache, the farm's guest configuration), timed from
//! outside by `farm-bench` for docs/BENCHMARKS.md.
//!
//! ```text
//! cargo build --release -p farm-agent --example kernel_build
//! target/release/examples/kernel_build CACHE REPO REF [USER]
//! ```
//!
//! CACHE is the guest cache (`builds/` and `ccache/` go under it), REPO a
//! clone (`scripts/kernel-tree.sh`'s), REF a commit, tag or branch, USER
//! the build user (default `nobody`). Prints the commit, whether it was
//! built now, and the time the build took. Needs root.

// An example is a program: it prints its report.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use farm_agent::kernel::{BuildUser, Repo, Trees};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [cache, repo, rev, rest @ ..] = &args[..] else {
        eprintln!("usage: kernel_build CACHE REPO REF [USER]");
        return ExitCode::from(2);
    };
    let user = rest.first().map_or("nobody", String::as_str);
    let run = || -> Result<String, String> {
        let user = BuildUser::lookup(user).map_err(|e| e.to_string())?;
        let trees = Trees::new(
            vec![Repo {
                name: "linux".into(),
                path: PathBuf::from(repo),
            }],
            user,
        )
        .map_err(|e| e.to_string())?;
        let kernel = match format!("git:linux@{rev}").parse::<farm_spec::Kernel>() {
            Ok(farm_spec::Kernel::Git(g)) => g,
            Ok(k) => return Err(format!("{k} is not a git kernel")),
            Err(e) => return Err(e.to_string()),
        };
        let b = trees
            .build(
                &kernel,
                &farm_spec::KernelBuild::default(),
                &PathBuf::from(cache),
            )
            .map_err(|e| e.to_string())?;
        Ok(format!(
            "{} built={} took={:.1}s",
            b.commit,
            b.built,
            b.took.as_secs_f64()
        ))
    };
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kernel_build: {e}");
            ExitCode::from(1)
        }
    }
}

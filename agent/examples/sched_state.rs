//! The agent's scheduler-knob state, applied and restored as the agent
//! does it (`farm_agent::state::sched` and the journal), outside the
//! agent: for `agent/tests/guest.rs`, which runs it inside a guest whose
//! debugfs is writable (the farm's hosts refuse debugfs writes) and crashes
//! it at every step with `FARM_AGENT_CRASH_AT=N`, as the host's crash test
//! crashes the agent.
//!
//! ```text
//! sched_state apply JOURNAL [FEATURE | NAME=VALUE | numa_balancing=N | schedstats]...
//! sched_state restore JOURNAL
//! ```
//!
//! FEATURE is `NAME` or `NO_NAME`, NAME=VALUE a debugfs tunable;
//! `schedstats` then turns kernel.sched_schedstats on as the host executor
//! does for every run. Exit 0
//! when done, 1 with the error on stderr.

// An example is a program: it prints its report.
#![allow(clippy::print_stderr)]

use std::path::Path;
use std::process::ExitCode;

use farm_agent::state::{journal::Journal, sched};
use farm_spec::MachineState;
use farm_spec::state::StateStrings;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [verb, journal, words @ ..] = &args[..] else {
        eprintln!("usage: sched_state apply|restore JOURNAL [WORD]...");
        return ExitCode::from(2);
    };
    let root = Path::new("/");
    let run = || -> Result<(), String> {
        let mut j = Journal::open(Path::new(journal), root).map_err(|e| e.to_string())?;
        match verb.as_str() {
            "apply" => {
                let mut features = Vec::new();
                let mut tunables = Vec::new();
                let mut numa = None;
                let mut schedstats = false;
                for w in words {
                    match w.split_once('=') {
                        None if w == "schedstats" => schedstats = true,
                        Some(("numa_balancing", n)) => {
                            numa = Some(n.parse().map_err(|_| format!("`{w}`"))?)
                        }
                        Some(_) => tunables.push(w.clone()),
                        None => features.push(w.clone()),
                    }
                }
                let state = MachineState::from_strings(StateStrings {
                    name: "knobs",
                    sched_features: &features,
                    sched_tunables: &tunables,
                    numa_balancing: numa,
                    ..Default::default()
                })
                .map_err(|e| e.to_string())?;
                sched::apply(&mut j, root, &state).map_err(|e| e.to_string())?;
                if schedstats
                    && !sched::enable_schedstats(&mut j, root).map_err(|e| e.to_string())?
                {
                    return Err("the kernel has no kernel.sched_schedstats".into());
                }
                Ok(())
            }
            "restore" => j.restore().map(|_| ()).map_err(|e| e.to_string()),
            other => Err(format!("unknown verb `{other}`")),
        }
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sched_state: {e}");
            ExitCode::FAILURE
        }
    }
}

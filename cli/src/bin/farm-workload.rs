//! `farm-workload`: runs one catalogue workload and prints its metrics (see `farm_workload::cli`).

fn main() {
    std::process::exit(farm_workload::cli::main(std::env::args().skip(1).collect()))
}

#!/usr/bin/env bash
# Runs every test of the farm on this machine: formatting, lints, unit tests,
# and the end-to-end tests that start real coordinators and agents on
# 127.0.0.1. Installs the system packages the tests need first.
set -euo pipefail
cd "$(dirname "$0")/.."

# Command the tests use -> the Debian package that provides it.
missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }
need pgrep procps
# External workloads the agent runs and parses (tests run each for real).
need stress-ng stress-ng
need sysbench sysbench
need hackbench rt-tests
need iperf3 iperf3
# The report test renders the HTML report in headless Chromium.
need chromium chromium
# The guest tests boot Debian kernels under QEMU TCG with a busybox-static
# initramfs (the dynamically linked `busybox` package would not do).
# s390x guests: QEMU's s390x system emulator, and Debian's s390x packages
# (kernels, busybox-static, the external workloads and their libraries),
# which `apt-get download` fetches only once s390x is a foreign architecture.
# QEMU comes from where the machine's qemu-utils came from: some images carry
# bookworm-backports' qemu-utils (QEMU 10), which Breaks bookworm's
# qemu-system-common (7.2), so bookworm's qemu-system cannot go beside it;
# QEMU 10 there, with only its own packages taken from backports.
qemu_backports=0
if dpkg-query -W -f='${Status} ${Version}' qemu-utils 2>/dev/null |
    grep -q "ok installed .*bpo12"; then
    qemu_backports=1
fi
qemu=()
if ! command -v qemu-system-x86_64 >/dev/null 2>&1 ||
    ! command -v qemu-system-s390x >/dev/null 2>&1; then
    if ((qemu_backports)); then
        qemu=(qemu-system-x86/bookworm-backports qemu-system-s390x/bookworm-backports
            qemu-system-common/bookworm-backports qemu-system-data/bookworm-backports
            seabios/bookworm-backports)
    else
        qemu=(qemu-system-x86 qemu-system-misc)
    fi
fi
need cpio cpio
# The in-guest sampler is a static C program the agent builds for the
# guest's arch: the host's gcc and C library (static) for x86_64 guests,
# Debian's cross gcc and s390x C library for s390x guests.
need x86_64-linux-gnu-gcc gcc
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || missing+=(libc6-dev)
need s390x-linux-gnu-gcc gcc-s390x-linux-gnu
[ -f /usr/s390x-linux-gnu/lib/libc.a ] || missing+=(libc6-dev-s390x-cross)
# The ELF reader that finds a foreign binary's shared libraries.
need readelf binutils
# The metrics test checks the coordinator's /metrics with promtool, which
# also checks and unit-tests the alert rules (deploy/prometheus); amtool
# checks the Alertmanager route example.
need promtool prometheus
need amtool prometheus-alertmanager
# The deploy test verifies the systemd units (no running systemd needed).
need systemd-analyze systemd
# The attack and TLS tests play hostile agents with a client that is not
# ours: Python's grpcio, with stubs that Debian's protoc compiles from
# farm.proto.
need protoc protobuf-compiler
# The TLS test gives a key a POSIX ACL as systemd does a dynamic user's
# credential (LoadCredential=).
need setfacl acl
# The highly available farm's tests run a 3-member etcd cluster on loopback.
need etcd etcd-server
# Its archive of ended matrices is PostgreSQL, run by the tests as the
# postgres user the package makes (runuser is util-linux's).
[ -x "$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | head -n1)" ] || missing+=(postgresql)
need runuser util-linux
# Kernels from trees: refs resolve (and builds run) with git, as an
# unprivileged user (the tests use nobody).
need git git
# Kernels built from Debian's linux-source-6.1 (agent/tests/build.rs).
need make make
need xz xz-utils
need flex flex
need bison bison
need bc bc
need ccache ccache
[ -f /usr/include/libelf.h ] || missing+=(libelf-dev)
[ -f /usr/src/linux-source-6.1.tar.xz ] || missing+=(linux-source-6.1)
/usr/bin/python3 -c "import grpc" 2>/dev/null || missing+=(python3-grpcio)
/usr/bin/python3 -c "import google.protobuf" 2>/dev/null || missing+=(python3-protobuf)
update=0
if ! dpkg --print-foreign-architectures | grep -qx s390x; then
    echo "adding the foreign architecture s390x"
    dpkg --add-architecture s390x
    update=1
fi
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q "ok installed" ||
    missing+=(busybox-static)
if ((${#qemu[@]})) && ((qemu_backports)) &&
    ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "adding bookworm-backports (for QEMU beside the machine's qemu-utils)"
    # Backports come from the mirror this machine already takes bookworm
    # from, read off its own apt configuration.
    debian_uri=$(apt-get indextargets --format '$(RELEASE) $(SITE)' 2>/dev/null |
        awk '$1 == "bookworm" { print $2; exit }')
    if [[ -z $debian_uri ]]; then
        echo "no apt source of bookworm configured: cannot add bookworm-backports" >&2
        exit 1
    fi
    cat >/etc/apt/sources.list.d/farm-bookworm-backports.sources <<SOURCES
Types: deb
URIs: $debian_uri
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    update=1
fi
missing+=("${qemu[@]}")
if ((${#missing[@]})) || ((update)); then
    apt-get update -q
fi
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}"
    apt-get install -y -q "${missing[@]}"
fi

# Prometheus configuration and rules, and a unit test of every alert.
promtool check config deploy/prometheus/prometheus.yml
promtool test rules deploy/prometheus/tests/*.yml
amtool check-config deploy/alertmanager/alertmanager.yml

# Every feature the tests need, the same for each command, so that the
# workspace is built once: `ha` (etcd) needs protoc, installed above.
features=(--features farm-coordinator/ha)
cargo fmt --all --check
cargo clippy --workspace --all-targets "${features[@]}" -- -D warnings
# The default build (the README's first command) must stay free of them.
cargo check --workspace --quiet
# The end-to-end tests start farm-coordinator and farm-agent, binaries of
# other packages than theirs, which `cargo test` alone does not build.
cargo build --workspace --bins "${features[@]}"
cargo test --workspace "${features[@]}"

#!/usr/bin/env bash
# Mutation testing of the kubelet logic (docs/testing.md, "Mutation testing").
#
#   scripts/mutants.sh               the whole set, in this checkout, against the lib's unit tests
#   scripts/mutants.sh FILE...       only these files
#   scripts/mutants.sh --isolated    the same set in two scratch crates of their own (1 to 2 hours, not days):
#                                    topology/checkpoint/quantity/duration, and the release table, the
#                                    device manager, validate and contract
#   scripts/mutants.sh --isolated FILE...   only these files, isolated
#
# Needs cargo-mutants (`cargo install cargo-mutants --locked`). Reports land in
# $MUTANTS_OUT (default target/mutants); each run's mutants.out/missed.txt lists the survivors.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${MUTANTS_OUT:-target/mutants}

# The modules that hold the kubelet's logic as pure functions.
SET=(
    src/lib/topology/merge.rs src/lib/topology/hints.rs src/lib/topology/mask.rs src/lib/topology/cpu.rs
    src/lib/checkpoint/json.rs src/lib/checkpoint/spew.rs src/lib/checkpoint/write.rs
    src/lib/validate.rs src/lib/contract.rs src/lib/quantity.rs src/lib/duration.rs
    src/lib/kubelet_version/mod.rs src/lib/kubelet_sim/manager/{admission,checkpoint,dra,mod,podres,reboot,registration,restart,state,stream,topology}.rs
)
# --isolated covers all of SET: validate.rs and contract.rs build in the
# manager's scratch crate (they need the protobuf code), the rest in the small one.
ISOLATED=("${SET[@]}")

file_args() {
    for f in "$@"; do printf -- '-f\n%s\n' "$f"; done
}

# A crate of the topology and checkpoint modules, quantity and duration, with
# their unit tests, a stand-in for dpctl's error type (the two constructors
# they call) and checkpoint's report module left out. A mutant rebuilds a few
# thousand lines instead of all of dpctl: about 5 s instead of 1-2 min on 2
# cores. It has its own target/ (a handful of small dependencies).
build_pure_crate() {
    local h=$1
    rm -rf "$h/src" "$h/tests"
    mkdir -p "$h/src/lib" "$h/tests/data"
    cp Cargo.lock "$h/"
    cp -r src/lib/topology src/lib/checkpoint "$h/src/lib/"
    cp src/lib/quantity.rs src/lib/duration.rs src/lib/kubelet_texts.rs "$h/src/lib/"
    cp -r tests/data/checkpoints "$h/tests/data/"
    sed -i 's/^pub mod report;$/#[allow(unused)] mod report_left_out {}/' "$h/src/lib/checkpoint/mod.rs"
    # kubelet_texts' test that reads kubelet_sim's sources finds none here.
    mkdir -p "$h/src/lib/kubelet_sim"
    cat >"$h/Cargo.toml" <<'TOML'
[package]
name = "dpctl-mutants-isolated"
version = "0.0.0"
edition = "2024"
publish = false

[lib]
path = "src/lib/lib.rs"

[dependencies]
serde = { version = "1", features = ["derive"] }
serde_json = "1"
base64 = "0.22"
tempfile = "3"
libc = "0.2"
humantime = "2"
tokio = { version = "1.47", features = ["time"] }

# No debug info: each mutant links faster.
[profile.dev]
debug = 0
TOML
    printf '%s\n' '#![allow(unused)]' 'pub mod checkpoint;' 'pub mod duration;' 'pub mod error;' \
        'pub mod kubelet_texts;' 'pub mod quantity;' 'pub mod topology;' >"$h/src/lib/lib.rs"
    cat >"$h/src/lib/error.rs" <<'RS'
//! Stand-in for dpctl's error type: the constructors and text the isolated modules use.
#[derive(Debug)]
pub enum Error {
    Invalid { place: String, message: String },
    Io { what: String, source: std::io::Error },
}
impl Error {
    pub fn invalid(place: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Invalid { place: place.into(), message: message.into() }
    }
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { what: what.into(), source }
    }
}
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Invalid { place, message } => write!(f, "{place}: {message}"),
            Error::Io { what, source } => write!(f, "{what}: {source}"),
        }
    }
}
impl std::error::Error for Error {}
pub type Result<T, E = Error> = std::result::Result<T, E>;
RS
}

# A crate of the release table (kubelet_version/) and the synchronous device
# manager (kubelet_sim/manager/), with the real modules they import (error,
# proto, model, contract, validate, input, paths, text, limits, kubelet_texts,
# quantity, duration, topology, checkpoint without its report; kubelet_sim's
# pod, events and outcome) and a stand-in for the rest of kubelet_sim (the
# async shell: only the restart report's type is named). Its Cargo.toml has
# dpctl's own dependencies and features, and it builds into this checkout's
# target/, so no dependency is built again; a mutant rebuilds about 20,000
# lines (the protobuf code included) instead of all of dpctl.
build_manager_crate() {
    local h=$1 m
    rm -rf "$h/src" "$h/proto" "$h/tests"
    mkdir -p "$h/src/lib/kubelet_sim" "$h/tests/data"
    cp Cargo.lock build.rs "$h/"
    cp -r proto "$h/"
    cp -r tests/data/checkpoints "$h/tests/data/"
    cp -r src/lib/topology src/lib/checkpoint src/lib/kubelet_version "$h/src/lib/"
    for m in error text limits proto paths input kubelet_texts quantity duration model contract validate; do
        cp "src/lib/$m.rs" "$h/src/lib/"
    done
    cp -r src/lib/kubelet_sim/manager "$h/src/lib/kubelet_sim/"
    cp src/lib/kubelet_sim/{pod,events,outcome,dra_claims}.rs "$h/src/lib/kubelet_sim/"
    # The DRA manager's pure inputs: the service choice (dra/mod.rs), claim
    # references and the dra_manager_state format; not the clients or the mock.
    mkdir -p "$h/src/lib/dra"
    cp src/lib/dra/{mod,claims,state}.rs "$h/src/lib/dra/"
    sed -i -E 's/^pub mod (cdi|check|client|mock);$/#[allow(unused)] mod \1_left_out {}/' "$h/src/lib/dra/mod.rs"
    sed -i 's/^pub mod report;$/#[allow(unused)] mod report_left_out {}/' "$h/src/lib/checkpoint/mod.rs"
    # dpctl's [package] renamed, its dependencies and build script kept; no
    # binary, integration tests or benches.
    awk '/^\[\[/ || /^\[lib\]$/ {skip=1; next} /^\[/ {skip=0} !skip' Cargo.toml |
        sed -e 's/^name = "dpctl"$/name = "dpctl-mutants-manager"/' -e '/^autotests\|^autobenches\|^autoexamples/d' \
            >"$h/Cargo.toml"
    cat >>"$h/Cargo.toml" <<'TOML'

[lib]
path = "src/lib/lib.rs"

# Only this crate without debug info: each mutant links faster, and the
# dependencies stay the ones dpctl's own build made.
[profile.dev.package.dpctl-mutants-manager]
debug = 0
TOML
    printf '%s\n' '#![allow(unused)]' 'pub use error::{Error, Result};' >"$h/src/lib/lib.rs"
    for m in checkpoint contract dra duration error input kubelet_sim kubelet_texts kubelet_version limits model \
        paths proto quantity text topology validate; do
        echo "pub mod $m;" >>"$h/src/lib/lib.rs"
    done
    cat >"$h/src/lib/kubelet_sim/mod.rs" <<'RS'
//! Stand-in for the simulator's async shell: the leaf modules the manager
//! uses, and the names they take from the shell.
pub mod dra_claims;
pub mod events;
pub mod manager;
pub mod outcome;
pub mod pod;
pub use crate::kubelet_version::{CleanupRule, KubeletVersion};
/// The restart report (only carried by an event here).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RestartReport {}
RS
}

if [[ ${1:-} == --isolated ]]; then
    # Tests elsewhere in dpctl do not run in the scratch crates, so a survivor
    # there may still be caught by the full run; a catch there is real.
    shift
    files=("${@:-${ISOLATED[@]}}")
    pure=() manager=()
    for f in "${files[@]}"; do
        case $f in
            src/lib/kubelet_version/* | src/lib/kubelet_sim/manager/* | src/lib/validate.rs | src/lib/contract.rs)
                manager+=("$f")
                ;;
            *) pure+=("$f") ;;
        esac
    done
    root=$(pwd)
    status=0
    if ((${#pure[@]})); then
        build_pure_crate target/mutants-isolated
        out_abs=$(realpath -m "$out/isolated")
        mkdir -p "$out_abs"
        mapfile -t args < <(file_args "${pure[@]}")
        (cd target/mutants-isolated && nice -n 19 cargo mutants --in-place -C --offline -C --lib "${args[@]}" -o "$out_abs") ||
            status=$?
    fi
    if ((${#manager[@]})); then
        build_manager_crate target/mutants-manager
        out_abs=$(realpath -m "$out/manager")
        mkdir -p "$out_abs"
        mapfile -t args < <(file_args "${manager[@]}")
        (cd target/mutants-manager && CARGO_TARGET_DIR=$root/target nice -n 19 cargo mutants --in-place -C --offline \
            -C --lib "${args[@]}" -o "$out_abs") || status=$?
    fi
    exit "$status"
fi

# In place: mutants are written into this checkout's files one at a time (and
# put back, also on Ctrl-C), so uncommitted work would be mixed in. Refuse.
if [[ -n $(git status --porcelain --untracked-files=no) ]]; then
    echo "scripts/mutants.sh: the checkout has uncommitted changes; commit or stash them first" >&2
    exit 2
fi
files=("${@:-${SET[@]}}")
mkdir -p "$out"
mapfile -t args < <(file_args "${files[@]}")
# -C --lib: build and run only the lib's unit tests (the integration binary
# would double every build). --in-place keeps target/ and its incremental state.
exec nice -n 19 cargo mutants --in-place -C --lib "${args[@]}" -o "$out"

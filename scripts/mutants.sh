#!/usr/bin/env bash
# Mutation testing of the kubelet logic (docs/testing.md, "Mutation testing").
#
#   scripts/mutants.sh               the whole set, in this checkout, against the lib's unit tests
#   scripts/mutants.sh FILE...       only these files
#   scripts/mutants.sh --isolated    the pure modules in a scratch crate of their own (minutes, not hours)
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
    src/lib/kubelet_version/mod.rs src/lib/kubelet_sim/manager/{admission,checkpoint,mod,podres,registration,state,stream,topology}.rs
)
# The part of SET that builds without the rest of dpctl (see --isolated).
ISOLATED=(
    src/lib/topology/merge.rs src/lib/topology/hints.rs src/lib/topology/mask.rs src/lib/topology/cpu.rs
    src/lib/checkpoint/json.rs src/lib/checkpoint/spew.rs src/lib/checkpoint/write.rs
    src/lib/quantity.rs src/lib/duration.rs
)

file_args() {
    for f in "$@"; do printf -- '-f\n%s\n' "$f"; done
}

if [[ ${1:-} == --isolated ]]; then
    # A crate of the topology and checkpoint modules, quantity and duration,
    # with their unit tests, a stand-in for dpctl's error type (the two
    # constructors they call) and checkpoint's report module left out. A
    # mutant rebuilds a few thousand lines instead of all of dpctl: about 5 s
    # instead of 1-2 min on 2 cores. Tests elsewhere in dpctl do not run, so a
    # survivor here may still be caught by the full run; a catch here is real.
    h=target/mutants-isolated
    rm -rf "$h/src" "$h/tests"
    mkdir -p "$h/src/lib" "$h/tests/data"
    cp Cargo.lock "$h/"
    cp -r src/lib/topology src/lib/checkpoint "$h/src/lib/"
    cp src/lib/quantity.rs src/lib/duration.rs "$h/src/lib/"
    cp -r tests/data/checkpoints "$h/tests/data/"
    sed -i 's/^pub mod report;$/#[allow(unused)] mod report_left_out {}/' "$h/src/lib/checkpoint/mod.rs"
    cat >"$h/Cargo.toml" <<'EOF'
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
EOF
    printf 'pub mod checkpoint;\npub mod duration;\npub mod error;\npub mod quantity;\npub mod topology;\n' \
        >"$h/src/lib/lib.rs"
    cat >"$h/src/lib/error.rs" <<'EOF'
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
EOF
    shift
    files=("${@:-${ISOLATED[@]}}")
    out_abs=$(realpath -m "$out/isolated")
    mkdir -p "$out_abs"
    cd "$h"
    mapfile -t args < <(file_args "${files[@]}")
    exec nice -n 19 cargo mutants --in-place -C --offline "${args[@]}" -o "$out_abs"
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

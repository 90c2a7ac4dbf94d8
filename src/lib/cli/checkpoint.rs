//! `dpctl checkpoint show|verify`: read the kubelet's device-manager
//! checkpoint (never write it), show what it records, and verify its
//! checksum as the kubelet computes it.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::args::DirArg;
use crate::checkpoint::report::CheckpointReport;
use crate::error::Result;
use crate::output::{Streams, checkpoint as render};
use crate::paths::{CHECKPOINT_FILE_NAME, ENV_ROOT};

const HELP: &str = "\
Examples:
  dpctl checkpoint show                                   # the node's kubelet_internal_checkpoint
  dpctl checkpoint show -o json ./kubelet_internal_checkpoint
  dpctl checkpoint verify --dir /var/lib/kubelet/device-plugins

The checksum is the kubelet's: FNV-32a over go-spew's %#v text of the Go value
(the same in every version). verify exits 1 when the stored and computed
checksums differ or the kubelet cannot parse the file: the next kubelet start
then restores no allocations. The pre-1.20 layout (DeviceIDs a list) is named:
kubelets up to 1.30 read it, 1.31+ do not. Both commands only read the file.

A file over 64 MiB, a directory, a FIFO or a symbolic-link loop is refused with exit 2. In the
table, device IDs longer than 80 characters and lists longer than 2,000 are cut, saying how much
was left out; -o json shows everything.";

/// Read the kubelet's device-manager checkpoint (read-only).
#[derive(Debug, Subcommand)]
#[command(after_long_help = HELP)]
pub enum CheckpointCommand {
    /// Pods, containers, resources, devices per NUMA node, each stored Allocate answer decoded,
    /// and the registered devices.
    #[command(after_long_help = HELP)]
    Show(FileArgs),
    /// Stored against computed checksum, and what it means for the next kubelet start; exit 1
    /// when the kubelet would call the file corrupt.
    #[command(after_long_help = HELP)]
    Verify(FileArgs),
}

/// Which checkpoint file.
#[derive(Debug, Args)]
pub struct FileArgs {
    /// The checkpoint file [default: <DIR>/kubelet_internal_checkpoint].
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// `--dir`.
    #[command(flatten)]
    pub dir: DirArg,
    /// Prefix of the host path --dir (the host's / as mounted in a pod, e.g. /host).
    #[arg(long, value_name = "PATH", env = ENV_ROOT, default_value = "/")]
    pub root: PathBuf,
}

impl FileArgs {
    fn path(&self) -> PathBuf {
        self.file
            .clone()
            .unwrap_or_else(|| crate::paths::under_root(&self.root, &self.dir.dir).join(CHECKPOINT_FILE_NAME))
    }
}

/// Runs `dpctl checkpoint …`.
pub fn run(cmd: CheckpointCommand, s: &mut Streams<'_>) -> Result<u8> {
    match cmd {
        CheckpointCommand::Show(args) => render::shown(s, &CheckpointReport::read(&args.path())?),
        CheckpointCommand::Verify(args) => render::verified(s, &CheckpointReport::read(&args.path())?),
    }
}

//! `dpctl checkpoint show|verify`: read the kubelet's device-manager
//! checkpoint or its DRA manager's `dra_manager_state` (never write them),
//! show what they record, and verify the checksum as the kubelet computes it.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::args::DirArg;
use crate::checkpoint::report::CheckpointReport;
use crate::dra;
use crate::error::{Result, exit};
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

The DRA manager's checkpoint, <kubelet root>/dra_manager_state, is read with --dra (or when
the file is named so, or its Data is JSON text): CRC-32 (IEEE) over the Data text, the same in
1.34-1.37. A mismatch stops the kubelet at its next start (its DRA manager cannot be created).
  dpctl checkpoint verify --dra                           # /var/lib/kubelet/dra_manager_state
  dpctl checkpoint show ./dra_manager_state -o json

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
    /// The DRA manager's checkpoint [default file: dra_manager_state in the parent of --dir].
    #[arg(long)]
    pub dra: bool,
}

impl FileArgs {
    fn path(&self) -> PathBuf {
        let dir = crate::paths::under_root(&self.root, &self.dir.dir);
        self.file.clone().unwrap_or_else(|| match self.dra {
            // The kubelet root: the device-plugin directory's parent.
            true => dir.parent().map_or_else(|| dir.clone(), std::path::Path::to_path_buf).join(dra::state::FILE_NAME),
            false => dir.join(CHECKPOINT_FILE_NAME),
        })
    }

    /// True for the DRA manager's checkpoint: --dra, its file name, or a
    /// `Data` that is JSON text (the device manager's is an object).
    fn is_dra(&self, path: &std::path::Path) -> bool {
        if self.dra || path.file_name().is_some_and(|n| n == dra::state::FILE_NAME) {
            return true;
        }
        let mut head = [0u8; 64];
        let n = std::fs::File::open(path).and_then(|mut f| std::io::Read::read(&mut f, &mut head)).unwrap_or(0);
        let compact: Vec<u8> = head[..n].iter().copied().filter(|b| !b.is_ascii_whitespace()).collect();
        compact.starts_with(br#"{"Data":""#)
    }
}

/// Runs `dpctl checkpoint …`.
pub fn run(cmd: CheckpointCommand, s: &mut Streams<'_>) -> Result<u8> {
    match &cmd {
        CheckpointCommand::Show(a) | CheckpointCommand::Verify(a) if a.is_dra(&a.path()) => {
            // As the device checkpoint: a file that cannot be read is bad
            // input (2) for both; one that does not parse is bad input for
            // `show` (2) and a failed verification for `verify` (1).
            let text = dra::state::read_text(&a.path())?;
            let parsed = dra::state::parse(&a.path(), &text);
            return match (cmd, parsed) {
                (CheckpointCommand::Show(_), report) => {
                    crate::output::dra::state_shown(s, &report?)?;
                    Ok(exit::OK)
                }
                (CheckpointCommand::Verify(_), Ok(report)) => {
                    crate::output::dra::state_verified(s, &report)?;
                    Ok(if report.problems.is_empty() { exit::OK } else { exit::CHECK_FAILED })
                }
                (CheckpointCommand::Verify(a), Err(e)) => {
                    crate::output::dra::state_unparsable(s, &a.path(), &e)?;
                    Ok(exit::CHECK_FAILED)
                }
            };
        }
        _ => {}
    }
    match cmd {
        CheckpointCommand::Show(args) => {
            let report = CheckpointReport::read(&args.path())?;
            render::shown(s, &report)?;
            // Exit 2 when the file does not parse.
            Ok(if report.error.is_some() { exit::USAGE } else { exit::OK })
        }
        CheckpointCommand::Verify(args) => {
            let report = CheckpointReport::read(&args.path())?;
            render::verified(s, &report)?;
            // Exit 1 unless the kubelet accepts the file.
            Ok(if report.verifies { exit::OK } else { exit::CHECK_FAILED })
        }
    }
}

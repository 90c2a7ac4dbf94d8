//! `dpctl demo`: a kubelet-sim and a mock plugin in one process, walked
//! through the protocol with narration on stdout (one JSON line per step with
//! `-o json`) and a progress display on stderr when it is a terminal.

use std::time::Duration;

use clap::Args;

use crate::demo::DemoConfig;
use crate::duration::parse as parse_duration;
use crate::error::Result;
use crate::output::{Streams, demo as render};

/// Pause after each step when stdout is a terminal and `--pace` is not given.
const TTY_PACE: Duration = Duration::from_millis(300);

/// `dpctl demo` arguments (the one-line help is on `Command::Demo`).
#[derive(Debug, Args)]
#[command(after_long_help = AFTER_HELP)]
pub struct DemoArgs {
    /// Pause after each step [default: 300ms when stdout is a terminal, else 0].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub pace: Option<Duration>,
    /// How long any one wait may take (registration, the health change, the restart).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub deadline: Duration,
}

const AFTER_HELP: &str = "\
Steps: the kubelet starts; the plugin registers; ListAndWatch; a device turns unhealthy;
a pod asks for 2 GPUs (GetPreferredAllocation, Allocate, PreStartContainer); PodResources;
the kubelet restarts; cleanup. Everything runs in a temporary directory under /tmp, removed
at the end (also on Ctrl-C). The narration goes to stdout, a progress bar to stderr.

Examples:
  dpctl demo
  dpctl demo -o json | jq -c '{step, name, ok}'

Exit codes: 0 every step showed what it should; 1 a step did not (the error says which and why).";

/// Runs `dpctl demo`.
pub async fn run(args: DemoArgs, s: &mut Streams<'_>) -> Result<u8> {
    let pace = args.pace.unwrap_or(if s.out_is_tty { TTY_PACE } else { Duration::ZERO });
    render::run(DemoConfig { pace, deadline: args.deadline }, s).await
}

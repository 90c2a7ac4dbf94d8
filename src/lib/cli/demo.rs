//! `dpctl demo`: a kubelet-sim and a mock plugin in one process, walked
//! through the protocol with narration on stdout (one JSON line per step with
//! `-o json`) and a progress display on stderr when it is a terminal.

use std::time::Duration;

use clap::Args;

use std::io::{self, Write};

use crate::demo::{self, DemoConfig, DemoEvent, STEPS};
use crate::duration::parse as parse_duration;
use crate::error::{Result, exit};
use crate::output::{Streams, demo as render, out_err};

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
    run_demo(DemoConfig { pace, deadline: args.deadline }, s).await
}

/// Runs the demo: narration on stdout as each step finishes, a progress bar
/// on stderr when allowed, the outro, and exit 1 naming the first failed step.
async fn run_demo(config: DemoConfig, s: &mut Streams<'_>) -> Result<u8> {
    let format = s.format;
    let bar =
        crate::output::progress_bar(s.progress, Some(u64::from(STEPS)), "{spinner} [{pos}/{len}] {wide_bar} {msg}");
    let out = &mut *s.out;
    let mut write_err: Option<io::Error> = None;
    let mut show = |f: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>| {
        let r = match &bar {
            Some(b) => b.suspend(|| f(&mut *out)),
            None => f(&mut *out),
        };
        if let Err(e) = r {
            write_err.get_or_insert(e);
        }
    };
    let steps = demo::run_demo(config, crate::signal::shutdown(), &mut |e| match e {
        DemoEvent::Begin { dir } => show(&mut |w| render::intro(w, format, &dir)),
        DemoEvent::Starting { step, title } => {
            if let Some(b) = &bar {
                b.set_position(u64::from(step - 1));
                b.set_message(title);
            }
        }
        DemoEvent::Done(step) => {
            show(&mut |w| render::step(w, format, &step));
            if let Some(b) = &bar {
                b.set_position(u64::from(step.step));
            }
        }
    })
    .await;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let steps = steps?;
    if let Some(e) = write_err {
        return Err(out_err(e));
    }
    render::outro(&mut *s.out, format, &steps).map_err(out_err)?;
    match steps.iter().find(|st| !st.ok) {
        None => Ok(exit::OK),
        Some(st) => {
            render::step_failed(s.err, st).map_err(out_err)?;
            Ok(exit::CHECK_FAILED)
        }
    }
}

//! dpctl on a terminal of a given width, as a person sees it: util-linux
//! `script` gives dpctl a pseudo-terminal (stdout and stderr both), `stty`
//! sets its size, and what the terminal got comes back with `\r\n` as `\n`.

use std::process::Command;
use std::time::Duration;

use super::{Run, dpctl_bin, run_bounded};

/// Runs dpctl with `args` on a pseudo-terminal `cols` columns wide (colours
/// off through NO_COLOR, no COLUMNS). `Run.stdout` holds what the terminal
/// showed, stdout and stderr interleaved as they came.
pub async fn on_terminal(args: &[&str], cols: u16) -> Run {
    let quote = |a: &str| format!("'{}'", a.replace('\'', "'\\''"));
    let mut line = format!("stty cols {cols} rows 60; exec {}", quote(dpctl_bin()));
    for a in args {
        line.push(' ');
        line.push_str(&quote(a));
    }
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"]).env("NO_COLOR", "1").env_remove("COLUMNS");
    for k in super::DPCTL_ENV {
        cmd.env_remove(k);
    }
    let mut run = run_bounded(cmd, args, Duration::from_secs(60)).await;
    run.stdout = run.stdout.replace("\r\n", "\n");
    run
}

/// The lines of `text` wider than `cols` characters.
pub fn too_wide(text: &str, cols: usize) -> Vec<&str> {
    text.lines().filter(|l| l.chars().count() > cols).collect()
}

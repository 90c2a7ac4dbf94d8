//! `dpctl completions <shell>`: shell completion scripts, generated from the
//! clap definition. The committed copies in `completions/` are checked
//! against this by a test.

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::{Cli, out_err};
use crate::error::{Result, exit};
use crate::output::Streams;

/// `dpctl completions <shell>`
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to generate for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// The completion script for `shell`.
pub fn render(shell: Shell) -> Vec<u8> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "dpctl", &mut out);
    out
}

/// The file name the committed script has in `completions/`.
pub fn file_name(shell: Shell) -> String {
    match shell {
        Shell::Zsh => "_dpctl".into(),
        Shell::PowerShell => "_dpctl.ps1".into(),
        other => format!("dpctl.{other}"),
    }
}

/// Runs `dpctl completions`.
pub fn run(args: &CompletionsArgs, s: &mut Streams<'_>) -> Result<u8> {
    s.out.write_all(&render(args.shell)).map_err(out_err)?;
    Ok(exit::OK)
}

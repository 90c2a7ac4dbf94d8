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
    sockets_only(shell, &String::from_utf8_lossy(&out)).into_bytes()
}

/// The flags that name a unix socket to dial or serve.
const SOCKET_FLAGS: [&str; 2] = ["socket", "podresources-socket"];

/// bash: sockets and directories (to walk into) among the files `$1` starts.
const BASH_SOCKETS: &str = r#"__dpctl_sockets() {
    local f
    compgen -f -- "$1" | while IFS= read -r f; do
        if [[ -S $f || -d $f ]]; then printf '%s\n' "$f"; fi
    done
}

"#;

/// fish: the same.
const FISH_SOCKETS: &str = r#"function __dpctl_sockets
    for f in (__fish_complete_path (commandline -ct))
        if test -S $f; or test -d $f
            echo $f
        end
    end
end

"#;

/// clap offers every file for a path flag: `--socket` and
/// `--podresources-socket` offer sockets (and directories to walk into).
fn sockets_only(shell: Shell, script: &str) -> String {
    match shell {
        Shell::Bash => {
            let mut out = String::from(BASH_SOCKETS);
            let mut socket_case = false;
            for line in script.lines() {
                let t = line.trim();
                if socket_case && t == r#"COMPREPLY=($(compgen -f "${cur}"))"# {
                    let indent = &line[..line.len() - line.trim_start().len()];
                    out.push_str(&format!(
                        r#"{indent}compopt -o filenames 2>/dev/null; COMPREPLY=($(__dpctl_sockets "${{cur}}"))"#
                    ));
                } else {
                    out.push_str(line);
                }
                out.push('\n');
                socket_case = SOCKET_FLAGS.iter().any(|f| t == format!("--{f})"));
            }
            out
        }
        Shell::Zsh => {
            script
                .lines()
                .map(|l| {
                    if SOCKET_FLAGS.iter().any(|f| l.contains(&format!("--{f}=["))) {
                        l.replace(":_files'", r#":_files -g "*(-=)"'"#)
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
                + "\n"
        }
        Shell::Fish => {
            let body: Vec<String> = script
                .lines()
                .map(|l| {
                    if SOCKET_FLAGS.iter().any(|f| l.contains(&format!(" -l {f} "))) && l.ends_with(" -r -F") {
                        format!("{} -r -f -a '(__dpctl_sockets)'", l.trim_end_matches(" -r -F"))
                    } else {
                        l.to_string()
                    }
                })
                .collect();
            format!("{FISH_SOCKETS}{}\n", body.join("\n"))
        }
        _ => script.to_string(),
    }
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

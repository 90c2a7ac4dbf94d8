//! Examples cannot rot: every command line shown in `--help` (each
//! "Examples:" section and each "Example: dpctl ..." line, as rendered at
//! 100 columns, the width a pipe or a non-terminal gets) and in README.md's
//! sh/console blocks is split as a shell would and parsed by dpctl's own
//! command-line definition.

use clap::{CommandFactory, Parser};
use dpctl::cli::Cli;

/// Width help is rendered at when stdout is not a terminal.
const HELP_WIDTH: usize = 100;

/// `line` without a trailing remark: a `# comment` (shlex skips those only
/// at a word's start, which is all dpctl's examples use) or a parenthesised
/// note after two spaces, e.g. `(from another terminal)`.
fn without_remark(line: &str) -> &str {
    let line = line.trim_end();
    match line.rfind("  (") {
        Some(at) if line.ends_with(')') => line[..at].trim_end(),
        _ => line,
    }
}

/// The dpctl invocations in one shell command line: `dpctl ...`, `sudo
/// dpctl ...`, or a stage of a pipeline (`kubectl logs ... | dpctl doctor
/// merge`, `dpctl demo -o json | jq ...`). Lines that do not start a dpctl
/// process (`kubectl debug ... -- dpctl ...`) give none.
fn invocations(command: &str) -> Result<Vec<Vec<String>>, String> {
    let words = shlex::split(without_remark(command)).ok_or_else(|| format!("unbalanced quotes in {command:?}"))?;
    Ok(words
        .split(|w| w == "|")
        .filter_map(|stage| {
            let stage = if stage.first().is_some_and(|w| w == "sudo") { &stage[1..] } else { stage };
            stage.first().is_some_and(|w| w == "dpctl").then(|| stage.to_vec())
        })
        .collect())
}

/// Lines ending in `\` joined with the next, as a shell reads them.
fn joined(lines: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut open = false;
    for line in lines {
        match (open, out.last_mut()) {
            (true, Some(last)) => {
                last.push(' ');
                last.push_str(line.trim());
            }
            _ => out.push(line.to_string()),
        }
        open = out.last().is_some_and(|l| l.ends_with('\\'));
        if open && let Some(last) = out.last_mut() {
            last.pop();
        }
    }
    out
}

/// Every command line in a rendered help page: the lines of each "Examples:"
/// section (up to the next blank line) and each `Example: dpctl ...` line.
/// A line in an Examples section that is not a dpctl command (a long one
/// wrapped onto the next line, say) is an error: a user copying it would
/// run something else.
fn help_examples(page: &str, name: &str) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    let lines: Vec<&str> = page.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if let Some(at) = lines[i].find("Example: dpctl ") {
            found.push(lines[i][at + "Example: ".len()..].to_string());
        }
        if lines[i].trim_end() == "Examples:" {
            let end = lines[i + 1..].iter().position(|l| l.trim().is_empty()).map_or(lines.len(), |n| i + 1 + n);
            for command in joined(&lines[i + 1..end]) {
                if !command.contains("dpctl ") && command.trim() != "dpctl" {
                    return Err(format!("{name}: {command:?} in Examples is not a dpctl command (wrapped?)"));
                }
                found.push(command.trim().to_string());
            }
            i = end;
        }
        i += 1;
    }
    Ok(found)
}

/// Every long help page, as (command path, rendered text).
fn help_pages() -> Vec<(String, String)> {
    fn walk(cmd: &mut clap::Command, path: String, out: &mut Vec<(String, String)>) {
        out.push((path.clone(), cmd.render_long_help().to_string()));
        for sub in cmd.get_subcommands_mut() {
            let name = format!("{path} {}", sub.get_name());
            walk(sub, name, out);
        }
    }
    let mut cmd = Cli::command().term_width(HELP_WIDTH);
    cmd.build();
    let mut out = Vec::new();
    walk(&mut cmd, "dpctl".into(), &mut out);
    out
}

/// Parses each dpctl invocation in `commands`; returns the failures.
fn parse_all(source: &str, commands: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    for command in commands {
        match invocations(command) {
            Err(e) => problems.push(format!("{source}: {e}")),
            Ok(runs) => {
                for argv in runs {
                    // `--bind SRC:DST` checks that SRC exists as it parses: an
                    // example naming a directory of the user's is not wrong.
                    let users_file = |e: &clap::Error| {
                        let text = e.to_string();
                        text.contains("'--bind <SRC:DST>'") && text.contains("No such file or directory")
                    };
                    if let Err(e) =
                        Cli::try_parse_from(&argv).map(drop).or_else(|e| if users_file(&e) { Ok(()) } else { Err(e) })
                    {
                        problems.push(format!("{source}: {command:?} does not parse:\n{e}"));
                    }
                }
            }
        }
    }
    problems
}

#[test]
fn every_example_in_help_parses() {
    let mut problems = Vec::new();
    let mut count = 0;
    for (path, page) in help_pages() {
        match help_examples(&page, &path) {
            Ok(commands) => {
                count += commands.len();
                problems.extend(parse_all(&path, &commands));
            }
            Err(e) => problems.push(e),
        }
    }
    assert!(problems.is_empty(), "examples in --help that dpctl rejects:\n  {}", problems.join("\n  "));
    // kubelet-sim, mock-plugin, smoke, bench, checkpoint, doctor, demo and
    // plugin check all show examples: a walk that finds few is broken.
    assert!(count >= 40, "only {count} examples found in --help");
}

/// README.md's commands: in ```console blocks the lines after `$ `, in
/// ```sh blocks every line; both with `\` continuations joined.
fn readme_commands(readme: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut block: Option<(bool, Vec<&str>)> = None;
    for line in readme.lines() {
        match (&mut block, line.trim_start().strip_prefix("```")) {
            (None, Some(lang)) if lang == "sh" || lang == "console" => block = Some((lang == "console", Vec::new())),
            (Some((console, lines)), Some(_)) => {
                let is_console = *console;
                let mut prompt = false;
                let mut kept = Vec::new();
                for l in lines.iter() {
                    if is_console {
                        // Output lines follow a command; a continuation belongs to it.
                        if let Some(cmd) = l.strip_prefix("$ ") {
                            kept.push(cmd);
                            prompt = cmd.ends_with('\\');
                        } else if prompt {
                            kept.push(l);
                            prompt = l.ends_with('\\');
                        }
                    } else {
                        kept.push(l);
                    }
                }
                commands.extend(joined(&kept));
                block = None;
            }
            (Some((_, lines)), None) => lines.push(line),
            _ => {}
        }
    }
    commands
}

#[test]
fn every_dpctl_command_in_the_readme_parses() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md");
    let commands = readme_commands(&readme);
    let dpctl: Vec<String> =
        commands.into_iter().filter(|c| invocations(c).is_ok_and(|runs| !runs.is_empty())).collect();
    let problems = parse_all("README.md", &dpctl);
    assert!(problems.is_empty(), "README commands dpctl rejects:\n  {}", problems.join("\n  "));
    assert!(dpctl.len() >= 40, "only {} dpctl commands found in README.md", dpctl.len());
}

#[test]
fn the_example_reader_joins_strips_and_splits_pipelines() {
    let page = "Examples:\n  dpctl demo -o json | jq -c '{step}'   # a remark\n  dpctl kubelet-sim --dir /tmp/dp \\\n      --numa-nodes 2\n  dpctl mock-plugin status x  (from another terminal)\n\nProse.\n";
    let commands = help_examples(page, "t").unwrap();
    assert_eq!(commands.len(), 3);
    assert_eq!(invocations(&commands[0]).unwrap(), [["dpctl", "demo", "-o", "json"]]);
    assert_eq!(invocations(&commands[1]).unwrap(), [["dpctl", "kubelet-sim", "--dir", "/tmp/dp", "--numa-nodes", "2"]]);
    assert_eq!(invocations(&commands[2]).unwrap(), [["dpctl", "mock-plugin", "status", "x"]]);
    assert!(help_examples("Examples:\n  dpctl bench list --fail-if\n  'errors>0'\n", "t").is_err());
    assert_eq!(invocations("sudo dpctl doctor").unwrap(), [["dpctl", "doctor"]]);
    assert!(invocations("kubectl debug node/x -- dpctl doctor").unwrap().is_empty());
    assert!(Cli::try_parse_from(["dpctl", "demo", "--no-such-flag"]).is_err());
}

/// The options every command shares (-o, --color, -v, -q, --no-trunc,
/// --no-headers) come under their own heading, after the command's own.
#[test]
fn global_options_have_their_own_heading_after_the_commands_options() {
    for path in [&["plugin", "call", "allocate"][..], &["smoke"], &["kubelet-sim"], &["dra", "check"]] {
        let mut cmd = Cli::command().term_width(HELP_WIDTH);
        cmd.build();
        let mut sub = &mut cmd;
        for name in path {
            sub = sub.find_subcommand_mut(name).unwrap_or_else(|| panic!("no subcommand {name}"));
        }
        let help = sub.render_long_help().to_string();
        let own = help.find("\nOptions:").unwrap_or_else(|| panic!("{path:?}: no Options heading:\n{help}"));
        let global = help.find("\nGlobal options:").unwrap_or_else(|| panic!("{path:?}: no Global options:\n{help}"));
        assert!(own < global, "{path:?}: the command's own options come first:\n{help}");
        let after = &help[global..];
        for flag in ["--output", "--color", "--verbose", "--quiet", "--no-trunc", "--no-headers"] {
            assert!(after.contains(flag), "{path:?}: {flag} is not under Global options:\n{help}");
            assert!(
                !help[own..global].contains(&format!("      {flag}")),
                "{path:?}: {flag} also among the own options"
            );
        }
    }
}

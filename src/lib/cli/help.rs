//! What dpctl says about itself: `-h` kept under a screen (each flag's first
//! sentence; `--help` has the rest), the global options printed once by
//! `dpctl options`, reference prose as `dpctl help <topic>`, and clap's usage
//! errors in dpctl's one error style.

use clap::{Args, CommandFactory, FromArgMatches};

use super::{Cli, GlobalArgs, out_err};
use crate::error::{Error, Result, exit};
use crate::output::Streams;

/// The line every help page ends with instead of the global options.
const GLOBAL_LINE: &str = "Global options (-o, -v, -q, --color, ...): dpctl options. Reference: dpctl help topics";

/// A page of reference prose `dpctl help <name>` prints.
struct Topic {
    name: &'static str,
    about: &'static str,
    text: fn() -> String,
}

fn kubelet_versions() -> String {
    format!(
        "{}\nDRA release rules (the release table; docs/dra.md):\n{}",
        crate::kubelet_sim::differences::VERSIONS_AND_DIFFERENCES,
        crate::kubelet_version::dra_rules_text()
    )
}

fn exit_codes() -> String {
    super::EXIT_CODES.to_string()
}

const TOPICS: &[Topic] = &[
    Topic {
        name: "kubelet-versions",
        about: "what changes between the kubelet releases the sim plays, and where it differs from a kubelet",
        text: kubelet_versions,
    },
    Topic {
        name: "isolate",
        about: "how smoke --isolate runs a plugin on the kubelet's paths without touching the host",
        text: || super::smoke::ISOLATE_HELP.to_string(),
    },
    Topic {
        name: "engines",
        about: "--engine referee:PATH: the same steps against the kubelet's own code",
        text: || super::smoke::ENGINE_HELP.to_string(),
    },
    Topic { name: "exit-codes", about: "exit codes and environment variables", text: exit_codes },
];

/// `dpctl help [COMMAND... | TOPIC]`
#[derive(Debug, Args)]
pub struct HelpArgs {
    /// A command (`kubelet-sim restart`) for its full help, or a topic; `topics` lists them.
    #[arg(value_name = "COMMAND|TOPIC", trailing_var_arg = true)]
    pub words: Vec<String>,
}

/// `dpctl options`
#[derive(Debug, Args)]
pub struct OptionsArgs {}

/// dpctl's command line as the binary parses it: the derived definition with
/// one line per flag in `-h` at the terminal's width and the global options
/// left to `dpctl options`. (Completions use the derived one, which offers
/// every flag.)
pub fn command() -> clap::Command {
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.parse::<usize>().ok()).filter(|w| *w >= 40);
    let width = crate::output::terminal_size(libc::STDOUT_FILENO).map(|(w, _)| w).or(columns).unwrap_or(100);
    command_at(width)
}

/// [`command`] for a terminal `width` columns wide.
pub fn command_at(width: usize) -> clap::Command {
    let mut cmd = Cli::command().term_width(width).max_term_width(width);
    cmd = cmd.mut_args(|a| if a.is_global_set() { a.hide(true) } else { a });
    shorten(cmd, width)
}

/// Parses the process's arguments with [`command`].
pub fn parse() -> std::result::Result<Cli, clap::Error> {
    let mut matches = command().try_get_matches()?;
    Cli::from_arg_matches_mut(&mut matches)
}

/// The headings whose flags `-h` names in one paragraph instead of a line
/// each (`mock-plugin`'s twenty faults); `--help` keeps every line.
const COLLAPSED_HEADINGS: [&str; 1] = ["Faults"];

/// Hides the flags of [`COLLAPSED_HEADINGS`] from `-h` and returns the
/// paragraph that names them, wrapped at `width` (empty: none there).
fn collapse(cmd: clap::Command, width: usize) -> (clap::Command, String) {
    let mut text = String::new();
    let mut cmd = cmd;
    for heading in COLLAPSED_HEADINGS {
        let flags: Vec<String> = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set() && a.get_help_heading() == Some(heading))
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        if flags.is_empty() {
            continue;
        }
        let para = format!("{heading} ({} flags; each explained in --help): {}", flags.len(), flags.join(", "));
        let lines = crate::output::layout::wrap(&para, width.saturating_sub(2).max(40));
        text.push_str(&lines.join("\n  "));
        cmd = cmd.mut_args(|a| if a.get_help_heading() == Some(heading) { a.hide_short_help(true) } else { a });
    }
    (cmd, text)
}

/// Each argument's `-h` line is its first sentence (the whole text, with its
/// default and possible values, stays in `--help`); each subcommand's the
/// same; every page ends with [`GLOBAL_LINE`].
fn shorten(cmd: clap::Command, width: usize) -> clap::Command {
    let after_long = cmd.get_after_long_help().map(|h| format!("{h}\n\n{GLOBAL_LINE}"));
    let (cmd, collapsed) = collapse(cmd, width);
    let short = if collapsed.is_empty() { GLOBAL_LINE.to_string() } else { format!("{collapsed}\n\n{GLOBAL_LINE}") };
    let mut cmd = cmd.after_help(short).after_long_help(after_long.unwrap_or_else(|| GLOBAL_LINE.into()));
    if cmd.get_long_about().is_none()
        && let Some(about) = cmd.get_about().map(ToString::to_string)
        && first_sentence(&about, width.saturating_sub(28).max(24)) != about
    {
        cmd = cmd.about(first_sentence(&about, width.saturating_sub(28).max(24))).long_about(about);
    }
    // clap puts every help on its own line when one does not fit beside the
    // longest flag: each short help fits there, so each flag takes one line.
    // clap aligns each heading's flags on its own.
    let mut longest: std::collections::HashMap<Option<String>, usize> = std::collections::HashMap::new();
    for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let w = longest.entry(a.get_help_heading().map(String::from)).or_default();
        *w = (*w).max(spec_width(a));
    }
    cmd = cmd.mut_args(|a| {
        let spec = longest.get(&a.get_help_heading().map(String::from)).copied().unwrap_or(0);
        let room = width.saturating_sub(spec + 10).max(16);
        let Some(help) = a.get_help().map(ToString::to_string) else { return a };
        if a.get_long_help().is_some() || a.is_hide_set() {
            return a;
        }
        let short = first_sentence(&help, room);
        if !a.get_action().takes_values() {
            return a.help(short).long_help(help);
        }
        let mut long = help.clone();
        let defaults: Vec<String> = a.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
        if !defaults.is_empty() && !a.is_hide_default_value_set() {
            long.push_str(&format!(" [default: {}]", defaults.join(",")));
        }
        let values: Vec<String> =
            a.get_possible_values().iter().filter(|v| !v.is_hide_set()).map(|v| v.get_name().to_string()).collect();
        if !values.is_empty() && !a.is_hide_possible_values_set() {
            long.push_str(&format!(" [possible values: {}]", values.join(", ")));
        }
        if let Some(env) = a.get_env().filter(|_| !a.is_hide_env_set()) {
            long.push_str(&format!(" [env: {}]", env.to_string_lossy()));
        }
        a.help(short).long_help(long).hide_default_value(true).hide_possible_values(true).hide_env(true)
    });
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, |c| shorten(c, width));
    }
    cmd
}

/// How wide clap shows a flag: `  -x, --name <VALUE>` and its padding.
fn spec_width(a: &clap::Arg) -> usize {
    let long = a.get_long().map_or(0, |l| l.len() + 2);
    if a.is_positional() {
        return 4 + a.get_value_names().map_or(a.get_id().as_str().len() + 3, |v| v.iter().map(|n| n.len() + 3).sum());
    }
    let values: usize = if a.get_action().takes_values() {
        a.get_value_names().map_or(a.get_id().as_str().len() + 3, |v| v.iter().map(|n| n.len() + 3).sum())
    } else {
        0
    };
    4 + long + values + if a.get_num_args().is_some_and(|n| n.max_values() > 1) { 3 } else { 0 }
}

/// Up to the end of the first sentence (`. ` or the end), without its full
/// stop, in at most `max` characters (cut at a word, marked `…`).
fn first_sentence(text: &str, max: usize) -> String {
    // "e.g. " and "i.e. " end no sentence.
    let guarded = text.replace("e.g. ", "e.g.\u{1}").replace("i.e. ", "i.e.\u{1}");
    let one = guarded.split(". ").next().unwrap_or(text).trim_end_matches('.').replace(['\u{1}', '\n'], " ");
    if one.chars().count() <= max {
        return one;
    }
    let mut out = String::new();
    for word in one.split(' ') {
        if out.chars().count() + word.chars().count() + 2 > max {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    format!("{}…", out.trim_end_matches([',', ';', ':', '(']))
}

/// Writes a clap usage error as dpctl writes every error: `dpctl: error:`,
/// then clap's tips, the usage line and its extra lines as one `hint:`.
pub fn write_usage_error(w: &mut dyn std::io::Write, e: &clap::Error) -> std::io::Result<()> {
    let text = e.render().to_string();
    let mut message = String::new();
    let mut hints: Vec<String> = Vec::new();
    let mut usage = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(m) = line.strip_prefix("error: ") {
            message = m.to_string();
        } else if let Some(tip) = line.strip_prefix("tip: ") {
            hints.push(tip.to_string());
        } else if let Some(u) = line.strip_prefix("Usage: ") {
            usage = Some(u.to_string());
        } else if !line.starts_with("For more information") && usage.is_none() {
            hints.push(line.to_string());
        }
    }
    match usage {
        Some(u) => hints.push(format!("usage: {u} (--help for more)")),
        None if hints.is_empty() => hints.push("--help says what each flag takes".into()),
        None => {}
    }
    crate::error::write(w, &message, Some(&hints.join("; ")))
}

/// Runs `dpctl options`: the options every command takes, once.
pub fn options(s: &mut Streams<'_>) -> Result<u8> {
    let cmd = GlobalArgs::augment_args(clap::Command::new("dpctl options"))
        .about("The options every dpctl command takes (before or after the subcommand):")
        .disable_help_flag(true)
        .help_template("{about}\n\n{options}\n")
        .term_width(crate::output::width().unwrap_or(100));
    let mut cmd = cmd.mut_args(|a| a.hide(false));
    write!(s.out, "{}", cmd.render_long_help()).map_err(out_err)?;
    Ok(exit::OK)
}

/// Runs `dpctl help`: a topic, a command's full help, or the list of both.
pub fn help(args: &HelpArgs, s: &mut Streams<'_>) -> Result<u8> {
    let width = crate::output::width().unwrap_or(100);
    let words: Vec<&str> = args.words.iter().map(String::as_str).collect();
    if let [name] = words.as_slice()
        && let Some(t) = TOPICS.iter().find(|t| t.name == *name)
    {
        writeln!(s.out, "{}", (t.text)()).map_err(out_err)?;
        return Ok(exit::OK);
    }
    if words.is_empty() || words == ["topics"] {
        let mut root = command_at(width);
        if words.is_empty() {
            writeln!(s.out, "{}", root.render_help()).map_err(out_err)?;
        }
        writeln!(s.out, "Topics (dpctl help TOPIC):").map_err(out_err)?;
        for t in TOPICS {
            writeln!(s.out, "  {:<18}{}", t.name, t.about).map_err(out_err)?;
        }
        return Ok(exit::OK);
    }
    let mut cmd = command_at(width);
    cmd.build();
    let mut at = &mut cmd;
    for word in &words {
        let known: Vec<String> = at.get_subcommands().map(|c| c.get_name().to_string()).collect();
        at = match at.find_subcommand_mut(word) {
            Some(sub) => sub,
            None => {
                let mut names = known;
                names.extend(TOPICS.iter().map(|t| t.name.to_string()));
                return Err(Error::invalid(
                    "COMMAND|TOPIC",
                    format!("no command or topic {:?}; there are: {}", words.join(" "), names.join(", ")),
                ));
            }
        };
    }
    write!(s.out, "{}", at.render_long_help()).map_err(out_err)?;
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sentences_fit_a_line() {
        assert_eq!(first_sentence("Do not serve PodResources", 60), "Do not serve PodResources");
        assert_eq!(first_sentence("Stop after this long. Then more.", 60), "Stop after this long");
        let long = first_sentence(
            "Report started at once but create kubelet.sock only this long after, as a kubelet whose device manager",
            40,
        );
        assert!(long.ends_with('…') && long.chars().count() <= 40, "{long}");
    }

    #[test]
    fn the_parsed_definition_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn usage_errors_read_like_every_error() {
        let e = command().try_get_matches_from(["dpctl", "plugin", "call", "list", "--bogus"]).unwrap_err();
        let mut out = Vec::new();
        write_usage_error(&mut out, &e).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("dpctl: error: unexpected argument '--bogus' found\n  hint: "), "{text}");
        assert!(text.contains("usage: dpctl plugin call list [OPTIONS]"), "{text}");
        assert_eq!(text.lines().count(), 2, "{text}");
    }
}

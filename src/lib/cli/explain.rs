//! `dpctl explain "<text>"`: names the cause of a kubelet admission error as
//! users paste it (from `kubectl describe pod`, `kubectl get events`, a log).

use std::io::{IsTerminal, Read};

use clap::Args;

use crate::error::{Error, Result, exit};
use crate::output::{self, Streams};

const HELP: &str = "\
Examples:
  dpctl explain 'no healthy devices present; cannot allocate unhealthy devices example.com/gpu'
  kubectl get events -o custom-columns=M:.message | dpctl explain
  kubectl describe pod NAME | dpctl explain -o json

Knows the device manager's and Topology Manager's admission texts (the
same ones kubelet-sim says), the PreStartContainer texts, a Register
refusal and FailedPrepareDynamicResources. For each one found: the
reason, what the kubelet means by it, the releases that say it, and the
dpctl command that confirms the cause. Exit 0 when a text was found, 1
when none was.";

/// The most `explain` reads from stdin.
const MAX_INPUT: u64 = 1 << 20;

/// Name the cause of a kubelet admission error (UnexpectedAdmissionError, TopologyAffinityError, ...).
#[derive(Debug, Args)]
#[command(after_long_help = HELP)]
pub struct ExplainArgs {
    /// The error text as pasted (several words are joined); none or `-` reads stdin.
    #[arg(value_name = "TEXT")]
    pub text: Vec<String>,
}

/// Runs `dpctl explain`.
pub fn run(args: ExplainArgs, s: &mut Streams<'_>) -> Result<u8> {
    let input = if args.text.is_empty() || args.text == ["-"] {
        let stdin = std::io::stdin();
        if args.text.is_empty() && stdin.is_terminal() {
            return Err(Error::invalid(
                "TEXT",
                "give the error text as an argument (quoted), or pipe it in: kubectl describe pod NAME | dpctl explain",
            ));
        }
        let mut buf = Vec::new();
        stdin.lock().take(MAX_INPUT).read_to_end(&mut buf).map_err(|e| Error::invalid("stdin", e.to_string()))?;
        String::from_utf8_lossy(&buf).into_owned()
    } else {
        args.text.join(" ")
    };
    let found = crate::kubelet_texts::explain(&input);
    if found.is_empty() {
        let message = format!(
            "no kubelet text dpctl knows in the input ({})",
            crate::text::count(input.chars().count() as u64, "character", "characters")
        );
        let hint = format!(
            "paste the kubelet's message (kubectl describe pod NAME | dpctl explain); dpctl knows: {}",
            crate::kubelet_texts::ALL_TEXTS.iter().map(|t| t.code).collect::<Vec<_>>().join(", ")
        );
        output::write_error(&mut *s.err, &message, Some(&hint)).map_err(output::out_err)?;
        if s.format.is_json() {
            output::explain::explanation(s.out, s.format, &output::explain::Explanation::new(found))
                .map_err(output::out_err)?;
        }
        return Ok(exit::CHECK_FAILED);
    }
    output::explain::explanation(s.out, s.format, &output::explain::Explanation::new(found))
        .map_err(output::out_err)?;
    Ok(exit::OK)
}

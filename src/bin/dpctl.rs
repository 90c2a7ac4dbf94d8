//! The `dpctl` binary: parse the command line, set up logging and color, run
//! the library, and map the outcome to an exit code.

use std::io::{IsTerminal, LineWriter, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::process::ExitCode;

use dpctl::cli::ColorChoice;
use dpctl::output::Term;
use tracing_subscriber::EnvFilter;

/// mimalloc: a 100,000-device ListAndWatch message is about 300,000 small
/// allocations to decode; glibc's allocator made a health change take 25 ms
/// to reach the sim, over the 20 ms budget BENCHMARKS.md sets for it.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // `dpctl smoke --isolate` re-runs dpctl as its namespace helper: that must
    // happen before anything else (and before any thread starts).
    if let Some(code) = dpctl::smoke::isolate::helper_main(&mut std::io::stdout(), &mut std::io::stderr()) {
        return ExitCode::from(code);
    }
    let cli = match dpctl::cli::help::parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            let _ = dpctl::cli::help::write_usage_error(&mut std::io::stderr(), &e);
            return ExitCode::from(dpctl::error::exit::USAGE);
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    let level = match (cli.global.quiet, cli.global.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_env("DPCTL_LOG").unwrap_or_else(|_| EnvFilter::new(format!("dpctl={level},warn")));
    let err_tty = std::io::stderr().is_terminal();
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(err_tty).init();
    match cli.global.color {
        ColorChoice::Always => colored::control::set_override(true),
        ColorChoice::Never => colored::control::set_override(false),
        ColorChoice::Auto => {
            if !std::io::stdout().is_terminal() {
                colored::control::set_override(false);
            }
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            let message = format!("cannot start the async runtime: {e}");
            let _ = dpctl::error::write(&mut std::io::stderr(), &message, None);
            return ExitCode::from(dpctl::error::exit::SOCKET);
        }
    };
    let mut term = Term {
        out: patient(std::io::stdout().as_fd(), || Box::new(std::io::stdout())),
        err: patient(std::io::stderr().as_fd(), || Box::new(std::io::stderr())),
        err_is_tty: err_tty,
        out_is_tty: std::io::stdout().is_terminal(),
    };
    match runtime.block_on(dpctl::cli::run(cli, &mut term)) {
        Ok(code) => ExitCode::from(code),
        Err(e) if e.is_closed_output() => ExitCode::SUCCESS,
        Err(e) => {
            let hint = dpctl::podresources::hint(&e);
            let _ = dpctl::output::write_error(&mut std::io::stderr(), &e.to_string(), hint.as_deref());
            ExitCode::from(e.exit_code())
        }
    }
}

/// stdout or stderr through [`dpctl::output::fd::FdWriter`], so that a
/// reader who stops reading cannot hold dpctl past a signal; the plain
/// stream when the descriptor cannot be duplicated.
fn patient(fd: BorrowedFd<'_>, plain: impl FnOnce() -> Box<dyn Write + Send>) -> Box<dyn Write + Send> {
    match fd.try_clone_to_owned() {
        Ok(owned) => Box::new(LineWriter::new(dpctl::output::fd::FdWriter::new(owned))),
        Err(_) => plain(),
    }
}

//! `dpctl smoke -- COMMAND...`: run a vendor's plugin against a fresh
//! kubelet-sim and check it end to end; the report goes to stdout (table or
//! JSON) and optionally to a JUnit file, the narration to stderr.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{Ctx, out_err};
use crate::check::{Case, CheckId, Outcome};
use crate::duration::parse as parse_duration;
use crate::error::{Error, Result};
use crate::kubelet_sim::KubeletVersion;
use crate::kubelet_sim::Via;
use crate::output::junit::JunitFile;
use crate::output::smoke as render;
use crate::smoke::matrix::MatrixProgress;
use crate::smoke::{self, SmokeConfig, SmokeProgress, StepId};

/// `dpctl smoke` arguments (the one-line help is on `Command::Smoke`).
#[derive(Debug, Args)]
#[command(after_long_help = after_help())]
pub struct SmokeArgs {
    /// The plugin's command line, after `--`. `{dir}` (the device-plugin
    /// directory) and `{kubelet_socket}` are replaced in every argument; the
    /// plugin also gets them as DPCTL_SMOKE_DIR and DPCTL_KUBELET_SOCKET.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Use this device-plugin directory instead of a fresh one under /tmp
    /// (it is kept; only the sim's sockets are removed).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Keep the fresh directory afterwards (checkpoint, leftover sockets).
    #[arg(long)]
    pub keep: bool,
    /// The resource to test when the plugin registers several [default: the first to register].
    #[arg(long, value_name = "NAME")]
    pub resource: Option<String>,
    /// How long the plugin may take to start and register.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "20s")]
    pub register_timeout: Duration,
    /// How long the first ListAndWatch message may take after registration.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub first_list_timeout: Duration,
    /// Devices the test pod asks for (0: no pod).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub request: u64,
    /// How long after a kubelet restart the plugin may take to register again.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub restart_deadline: Duration,
    /// Admit the test pod under this Topology Manager policy (the kubelet's --topology-manager-policy).
    #[arg(long, value_enum, value_name = "POLICY", default_value = "none")]
    pub topology_manager_policy: crate::topology::Policy,
    /// NUMA nodes of the simulated machine (devices on other nodes never align).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub numa_nodes: usize,
    /// How long the plugin may take to exit after SIGTERM before it gets SIGKILL.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub grace: Duration,
    /// PreStartContainer deadline, as the kubelet's (30s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
    pub prestart_timeout: Duration,
    /// How long the ListAndWatch stream must stay open during the checks (at least).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2s")]
    pub stream_window: Duration,
    /// Leave out these steps or checks (comma-separated names; see below).
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    pub skip: Vec<String>,
    /// Also write the report as JUnit XML to FILE (testsuite "dpctl smoke").
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write the plugin's whole output to DIR/plugin.stdout.log and DIR/plugin.stderr.log
    /// (the report keeps the last 64 KiB of each).
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// Copy the plugin's output to stderr as it runs.
    #[arg(long)]
    pub show_output: bool,
    /// Run the plugin unmodified in a private mount namespace where the sim's fresh directories are
    /// bind-mounted at /var/lib/kubelet/device-plugins, /var/lib/kubelet/plugins_registry and
    /// /var/lib/kubelet/pod-resources (the host's mounts never change; see below).
    #[arg(long)]
    pub isolate: bool,
    /// With --isolate: also bind-mount SRC (a host path) at DST inside the namespace, e.g. a CDI
    /// spec directory, a fake /dev tree or a config file (repeatable).
    #[arg(long, value_name = "SRC:DST", requires = "isolate", value_parser = parse_bind)]
    pub bind: Vec<smoke::isolate::Bind>,
    /// How the plugin must register: on kubelet.sock, through plugins_registry (the plugin
    /// watcher's GetInfo), or auto (whichever it does; the report says which).
    #[arg(long, value_name = "WAY", value_parser = parse_registration, default_value = "auto")]
    pub registration: Registration,
    /// The kubelet release(s) to play, comma-separated (1.26 … 1.36, master): the whole smoke runs once
    /// per release, and the report says which ones the plugin passes.
    #[arg(long, value_name = "VERSION,...", default_value = "1.36")]
    pub kubelet_version: String,
}

/// `--registration`: `None` is auto.
#[derive(Debug, Clone, Copy)]
pub struct Registration(pub Option<Via>);

fn parse_registration(s: &str) -> std::result::Result<Registration, String> {
    match s {
        "auto" => Ok(Registration(None)),
        "kubelet-sock" | "kubelet.sock" => Ok(Registration(Some(Via::KubeletSock))),
        "plugins-registry" | "plugins_registry" => Ok(Registration(Some(Via::PluginsRegistry))),
        other => Err(format!("{other:?}: use auto, kubelet-sock or plugins-registry")),
    }
}

fn parse_bind(s: &str) -> std::result::Result<smoke::isolate::Bind, String> {
    smoke::isolate::parse_bind(s)
}

fn after_help() -> String {
    let steps = StepId::names();
    let checks = CheckId::names();
    format!(
        "Steps, in order: {} (the `plugin check` suite runs after registration-request: {}).\n\
         --skip takes any of them but launch, registration and shutdown.\n\n\
         Examples:\n  \
         dpctl smoke -- ./my-device-plugin --socket-dir {{dir}}\n  \
         dpctl smoke --junit smoke.xml --log-dir logs -- ./my-plugin --kubelet-socket {{kubelet_socket}}\n  \
         dpctl smoke --request 2 --restart-deadline 5s -- python3 plugin.py --dir {{dir}}\n  \
         dpctl smoke --isolate -- ./vendor-device-plugin            # uses /var/lib/kubelet/... as is\n  \
         dpctl smoke --isolate --bind ./cdi:/etc/cdi -- ./vendor-device-plugin\n  \
         dpctl smoke -- ./my-plugin --registry-dir {{registry_dir}}   # registers through plugins_registry\n  \
         dpctl smoke -- docker run --rm -v {{dir}}:/var/lib/kubelet/device-plugins:z IMAGE\n\n\
         Placeholders: {{dir}} (device-plugin directory), {{kubelet_socket}}, {{registry_dir}} (plugins_registry); \
         also in the environment as DPCTL_SMOKE_DIR, DPCTL_KUBELET_SOCKET, DPCTL_REGISTRY_DIR, and \
         DPCTL_PODRESOURCES_SOCKET. The sim accepts registrations on kubelet.sock and through its plugins_registry \
         directory; --registration insists on one.\n\n\
         --isolate: dpctl re-runs itself as a small helper that enters a new mount namespace (as root; as \
         another user, a user namespace too, where the kernel allows one), makes every mount private, bind-mounts \
         the sim's directories at the kubelet's paths, then execs the plugin. A mountpoint missing on this machine \
         (no /var/lib/kubelet) is made inside the namespace only, on a tmpfs copy of its nearest existing parent \
         with every entry bind-mounted back: nothing is created on the host, nothing is left behind. The setup is \
         tried before the sim starts; a refusal (no privilege, AppArmor, a sysctl) exits 2 with the fix before \
         the plugin starts. The report lists what was mounted where.\n\n\
         dpctl smoke --kubelet-version 1.28,1.32,1.36 --junit smoke.xml -- ./my-plugin --socket-dir {{dir}}\n\n\
         With several --kubelet-version values the whole smoke runs once per release against a fresh kubelet-sim \
         playing it (see dpctl kubelet-sim --help for what changes between releases); the table shows each \
         release's report and then one row per release, -o json gives {{\"passed\":[…],\"failed\":[…],\"runs\":[…]}}, \
         and the JUnit file has one <testsuite> per release. Exit 1 when any release fails.\n\n\
         The plugin runs in its own process group with stdin closed; it is stopped at the end whatever happens \
         (SIGTERM, --grace, SIGKILL; also on Ctrl-C), and the fresh directory is removed (unless --keep). \
         Progress goes to stderr, the report to stdout.\n\n\
         Exit codes:\n  \
         0  every step and check passed (or was skipped)\n  \
         1  a step or check failed (the report says which and why), or the run was interrupted\n  \
         2  bad usage (no command, unknown --skip name, unwritable --junit, a --dir a live kubelet serves), or \
         --isolate refused (the message says why and how to fix it)\n  \
         3  kubelet-sim could not bind its sockets (permissions, path too long)",
        steps.join(", "),
        checks.join(", ")
    )
}

/// Runs `dpctl smoke`.
pub async fn run(args: SmokeArgs, ctx: &mut Ctx<'_>) -> Result<u8> {
    let versions = KubeletVersion::parse_list(&args.kubelet_version)?;
    let (skip_steps, skip_checks) = smoke::select_skips(&args.skip)?;
    if let Some(r) = &args.resource
        && let Some(why) = crate::validate::explain_resource_name(r)
    {
        return Err(Error::invalid("--resource", why));
    }
    // Checked first, so that a bad path is reported before anything runs.
    if let Some(dir) = &args.log_dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::invalid("--log-dir", format!("cannot create directory {}: {e}", dir.display())))?;
    }
    let junit = JunitFile::create(args.junit.as_deref())?;
    let config = SmokeConfig {
        command: args.command,
        dir: args.dir,
        keep: args.keep,
        resource: args.resource,
        register_timeout: args.register_timeout,
        first_list_timeout: args.first_list_timeout,
        request: args.request,
        restart_deadline: args.restart_deadline,
        grace: args.grace,
        prestart_timeout: args.prestart_timeout,
        stream_window: args.stream_window,
        skip_steps,
        skip_checks,
        log_dir: args.log_dir,
        forward_output: args.show_output && !ctx.quiet,
        registration: args.registration.0,
        isolate: args.isolate.then_some(smoke::isolate::IsolateConfig { binds: args.bind, helper: None }),
        topology: crate::topology::TopologyConfig {
            policy: args.topology_manager_policy,
            machine: crate::topology::Machine {
                numa_nodes: args.numa_nodes,
                ..crate::topology::TopologyConfig::default().machine
            },
            ..Default::default()
        },
        ..SmokeConfig::default()
    };
    let bar = ctx.progress_allowed().then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    });
    let quiet = ctx.quiet;
    let err = &mut ctx.term.err;
    let tty = bar.is_some();
    let mut say = |line: String| {
        if quiet {
            return;
        }
        match &bar {
            Some(b) => b.println(line),
            None => {
                let _ = writeln!(err, "{line}");
            }
        }
    };
    // Steps that did not run for one reason are told once.
    let mut not_run: Option<(String, usize)> = None;
    let many = versions.len() > 1;
    let matrix = smoke::run_matrix(config, &versions, crate::transport::shutdown_signal(), &mut |mp| {
        let p = match mp {
            MatrixProgress::Version { version, index, count } => {
                if many {
                    say(format!("== kubelet {version} ({index}/{count}) =="));
                }
                return;
            }
            MatrixProgress::Run(p) => p,
        };
        if let Some((why, n)) =
            not_run.take_if(|_| !matches!(&p, SmokeProgress::StepFinished(r) if r.evidence.starts_with("not run")))
        {
            say(format!("skip  {n} step(s): {why}"));
        }
        match p {
            SmokeProgress::SimReady { dir, kubelet_socket } => {
                say(format!("kubelet-sim: serving {} in {}", kubelet_socket.display(), dir.display()));
            }
            SmokeProgress::Isolated(r) => {
                say(format!("isolate: {} namespace(s), private mounts:", r.namespaces));
                for m in &r.mounts {
                    say(format!("  {} <- {} ({})", m.target, m.source, m.kind));
                }
            }
            SmokeProgress::Launched { pid, command } => {
                say(format!("plugin: started pid {pid}: {}", smoke::shell_words(&command)));
            }
            SmokeProgress::StepStarted(name) => {
                if let Some(b) = &bar {
                    b.set_message(name);
                }
            }
            SmokeProgress::StepFinished(r) if r.evidence.starts_with("not run") => match &mut not_run {
                Some((why, n)) if *why == r.evidence => *n += 1,
                _ => not_run = Some((r.evidence, 1)),
            },
            // On a terminal the spinner shows progress; only what went wrong is printed.
            SmokeProgress::StepFinished(r) if tty && matches!(r.outcome, Outcome::Pass | Outcome::Skip) => {}
            SmokeProgress::StepFinished(r) => say(render::step_line(&r, false)),
            SmokeProgress::Output { stream, line } => say(format!("plugin {}| {line}", stream.as_str())),
            SmokeProgress::Stopping { grace } => {
                say(format!("plugin: stopping (SIGTERM, then SIGKILL after {})", humantime::format_duration(grace)))
            }
        }
    })
    .await;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let matrix = matrix?;
    if let Some(file) = junit {
        file.write(|w| match (many, matrix.runs.first()) {
            (false, Some(r)) => render::junit(w, r),
            _ => render::junit_matrix(w, &matrix),
        })?;
    }
    if !ctx.format.is_json() && !ctx.quiet {
        writeln!(ctx.term.err).map_err(out_err)?;
    }
    match (many, matrix.runs.first()) {
        (false, Some(r)) => render::report(&mut ctx.term.out, ctx.format, r).map_err(out_err)?,
        _ => render::matrix(&mut ctx.term.out, ctx.format, &matrix).map_err(out_err)?,
    }
    Ok(matrix.exit_code())
}

//! `dpctl kubelet-sim`: run a simulated kubelet device manager in a
//! directory, or steer one that runs (admit, delete, restart, status,
//! set-grace) through its control socket.

use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use tokio::sync::broadcast;

use super::{Ctx, out_err, parse_duration};
use crate::error::{Error, Result, exit};
use crate::kubelet_sim::control::{self, Answer, Request};
use crate::kubelet_sim::{KubeletSim, PodSpec, SimConfig, SimEvent};
use crate::output::{self, Format, sim as render};
use crate::paths::{DEFAULT_DEVICE_PLUGIN_DIR, ENV_DEVICE_PLUGIN_DIR};

const SIM_HELP: &str = "\
Examples:
  dpctl kubelet-sim --dir /tmp/dp                          # serve kubelet.sock with a live view
  dpctl kubelet-sim --dir /tmp/dp -o json                  # one JSON event per line
  dpctl kubelet-sim --dir /tmp/dp --expect example.com/gpu=4 --timeout 30s   # pass/fail check
  dpctl kubelet-sim admit --dir /tmp/dp pod.yaml           # from another terminal
  dpctl kubelet-sim admit --dir /tmp/dp --allocate example.com/gpu=2
  dpctl kubelet-sim restart --dir /tmp/dp --wait 30s
  dpctl kubelet-sim status --dir /tmp/dp -o json
  dpctl podresources list --socket /tmp/dp/pod-resources.sock

With --expect, the exit code is 0 as soon as every RESOURCE has exactly COUNT
allocatable devices, and 1 when --timeout (default 30s) passes first.
admit exits 1 when the pod is rejected or a container cannot start; restart
exits 1 when a plugin did not come back within --wait.

Where the sim deliberately differs from a real kubelet (1.36):
  - A second Register of the same resource drops the old plugin's stream, as on
    master (PR #135437), instead of the 1.36 race where the old stream's end
    disconnects the new plugin.
  - Topology Manager policy is none: devices are not NUMA-aligned to CPUs.
  - GetDevicePluginOptions, GetPreferredAllocation and Allocate have a deadline
    (--rpc-timeout); the kubelet sets none, so a hung plugin hangs admission.
  - The checkpoint's Checksum is not Go's (go-spew + FNV); a real kubelet would
    reject the file as corrupt. The layout and AllocResp encoding are the kubelet's.
  - PreStartContainer is called at admission only; container restarts are not
    simulated. CPU and memory managers are not simulated (no cpu_ids or memory
    in PodResources).
  - Rejected pods are not kept, so PodResources never lists them.
  - kubelet.sock is created owner-only (0600); the kubelet's socket mode follows its umask.";

/// Be the kubelet's device manager in a directory: accept registrations on
/// kubelet.sock (validated, dialed back, options asked, ListAndWatch), admit
/// pods, restart like a kubelet, and serve PodResources from what it knows.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, after_long_help = SIM_HELP)]
pub struct KubeletSimArgs {
    /// Steer a running sim instead of starting one.
    #[command(subcommand)]
    pub command: Option<SimCommand>,
    /// How to run the sim.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// Options of a running sim.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The device-plugin directory: kubelet.sock, plugin sockets, the checkpoint.
    #[arg(long, value_name = "DIR", env = ENV_DEVICE_PLUGIN_DIR, default_value = DEFAULT_DEVICE_PLUGIN_DIR)]
    pub dir: PathBuf,
    /// Take over kubelet.sock (and the sim's other sockets) even when a live process answers on it,
    /// and delete every socket in --dir at start as a kubelet does. Without it (a deliberate
    /// difference from the kubelet) startup deletes only stale sockets (connecting is refused) and
    /// leaves live ones alone; `restart` deletes them all, like a restarting kubelet.
    #[arg(long)]
    pub force: bool,
    /// After a ListAndWatch stream ends, how long capacity is kept before it drops to 0.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5m")]
    pub grace_period: Duration,
    /// Where to serve PodResources [default: <DIR>/pod-resources.sock].
    #[arg(long, value_name = "PATH")]
    pub podresources_socket: Option<PathBuf>,
    /// Do not serve PodResources.
    #[arg(long, conflicts_with = "podresources_socket")]
    pub no_podresources: bool,
    /// Serve PodResources without the kubelet's rate limit (100 calls/s, burst 10).
    #[arg(long)]
    pub no_rate_limit: bool,
    /// Also accept plugins through this plugins_registry directory (the plugin watcher's way).
    #[arg(long, value_name = "DIR")]
    pub registry_dir: Option<PathBuf>,
    /// How long Register keeps dialing the plugin's socket before it fails.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub dial_timeout: Duration,
    /// Deadline of GetDevicePluginOptions, GetPreferredAllocation and Allocate (the kubelet sets none).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "60s")]
    pub rpc_timeout: Duration,
    /// Do not read or write kubelet_internal_checkpoint.
    #[arg(long)]
    pub no_checkpoint: bool,
    /// Expect RESOURCE to have exactly COUNT allocatable devices (repeatable); exit 0 once all hold.
    #[arg(long, value_name = "RESOURCE=COUNT")]
    pub expect: Vec<String>,
    /// Stop after this long [default: run until Ctrl-C; with --expect: 30s, then exit 1].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
}

/// Which running sim.
#[derive(Debug, Args, Clone)]
pub struct SimTarget {
    /// The directory the sim serves.
    #[arg(long, value_name = "DIR", env = ENV_DEVICE_PLUGIN_DIR, default_value = DEFAULT_DEVICE_PLUGIN_DIR)]
    pub dir: PathBuf,
}

/// Commands for a running sim.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Admit a pod: from a Pod manifest (YAML or JSON; `-` reads stdin), or
    /// with --allocate for a one-container pod.
    Admit {
        /// Which sim.
        #[command(flatten)]
        target: SimTarget,
        /// The Pod manifest.
        #[arg(value_name = "MANIFEST", required_unless_present = "allocate", conflicts_with = "allocate")]
        manifest: Option<PathBuf>,
        /// RESOURCE=COUNT for a one-container pod (repeatable).
        #[arg(long, value_name = "RESOURCE=COUNT")]
        allocate: Vec<String>,
        /// Pod name for --allocate [default: a generated one].
        #[arg(long, requires = "allocate")]
        name: Option<String>,
        /// Namespace for --allocate.
        #[arg(long, default_value = "default", requires = "allocate")]
        namespace: String,
    },
    /// Delete a pod and free its devices.
    Delete {
        /// Which sim.
        #[command(flatten)]
        target: SimTarget,
        /// Pod name (or NAMESPACE/NAME).
        pod: String,
        /// Namespace.
        #[arg(long, short = 'n', default_value = "default")]
        namespace: String,
    },
    /// Restart the kubelet: delete the sockets, serve a new kubelet.sock, keep
    /// allocations, and report which plugins registered again and how fast.
    Restart {
        /// Which sim.
        #[command(flatten)]
        target: SimTarget,
        /// How long to wait for plugins to come back.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
        wait: Duration,
    },
    /// Show resources, plugins and pods.
    Status {
        /// Which sim.
        #[command(flatten)]
        target: SimTarget,
    },
    /// Set the grace period after a stream end (e.g. 2s to watch capacity drop).
    SetGrace {
        /// Which sim.
        #[command(flatten)]
        target: SimTarget,
        /// The new grace period.
        #[arg(value_name = "DURATION", value_parser = parse_duration)]
        grace: Duration,
    },
}

/// Runs `dpctl kubelet-sim ...`.
pub async fn run(args: KubeletSimArgs, ctx: &mut Ctx<'_>) -> Result<u8> {
    match args.command {
        None => serve(args.serve, ctx).await,
        Some(cmd) => steer(cmd, ctx).await,
    }
}

/// Parses `--expect RESOURCE=COUNT`.
fn parse_expect(s: &str) -> Result<(String, usize)> {
    let (r, n) = PodSpec::parse_allocate(s).map_err(|_| {
        Error::invalid(
            format!("--expect {s}"),
            "expected RESOURCE=COUNT with an extended resource name, e.g. example.com/gpu=4",
        )
    })?;
    Ok((r, usize::try_from(n).unwrap_or(usize::MAX)))
}

/// How events are shown.
enum Display {
    Json,
    Lines,
    Live { lines: usize, recent: VecDeque<SimEvent>, width: usize, drawn: Option<Instant>, dirty: bool },
}

async fn serve(args: ServeArgs, ctx: &mut Ctx<'_>) -> Result<u8> {
    let expects: Vec<(String, usize)> = args.expect.iter().map(|s| parse_expect(s)).collect::<Result<_>>()?;
    let mut config = SimConfig::new(&args.dir);
    config.force = args.force;
    config.grace_period = args.grace_period;
    config.podresources_socket = if args.no_podresources {
        None
    } else {
        Some(
            args.podresources_socket
                .clone()
                .unwrap_or_else(|| args.dir.join(crate::paths::SIM_PODRESOURCES_SOCKET_NAME)),
        )
    };
    if args.no_rate_limit {
        config.podresources.rate_limit = None;
    }
    config.registry_dir = args.registry_dir.clone();
    config.dial_timeout = args.dial_timeout;
    config.rpc_timeout = args.rpc_timeout;
    config.checkpoint = !args.no_checkpoint;
    let sim = KubeletSim::start(config).await?;
    let mut rx = sim.events_from_start().unwrap_or_else(|| sim.subscribe());
    let timeout = args.timeout.or_else(|| (!expects.is_empty()).then_some(Duration::from_secs(30)));
    let deadline = timeout.map(crate::duration::deadline);
    let mut display = if ctx.format.is_json() {
        Display::Json
    } else if ctx.progress_allowed() {
        Display::Live { lines: 0, recent: VecDeque::new(), width: terminal_width(), drawn: None, dirty: false }
    } else {
        Display::Lines
    };
    let stop = crate::transport::shutdown_signal();
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut code = exit::OK;
    let result: Result<()> = async {
        loop {
            if !expects.is_empty() {
                let results = render::expect_results(&expects, &sim.counts());
                if results.iter().all(|r| r.met) {
                    drain(&mut rx, &mut display, ctx, &sim)?;
                    finish_expect(ctx, results, true)?;
                    break;
                }
            }
            let until = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(ev) => show(&mut display, ctx, &sim, ev)?,
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        ctx.note(format!("dpctl: {n} event(s) were dropped (the output is too slow)"))?;
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                _ = tick.tick() => {
                    // Redraw what was held back, and once a second for the countdowns.
                    if let Display::Live { drawn, dirty, .. } = &display
                        && (*dirty || drawn.is_none_or(|d| d.elapsed() >= Duration::from_secs(1)))
                    {
                        redraw(&mut display, ctx, &sim)?;
                    }
                }
                () = until => {
                    drain(&mut rx, &mut display, ctx, &sim)?;
                    if !expects.is_empty() {
                        let results = render::expect_results(&expects, &sim.counts());
                        code = exit::CHECK_FAILED;
                        finish_expect(ctx, results, false)?;
                    }
                    break;
                }
                () = &mut stop => break,
            }
        }
        Ok(())
    }
    .await;
    let stopped = sim.stop().await;
    drain(&mut rx, &mut display, ctx, &sim)?;
    if let Display::Live { .. } = display {
        // Leave the last frame on screen, followed by a newline.
        redraw(&mut display, ctx, &sim)?;
        writeln!(ctx.term.err).map_err(out_err)?;
    }
    result?;
    stopped?;
    Ok(code)
}

/// Shows the events already queued.
fn drain(
    rx: &mut broadcast::Receiver<SimEvent>,
    display: &mut Display,
    ctx: &mut Ctx<'_>,
    sim: &crate::kubelet_sim::SimHandle,
) -> Result<()> {
    loop {
        match rx.try_recv() {
            Ok(ev) => show(display, ctx, sim, ev)?,
            Err(broadcast::error::TryRecvError::Lagged(_)) => {}
            Err(_) => return Ok(()),
        }
    }
}

fn finish_expect(ctx: &mut Ctx<'_>, results: Vec<render::ExpectResult>, met: bool) -> Result<()> {
    let view = render::ExpectView {
        time: output::timestamp(std::time::SystemTime::now()),
        event: "expectations",
        met,
        results,
    };
    // The verdict is data: on stdout in every mode.
    let format = if ctx.format.is_json() { Format::Json } else { Format::Table };
    render::expectations(&mut ctx.term.out, format, &view).map_err(out_err)
}

fn show(display: &mut Display, ctx: &mut Ctx<'_>, sim: &crate::kubelet_sim::SimHandle, ev: SimEvent) -> Result<()> {
    match display {
        Display::Json => render::event(&mut ctx.term.out, Format::Json, &ev).map_err(out_err),
        Display::Lines => render::event(&mut ctx.term.out, Format::Table, &ev).map_err(out_err),
        Display::Live { recent, drawn, dirty, .. } => {
            recent.push_back(ev);
            while recent.len() > 12 {
                recent.pop_front();
            }
            // At most 10 frames a second; the tick draws what is held back.
            if drawn.is_some_and(|d| d.elapsed() < Duration::from_millis(100)) {
                *dirty = true;
                return Ok(());
            }
            redraw(display, ctx, sim)
        }
    }
}

/// Redraws the live view on stderr, replacing the previous frame.
fn redraw(display: &mut Display, ctx: &mut Ctx<'_>, sim: &crate::kubelet_sim::SimHandle) -> Result<()> {
    let Display::Live { lines, recent, width, drawn, dirty } = display else { return Ok(()) };
    let recent: Vec<SimEvent> = recent.iter().cloned().collect();
    let frame = render::live_frame(&sim.summary(), &recent, *width);
    *drawn = Some(Instant::now());
    *dirty = false;
    let err = &mut ctx.term.err;
    if *lines > 0 {
        write!(err, "\x1b[{}A\x1b[J", *lines).map_err(out_err)?;
    }
    for l in &frame {
        writeln!(err, "{l}").map_err(out_err)?;
    }
    err.flush().map_err(out_err)?;
    *lines = frame.len();
    Ok(())
}

/// The terminal width from `COLUMNS`, or 120.
fn terminal_width() -> usize {
    std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()).filter(|w: &usize| *w >= 40).unwrap_or(120)
}

/// Sends a request to a running sim and renders the answer.
async fn steer(cmd: SimCommand, ctx: &mut Ctx<'_>) -> Result<u8> {
    let (dir, request, timeout) = match cmd {
        SimCommand::Admit { target, manifest, allocate, name, namespace } => {
            let pod = match manifest {
                Some(path) => {
                    let place = path.display().to_string();
                    let text = if place == "-" {
                        std::io::read_to_string(std::io::stdin()).map_err(|e| Error::io("reading stdin", e))?
                    } else {
                        crate::input::read_text(&path, &place)?
                    };
                    PodSpec::from_manifest(&text, &place)?
                }
                None => {
                    let limits = allocate.iter().map(|s| PodSpec::parse_allocate(s)).collect::<Result<Vec<_>>>()?;
                    let name = name.unwrap_or_else(|| format!("pod-{:08x}", rand::random::<u32>()));
                    PodSpec::shorthand(&name, &namespace, &limits)
                }
            };
            (target.dir, Request::Admit { pod }, Duration::from_secs(300))
        }
        SimCommand::Delete { target, pod, namespace } => {
            let (namespace, name) = match pod.split_once('/') {
                Some((ns, n)) => (ns.to_string(), n.to_string()),
                None => (namespace, pod),
            };
            (target.dir, Request::Delete { namespace, name }, Duration::from_secs(30))
        }
        SimCommand::Restart { target, wait } => {
            let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
            (target.dir, Request::Restart { wait_ms }, wait + Duration::from_secs(30))
        }
        SimCommand::Status { target } => (target.dir, Request::Status, Duration::from_secs(10)),
        SimCommand::SetGrace { target, grace } => {
            let grace_period_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
            (target.dir, Request::SetGrace { grace_period_ms }, Duration::from_secs(10))
        }
    };
    let answer = match control::call(&dir, &request, timeout).await? {
        Ok(a) => a,
        Err(remote) => {
            writeln!(ctx.term.err, "dpctl: error: {}", remote.message).map_err(out_err)?;
            if let Some(h) = remote.hint {
                writeln!(ctx.term.err, "  hint: {h}").map_err(out_err)?;
            }
            return Ok(remote.exit_code);
        }
    };
    let out = &mut ctx.term.out;
    let format = ctx.format;
    match answer {
        Answer::Admit(o) => {
            render::admit(out, format, &o).map_err(out_err)?;
            let started = o.containers.iter().all(|c| c.started);
            Ok(if o.admitted && started { exit::OK } else { exit::CHECK_FAILED })
        }
        Answer::Delete(d) => {
            render::delete(out, format, &d).map_err(out_err)?;
            Ok(exit::OK)
        }
        Answer::Restart(r) => {
            render::restart(out, format, &r).map_err(out_err)?;
            Ok(if r.all_returned { exit::OK } else { exit::CHECK_FAILED })
        }
        Answer::Status(s) => {
            render::status(out, format, &s).map_err(out_err)?;
            Ok(exit::OK)
        }
        Answer::SetGrace { grace_period_ms } => {
            if format.is_json() {
                output::write_json(out, &serde_json::json!({ "grace_period_ms": grace_period_ms })).map_err(out_err)?;
            } else {
                writeln!(
                    out,
                    "grace period set to {}",
                    crate::error::fmt_duration(Duration::from_millis(grace_period_ms))
                )
                .map_err(out_err)?;
            }
            Ok(exit::OK)
        }
    }
}

//! `dpctl apiserver`: the Kubernetes API a DRA driver needs, with no
//! cluster; `dpctl apiserver slices|writes` read back what drivers wrote.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::apiserver::{self, Config};
use crate::error::{Error, Result, exit};
use crate::output::{Streams, apiserver as render};

const HELP: &str = "\
Serves, from --objects FILE (JSON or YAML: YAML documents, a JSON array or a List), the objects a
DRA driver built on the kubeletplugin helper reads, and takes the ResourceSlices it publishes:
  GET, LIST, WATCH   v1 Node, v1 Pod, resource.k8s.io/v1 ResourceClaim, DeviceClass, ResourceSlice
  CREATE, UPDATE, DELETE (and DELETE of a collection)   resource.k8s.io/v1 ResourceSlice only
Plain HTTP/1.1 with JSON on a loopback TCP address (--listen; client-go cannot reach a unix socket
from a kubeconfig); no authentication, no TLS, so never on another interface. Any other version
(v1beta1, v1beta2) or resource answers the API server's own 404 Status, so the helper's client falls
back from v1 to v1beta2 and v1beta1 and back as it does against a real API server. Watches follow
resourceVersions (one counter for every change), sendInitialEvents with its closing bookmark, and
field selectors spec.driver, spec.nodeName and spec.pool.name. Not served: admission,
validation beyond what drivers trip over, PATCH, apply, status subresources, authentication.

It writes a kubeconfig for the driver (--kubeconfig-out, default DIR/kubeconfig) and records every
write in DIR: apiserver.json (the slices as they stand) and apiserver-writes.jsonl (each write). It
never overwrites a file there that it did not write. Writes are printed as they happen (-o json:
JSON Lines); at Ctrl-C or SIGTERM it prints the slices and exits 0. Start the driver with
--kubeconfig DIR/kubeconfig (or its in-cluster equivalent) and the Node's name from the file.

Examples:
  dpctl apiserver --dir /tmp/api --objects claims.yaml   # serves until Ctrl-C
  dpctl apiserver slices --dir /tmp/api            # what the driver published (also after a stop)
  dpctl apiserver writes --dir /tmp/api -o json    # every create, update and delete";

/// `dpctl apiserver ...`
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, after_long_help = HELP)]
pub struct ApiserverArgs {
    /// Read back a record instead of serving.
    #[command(subcommand)]
    pub query: Option<ApiserverQuery>,
    /// Directory for the record (and the kubeconfig); created if missing.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The objects to serve: a JSON or YAML file of Kubernetes objects.
    #[arg(long, value_name = "FILE")]
    pub objects: Option<PathBuf>,
    /// Address to listen on: loopback only; port 0 lets the OS pick one.
    #[arg(long, value_name = "ADDR", default_value = apiserver::DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Where to write the kubeconfig [default: DIR/kubeconfig].
    #[arg(long, value_name = "PATH")]
    pub kubeconfig_out: Option<PathBuf>,
}

/// Queries of a record.
#[derive(Debug, Subcommand)]
pub enum ApiserverQuery {
    /// The ResourceSlices as they stand in DIR's record (running or stopped server).
    #[command(after_long_help = HELP)]
    Slices(RecordArgs),
    /// Every write recorded in DIR, in order.
    #[command(after_long_help = HELP)]
    Writes(RecordArgs),
}

/// Which record.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The directory `dpctl apiserver --dir` used.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
}

/// Runs `dpctl apiserver ...`.
pub async fn run(a: ApiserverArgs, s: &mut Streams<'_>) -> Result<u8> {
    match a.query {
        Some(ApiserverQuery::Slices(r)) => {
            render::slices(s, &apiserver::record::read(&r.dir)?)?;
            return Ok(exit::OK);
        }
        Some(ApiserverQuery::Writes(r)) => {
            apiserver::record::read(&r.dir)?;
            render::writes(s, &apiserver::record::read_writes(&r.dir)?)?;
            return Ok(exit::OK);
        }
        None => {}
    }
    let (Some(dir), Some(objects)) = (a.dir, a.objects) else {
        return Err(Error::invalid(
            "dpctl apiserver",
            "--dir DIR and --objects FILE are required to serve (or query a record: dpctl apiserver slices --dir DIR)",
        ));
    };
    let config = Config { dir, objects, listen: a.listen, kubeconfig_out: a.kubeconfig_out };
    // The signal is awaited by a task of its own: a write blocked on an
    // output nobody reads is then told to give up (`output::fd`), so the
    // server stops; serving itself never waits for the output.
    let (stop_tx, stop) = tokio::sync::oneshot::channel::<()>();
    let signalled = crate::signal::shutdown();
    let watcher = tokio::spawn(async move {
        signalled.await;
        crate::output::fd::request_stop();
        let _ = stop_tx.send(());
    });
    let server = apiserver::bind(&config).await?;
    render::serving(s, server.url(), server.kubeconfig(), server.objects())?;
    let ran = server
        .run(
            async {
                let _ = stop.await;
            },
            |w| render::write(s, w),
        )
        .await;
    watcher.abort();
    let record = match ran {
        // Stopped by a signal while nobody read the output: nobody to show the rest to.
        Err(e) if crate::output::fd::stop_requested() && e.is_closed_output() => return Ok(exit::OK),
        r => r?,
    };
    if record.unshown > 0 {
        s.note(format!(
            "dpctl: {} not shown (the output was too slow; {} has every write)",
            crate::text::count(record.unshown, "write was", "writes were"),
            apiserver::record::WRITES_FILE
        ))?;
    }
    render::stopped(s, &record)?;
    Ok(exit::OK)
}

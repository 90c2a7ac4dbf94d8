//! deploy/: the manifests parse, mount exactly the host paths dpctl reads
//! (read-only, under the `--root` they pass), run with least privilege, and
//! pass arguments dpctl accepts; the Containerfile is multi-stage and locked.

use std::collections::BTreeSet;

use clap::Parser;
use serde::Deserialize;
use serde_json::Value;

fn docs(file: &str) -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_norway::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{file} does not parse: {e}")))
        .collect()
}

/// The host paths doctor reads by default.
fn expected_host_paths() -> BTreeSet<String> {
    let cfg = dpctl::doctor::DoctorConfig::new("/");
    let mut s: BTreeSet<String> = cfg.cdi_dirs.iter().map(|p| p.display().to_string()).collect();
    s.insert(dpctl::paths::DEFAULT_DEVICE_PLUGIN_DIR.into());
    s.insert(std::path::Path::new(dpctl::paths::DEFAULT_PODRESOURCES_SOCKET).parent().unwrap().display().to_string());
    s.insert(dpctl::paths::DEFAULT_PLUGINS_REGISTRY_DIR.into());
    s.insert(dpctl::dra::DEFAULT_PLUGINS_DIR.into());
    s
}

fn check_pod_spec(file: &str, spec: &Value) {
    assert_eq!(spec["automountServiceAccountToken"], false, "{file}: no service-account token");
    for ns in ["hostNetwork", "hostPID", "hostIPC"] {
        assert_ne!(spec[ns], true, "{file}: {ns}");
    }
    let volumes = spec["volumes"].as_array().unwrap();
    let host_of = |name: &str| -> String {
        let v = volumes.iter().find(|v| v["name"] == name).unwrap_or_else(|| panic!("{file}: no volume {name}"));
        v["hostPath"]["path"].as_str().unwrap_or_else(|| panic!("{file}: volume {name} is not a hostPath")).to_string()
    };
    let containers = spec["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1, "{file}");
    let c = &containers[0];
    // The arguments are ones dpctl accepts, with --root /host.
    let args: Vec<String> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
    let mut argv = vec!["dpctl".to_string()];
    argv.extend(args.iter().cloned());
    dpctl::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{file}: dpctl rejects {args:?}: {e}"));
    let root = args.windows(2).find(|w| w[0] == "--root").map(|w| w[1].clone()).expect("--root");
    assert_eq!(args[0], "doctor");
    // Every mount is read-only and shows the host path under --root.
    let mut mounted = BTreeSet::new();
    for m in c["volumeMounts"].as_array().unwrap() {
        assert_eq!(m["readOnly"], true, "{file}: {m} is not read-only");
        let host = host_of(m["name"].as_str().unwrap());
        assert_eq!(m["mountPath"].as_str().unwrap(), format!("{root}{host}"), "{file}: {m}");
        mounted.insert(host);
    }
    assert_eq!(mounted, expected_host_paths(), "{file}: mounts exactly the paths doctor reads");
    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"], false, "{file}");
    assert_eq!(sc["allowPrivilegeEscalation"], false, "{file}");
    assert_eq!(sc["readOnlyRootFilesystem"], true, "{file}");
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]), "{file}");
    assert!(sc["capabilities"]["add"].is_null(), "{file}: adds capabilities");
    let env = c["env"].as_array().unwrap();
    let node = env.iter().find(|e| e["name"] == "DPCTL_NODE_NAME").expect("DPCTL_NODE_NAME");
    assert_eq!(node["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName");
}

/// The DaemonSet runs doctor on every node with least privilege: it only reads
/// the host, so every mount is read-only and nothing more is granted.
#[test]
fn daemonset_mounts_read_only_what_doctor_reads() {
    let docs = docs("doctor-daemonset.yaml");
    let ds = docs.iter().find(|d| d["kind"] == "DaemonSet").expect("a DaemonSet");
    assert!(docs.iter().any(|d| d["kind"] == "Namespace" && d["metadata"]["name"] == ds["metadata"]["namespace"]));
    let tpl = &ds["spec"]["template"];
    assert_eq!(tpl["metadata"]["labels"], ds["spec"]["selector"]["matchLabels"]);
    check_pod_spec("doctor-daemonset.yaml", &tpl["spec"]);
    let args = tpl["spec"]["containers"][0]["args"].to_string();
    assert!(args.contains("--every") && args.contains("json"), "{args}");
}

/// The Job runs doctor once on one node with the same privileges as the
/// DaemonSet, for a one-off check.
#[test]
fn job_runs_once_on_one_node() {
    let docs = docs("doctor-job.yaml");
    let job = docs.iter().find(|d| d["kind"] == "Job").expect("a Job");
    let spec = &job["spec"]["template"]["spec"];
    assert_eq!(spec["restartPolicy"], "Never");
    assert!(spec["nodeName"].is_string());
    check_pod_spec("doctor-job.yaml", spec);
}

/// The image is reproducible (multi-stage, `--locked` build) and runs
/// unprivileged (non-root runtime stage).
#[test]
fn containerfile_is_multi_stage_locked_and_non_root() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/Containerfile");
    let text = std::fs::read_to_string(path).unwrap();
    let froms = text.lines().filter(|l| l.starts_with("FROM ")).count();
    assert_eq!(froms, 2, "build stage and runtime stage");
    assert!(text.contains("cargo build --release --locked"));
    assert!(text.contains("COPY --from=build"));
    let user = text.lines().rfind(|l| l.starts_with("USER ")).expect("USER");
    assert!(!user.contains(" 0") && !user.contains("root"), "{user}");
    assert!(text.contains("ENTRYPOINT [\"/usr/local/bin/dpctl\"]"));
}

/// Collecting the results must work as documented: the one-liners read
/// the DaemonSet's namespace and label and pipe into `dpctl doctor merge`;
/// the debug recipe passes `--root /host`.
#[test]
fn documented_commands_match_the_manifests() {
    let ds_docs = docs("doctor-daemonset.yaml");
    let ds = ds_docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    let ns = ds["metadata"]["namespace"].as_str().unwrap();
    let (key, value) = {
        let labels = ds["spec"]["selector"]["matchLabels"].as_object().unwrap();
        let (k, v) = labels.iter().next().unwrap();
        (k.clone(), v.as_str().unwrap().to_string())
    };
    let want = format!("kubectl logs -n {ns} -l {key}={value} --tail=1 | dpctl doctor merge");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for file in ["deploy/README.md", "deploy/doctor-daemonset.yaml"] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(text.contains(&want), "{file} does not say `{want}`");
    }
    let readme = std::fs::read_to_string(root.join("deploy/README.md")).unwrap();
    let debug: Vec<&str> = readme.lines().filter(|l| l.starts_with("kubectl debug \"node/")).collect();
    assert_eq!(debug.len(), 2, "{debug:?}");
    // The general profile runs the image's user (65532): root comes from --custom.
    assert!(debug.iter().all(|l| l.contains("--profile=general --custom=deploy/debug-as-root.yaml")), "{debug:?}");
    let mut recipe = readme.lines().skip_while(|l| !l.starts_with("kubectl debug \"node/")).skip(1);
    let run = recipe.next().unwrap().trim().trim_start_matches("-- ");
    let argv: Vec<&str> = std::iter::once("dpctl").chain(run.split_whitespace().skip(1)).collect();
    let argv: Vec<String> = argv.iter().map(|a| a.replace("\"$VERSION\"", "v1.32.4")).collect();
    dpctl::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("dpctl rejects {argv:?}: {e}"));
    assert!(run.contains("--root /host"), "{run}");
}

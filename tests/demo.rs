//! `dpctl demo` as a newcomer runs it: every step narrated and checked, exit
//! 0, nothing left in /tmp; `-o json` gives one line per step with stable
//! keys; a step that does not see what it should fails clearly (exit 1) and
//! still cleans up.

use std::path::Path;

use crate::support::dpctl;

/// The temporary directory, from the JSON lines' first step.
fn dir_of(lines: &[serde_json::Value]) -> String {
    lines[0]["details"]["dir"].as_str().expect("step 1 names the directory").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_narrates_every_step_and_leaves_nothing_behind() {
    let run = dpctl(&["demo"]).await;
    run.expect_code(0);
    let out = &run.stdout;
    for title in [
        "1/8 The kubelet starts ✓",
        "2/8 The plugin registers ✓",
        "3/8 ListAndWatch: the device list ✓",
        "4/8 A device turns unhealthy ✓",
        "5/8 A pod asks for 2 GPUs ✓",
        "6/8 PodResources shows who has what ✓",
        "7/8 The kubelet restarts ✓",
        "8/8 Cleanup ✓",
    ] {
        assert!(out.contains(title), "missing {title:?} in\n{out}");
    }
    for fact in [
        "RegisterRequest        version v1beta1, resource_name example.com/gpu, endpoint example-gpu.sock",
        "GPU-1                  Healthy → Unhealthy",
        "capacity 4 → 4, allocatable 4 → 3",
        "GetPreferredAllocation available GPU-0,GPU-2,GPU-3, size 2 → GPU-2,GPU-3",
        "env                  EXAMPLE_VISIBLE_DEVICES=GPU-2,GPU-3",
        "CDI                  example.com/gpu=GPU-2, example.com/gpu=GPU-3",
        "default/demo-pod holds GPU-2,GPU-3",
        "Done: 8 steps",
    ] {
        assert!(out.contains(fact), "missing {fact:?} in\n{out}");
    }
    // The directory named in the intro is gone.
    let dir = out.split("unix sockets in ").nth(1).and_then(|s| s.split(".\n").next()).expect("intro names the dir");
    assert!(dir.starts_with("/tmp/dpctl-demo-"), "{dir}");
    assert!(!Path::new(dir).exists(), "{dir} removed");
    assert!(run.stderr.is_empty(), "no progress display in a pipe: {}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_lines_cover_every_step_with_stable_keys() {
    let run = dpctl(&["demo", "-o", "json"]).await;
    run.expect_code(0);
    let lines = run.json_lines();
    let names: Vec<&str> = lines.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "kubelet",
            "registration",
            "list-and-watch",
            "health-change",
            "admission",
            "podresources",
            "kubelet-restart",
            "cleanup"
        ]
    );
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["step"], i + 1);
        assert_eq!(l["ok"], true, "{l}");
        assert!(l["error"].is_null());
        for key in ["title", "why", "took_ms", "details"] {
            assert!(!l[key].is_null(), "{key} in {l}");
        }
    }
    let d = |n: usize| &lines[n]["details"];
    assert_eq!(d(1)["options"]["get_preferred_allocation_available"], true);
    let numa0 = d(2)["devices"].as_array().unwrap().iter().filter(|x| x["numa_nodes"][0] == 0).count();
    assert_eq!(numa0, 2, "NUMA node 0 is shown: {}", d(2));
    assert_eq!(d(3)["capacity"], serde_json::json!([4, 4]));
    assert_eq!(d(3)["allocatable"], serde_json::json!([4, 3]));
    let given = d(4)["devices"].clone();
    assert_eq!(given.as_array().unwrap().len(), 2);
    assert!(!given.as_array().unwrap().contains(&serde_json::json!("GPU-1")), "the unhealthy device is not given");
    assert_eq!(d(4)["preferred"]["answer"], given);
    assert!(d(4)["allocation"]["cdi_devices"].as_array().unwrap().len() == 2);
    assert_eq!(d(4)["pre_start"], "ok");
    let listed: Vec<serde_json::Value> = d(5)["containers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["device_ids"].as_array().unwrap().clone())
        .collect();
    assert_eq!(serde_json::Value::Array(listed), given, "PodResources lists what Allocate gave");
    assert_eq!(d(6)["pod_devices_kept"], given);
    assert!(d(6)["reregistered_after_ms"].as_u64().is_some());
    assert_eq!(d(7)["dir_removed"], true);
    assert!(!Path::new(&dir_of(&lines)).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missed_deadline_fails_clearly_and_still_cleans_up() {
    let run = dpctl(&["demo", "--deadline", "0s", "-o", "json"]).await;
    run.expect_code(1);
    let lines = run.json_lines();
    let failed: Vec<&serde_json::Value> = lines.iter().filter(|l| l["ok"] == false).collect();
    assert_eq!(failed.len(), 1, "the demo stops at the first failure: {}", run.stdout);
    let error = failed[0]["error"].as_str().unwrap();
    assert!(error.contains("timed out") && error.contains("--deadline"), "{error}");
    assert!(run.stderr.contains(&format!("dpctl: error: demo step {}/8", failed[0]["step"])), "{}", run.stderr);
    let last = lines.last().unwrap();
    assert_eq!(last["name"], "cleanup");
    assert_eq!(last["ok"], true);
    assert!(!Path::new(&dir_of(&lines)).exists());
}

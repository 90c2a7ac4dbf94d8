//! The DRA manager's transitions, per release, without a socket: each
//! event the shell reports and the effects it must perform.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::tests::{DRV, claim, list, pod_claim};
use super::{ClaimAnswer, DraEffect, DraRegistration, Registered, Unpreparer};
use crate::kubelet_sim::dra_claims::{ContainerClaim, ExtendedClaim, RequestMapping};
use crate::kubelet_sim::manager::Manager;
use crate::kubelet_sim::pod::PodSpec;
use crate::kubelet_version::KubeletVersion;

fn manager(minor: u8) -> Manager {
    let grace = Duration::from_secs(300);
    Manager::new(KubeletVersion::Release(minor), grace, 1024, Default::default(), Instant::now())
}

fn registration(endpoint: &str, reg: &str, supported: &[&str]) -> DraRegistration {
    DraRegistration {
        driver: DRV.into(),
        endpoint: endpoint.into(),
        socket: PathBuf::from(endpoint),
        registration: PathBuf::from(reg),
        supported: list(supported),
    }
}

/// The effects as short words: an event's name, `write`, `wipe:<driver|all>:<reason>`,
/// `wipe-later:<driver>`, `health:<api>`.
fn words(effects: &[DraEffect]) -> Vec<String> {
    effects
        .iter()
        .map(|e| match e {
            DraEffect::Emit(kind) => serde_json::to_value(kind).unwrap()["event"].as_str().unwrap().to_string(),
            DraEffect::WriteState => "write".into(),
            DraEffect::Wipe { driver, reason } => format!("wipe:{}:{reason}", driver.as_deref().unwrap_or("all")),
            DraEffect::ScheduleWipe { driver, .. } => format!("wipe-later:{driver}"),
            DraEffect::StartHealth { api, .. } => format!("health:{}", api.advertised()),
        })
        .collect()
}

/// Registers `r` and reports its notification as delivered.
fn registered(m: &mut Manager, r: &DraRegistration) -> Vec<String> {
    let Registered::Added(inst) = m.dra_register(r) else { panic!("refused") };
    words(&m.dra_notified(r, &inst, true).1)
}

/// A pod `name` (UID `pod-<n>`) whose one container uses claim `c1`.
fn pod(name: &str, uid: &str) -> PodSpec {
    let mut p = PodSpec::shorthand(name, "ns", &[]);
    p.uid = Some(uid.into());
    p.resource_claims = vec![pod_claim("gpus", "c1")];
    p.containers[0].claims = vec![ContainerClaim { name: "gpus".into(), request: String::new() }];
    p.claim_objects = vec![claim("c1", "u1", &[("r", "d0")])];
    p
}

fn answer() -> Vec<ClaimAnswer> {
    vec![ClaimAnswer {
        uid: "u1".into(),
        devices: vec![super::tests::device("d0", &[], &["v/c=d0"])],
        error: String::new(),
    }]
}

/// Prepares `spec` fully (one batch answered); returns the CDI IDs per container.
fn prepare(m: &mut Manager, spec: &PodSpec) -> Result<Vec<String>, String> {
    let (begun, _) = m.dra_begin_prepare(spec);
    for b in begun? {
        m.dra_prepared(&b, answer())?;
    }
    Ok(m.dra_finish_prepare(spec).0.into_values().flatten().collect())
}

/// 1.34-1.37: a registration is published with the health stream the
/// release opens: none in 1.34-1.35, one from 1.36.
#[test]
fn registration_effects_and_health_stream_1_34_to_1_37() {
    for (minor, want) in [
        (34, vec!["dra_registered"]),
        (35, vec!["dra_registered"]),
        (36, vec!["health:v1alpha1.DRAResourceHealth", "dra_registered"]),
        (37, vec!["dra_registered"]),
    ] {
        let mut m = manager(minor);
        assert_eq!(registered(&mut m, &registration("/p/a.sock", "/r/a.sock", &["v1.DRAPlugin"])), want, "1.{minor}");
    }
}

/// The 1.36+ rule: a success notification that did not reach the driver
/// takes the instance out again and retries it; 1.34-1.35 keep it.
#[test]
fn an_undelivered_success_deregisters_from_1_36_not_1_34_1_35() {
    for (minor, kept) in [(34, true), (35, true), (36, false), (37, false)] {
        let mut m = manager(minor);
        let r = registration("/p/a.sock", "/r/a.sock", &["v1.DRAPlugin"]);
        let Registered::Added(inst) = m.dra_register(&r) else { panic!() };
        let (done, effects) = m.dra_notified(&r, &inst, false);
        assert_eq!(done, kept, "1.{minor}");
        assert_eq!(m.dra_plugin(DRV).is_ok(), kept, "1.{minor}");
        assert_eq!(effects.is_empty(), !kept, "1.{minor}");
    }
}

/// A refused validation is retried in every release; a refused
/// registration (an endpoint another socket holds) from 1.36 only.
#[test]
fn refused_registrations_are_retried_per_release_1_34_to_1_37() {
    for (minor, retried) in [(34, false), (35, false), (36, true), (37, true)] {
        let mut m = manager(minor);
        let Registered::Refused { retry, effects, message } = m.dra_register(&registration("/p/a", "/r/a", &[])) else {
            panic!()
        };
        assert!(retry && message.starts_with("RegisterPlugin error -- plugin validation failed with err: "));
        assert_eq!(words(&effects), ["dra_registration_rejected"]);
        registered(&mut m, &registration("/p/a", "/r/a", &["v1.DRAPlugin"]));
        let Registered::Refused { retry, message, .. } =
            m.dra_register(&registration("/p/a", "/r/b", &["v1.DRAPlugin"]))
        else {
            panic!()
        };
        assert_eq!(retry, retried, "1.{minor}");
        assert!(
            message.contains("endpoint /p/a already registered for DRA driver plugin gpu.example.com"),
            "{message}"
        );
    }
}

/// Socket removal in one step (1.34-1.37): the instance goes; the driver's
/// last one gone, its slices are wiped after the delay unless it registers
/// again in time; an unknown socket changes nothing.
#[test]
fn socket_removal_schedules_the_wipe_of_the_last_instance_1_34_to_1_37() {
    for minor in 34..=37 {
        let mut m = manager(minor);
        registered(&mut m, &registration("/p/a.sock", "/r/a.sock", &["v1.DRAPlugin"]));
        registered(&mut m, &registration("/p/b.sock", "/r/b.sock", &["v1.DRAPlugin"]));
        assert!(m.dra_socket_removed(Path::new("/r/unknown.sock")).is_empty());
        assert_eq!(words(&m.dra_socket_removed(Path::new("/r/a.sock"))), ["dra_deregistered"]);
        let effects = m.dra_socket_removed(Path::new("/r/b.sock"));
        assert_eq!(words(&effects), ["dra_deregistered", "wipe-later:gpu.example.com"], "1.{minor}");
        let DraEffect::ScheduleWipe { generation, .. } = &effects[1] else { panic!() };
        let generation = *generation;
        assert_eq!(words(&m.dra_wipe_timer(DRV, generation)), ["wipe:gpu.example.com:deregistered"]);
        registered(&mut m, &registration("/p/b.sock", "/r/b.sock", &["v1.DRAPlugin"]));
        assert!(m.dra_wipe_timer(DRV, generation).is_empty(), "back in time: no wipe");
    }
}

/// A restart (1.34-1.37) writes the old manager's claims, forgets every
/// driver, wipes the node's slices and prepares nothing: the restored claim
/// is prepared again by its next new user only.
#[test]
fn a_restart_prepares_nothing_and_a_new_user_prepares_again_1_34_to_1_37() {
    for (minor, ids) in [(34, 2), (36, 2), (37, 1)] {
        let mut m = manager(minor);
        registered(&mut m, &registration("/p/a.sock", "/r/a.sock", &["v1.DRAPlugin"]));
        prepare(&mut m, &pod("first", "pod-1")).unwrap();
        assert_eq!(words(&m.dra_restart()), ["write", "wipe:all:restart"]);
        assert_eq!(m.dra_plugin(DRV).unwrap_err(), "DRA driver gpu.example.com is not registered");
        assert_eq!(m.dra_restore(None), Ok(1));
        registered(&mut m, &registration("/p/a.sock", "/r/a.sock", &["v1.DRAPlugin"]));
        let (begun, effects) = m.dra_begin_prepare(&pod("second", "pod-2"));
        assert_eq!((begun.as_ref().map(Vec::len), words(&effects)), (Ok(1), vec!["write".to_string()]), "1.{minor}");
        m.dra_prepared(&begun.unwrap()[0], answer()).unwrap();
        let cdi = m.dra_finish_prepare(&pod("second", "pod-2")).0;
        assert_eq!(cdi["c0"].len(), ids, "1.{minor}: 1.34-1.36 append, 1.37 resets");
    }
}

/// `IsReservedForPod` (1.34-1.37): a claim without reservedFor is reserved
/// for no pod; nothing is cached or written.
#[test]
fn a_claim_without_reserved_for_is_refused_1_34_to_1_37() {
    for minor in 34..=37 {
        let mut m = manager(minor);
        registered(&mut m, &registration("/p/a.sock", "/r/a.sock", &["v1.DRAPlugin"]));
        let mut p = pod("first", "pod-1");
        p.claim_objects[0].reserved_for = None;
        let (begun, effects) = m.dra_begin_prepare(&p);
        assert_eq!(begun.unwrap_err(), "pod first (pod-1) is not allowed to use ResourceClaim c1 (u1)");
        assert!(effects.is_empty() && m.dra_status().claims.is_empty());
    }
}

/// 1.34-1.36 unprepare a claim for any pod whose spec names it when one
/// pod or none references it: a pod refused before preparing tears down
/// its one user's claim. 1.37 checks the pod's reference first.
#[test]
fn a_pod_that_never_used_a_claim_unprepares_it_1_34_to_1_36_not_1_37() {
    for (minor, torn_down) in [(34, true), (35, true), (36, true), (37, false)] {
        let mut m = manager(minor);
        registered(&mut m, &registration("/p/a.sock", "/r/a.sock", &["v1.DRAPlugin"]));
        prepare(&mut m, &pod("first", "pod-1")).unwrap();
        let mut intruder = pod("intruder", "pod-3");
        assert!(prepare(&mut m, &intruder).unwrap_err().contains("is not allowed to use ResourceClaim c1"));
        intruder.claim_objects.clear();
        let (batches, last) = m.dra_begin_unprepare("ns", "pod-3", Unpreparer::Deleted(&intruder.resource_claims));
        assert_eq!((batches.len(), last.len()), if torn_down { (1, 1) } else { (0, 0) }, "1.{minor}");
        assert_eq!(words(&m.dra_finish_unprepare("ns", &last)), ["write"]);
        assert_eq!(m.dra_status().claims.is_empty(), torn_down, "1.{minor}");
    }
}

/// 1.37 refuses a new user while the claim's last user is being
/// unprepared (and after that failed); 1.34-1.36 let it join, no call.
#[test]
fn a_claim_being_unprepared_refuses_new_users_in_1_37_only() {
    for (minor, refused) in [(34, false), (35, false), (36, false), (37, true)] {
        let mut m = manager(minor);
        registered(&mut m, &registration("/p/a.sock", "/r/a.sock", &["v1.DRAPlugin"]));
        let first = pod("first", "pod-1");
        prepare(&mut m, &first).unwrap();
        let (batches, _) = m.dra_begin_unprepare("ns", "pod-1", Unpreparer::Deleted(&first.resource_claims));
        assert_eq!(batches.len(), 1);
        // The call failed: nothing is finished.
        let (begun, _) = m.dra_begin_prepare(&pod("second", "pod-2"));
        if refused {
            assert_eq!(begun.unwrap_err(), "ResourceClaim c1 is being unprepared", "1.{minor}");
        } else {
            assert_eq!(begun.unwrap(), [], "1.{minor}: prepared already, no call");
        }
        assert_eq!(m.dra_status().claims[0].unpreparing, refused);
    }
}

/// 1.37: a deleted pod's claims come from the cache first; the reconcile
/// loop (a pod known only from the checkpoint) unprepares the cache's in
/// every release.
#[test]
fn the_reconcile_loop_unprepares_the_cached_claims_1_34_and_1_37() {
    for minor in [34, 37] {
        let mut m = manager(minor);
        registered(&mut m, &registration("/p/a.sock", "/r/a.sock", &["v1.DRAPlugin"]));
        prepare(&mut m, &pod("first", "pod-1")).unwrap();
        assert!(m.dra_holds("pod-1") && !m.dra_holds("pod-2"));
        let (batches, last) = m.dra_begin_unprepare("ns", "pod-1", Unpreparer::Gone);
        assert_eq!((batches.len(), last), (1, vec!["c1".to_string()]), "1.{minor}");
    }
}

/// KEP-5004: 1.34-1.35 ignore the extended-resource claim (the device
/// manager handles the resource); 1.36+ add it and map the container.
#[test]
fn the_extended_resource_claim_is_mapped_from_1_36() {
    for (minor, mapped) in [(35, false), (36, true), (37, true)] {
        let m = manager(minor);
        let mut spec = PodSpec::shorthand("ext", "ns", &[("example.com/gpu".into(), 1)]);
        spec.extended_claim = Some(ExtendedClaim {
            resource_claim_name: "ext-claim".into(),
            request_mappings: vec![RequestMapping {
                container_name: "c0".into(),
                resource_name: "example.com/gpu".into(),
                request_name: "container-0-request-0".into(),
            }],
        });
        m.dra_map_extended_claim(&mut spec);
        assert_eq!(spec.resource_claims.len(), usize::from(mapped), "1.{minor}");
        assert_eq!(spec.containers[0].limits.is_empty(), mapped, "1.{minor}");
        assert_eq!(spec.containers[0].claims.len(), usize::from(mapped), "1.{minor}");
    }
}

/// Health messages publish only the devices whose health changed (1.36+).
#[test]
fn health_messages_publish_changes_only_1_36() {
    let mut m = manager(36);
    let dev = |h: &str| super::DeviceHealthView {
        driver: String::new(),
        pool: "p".into(),
        device: "d0".into(),
        health: h.into(),
        message: String::new(),
    };
    assert_eq!(words(&m.dra_health(DRV, vec![dev("Healthy")])), ["dra_device_health"]);
    assert!(m.dra_health(DRV, vec![dev("Healthy")]).is_empty());
    assert_eq!(words(&m.dra_started()), ["wipe:all:start"]);
}

//! The checks themselves: each asks the plugin what a kubelet would ask and
//! compares the answer with the rule in [`CheckId::rule`]. Contract rules that
//! other commands share live in [`crate::contract`].

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;

use super::probe::{Ended, Probe, said};
use super::{CheckId, Finding};
use crate::contract;
use crate::error::Error;
use crate::proto::deviceplugin::v1beta1 as dp;
use crate::text::{count, fmt_duration};

/// Most devices offered in one GetPreferredAllocation request.
const PREFERRED_MAX_AVAILABLE: usize = 128;

/// Runs one check.
pub(super) async fn run(id: CheckId, p: &mut Probe<'_>) -> Finding {
    match id {
        CheckId::OptionsAnswer => options_answer(p).await,
        CheckId::ListFirstMessagePrompt => list_first_message_prompt(p).await,
        CheckId::DeviceIdsValid => snapshot_rules(p, id).await,
        CheckId::HealthValues => snapshot_rules(p, id).await,
        CheckId::NumaIdsValid => snapshot_rules(p, id).await,
        CheckId::MessageSize => message_size(p).await,
        CheckId::AllocateHealthy => allocate_healthy(p).await,
        CheckId::AllocateUnknownId => allocate_unknown_id(p).await,
        CheckId::DistinctDevices => distinct_devices(p).await,
        CheckId::PreferredContract => preferred_contract(p).await,
        CheckId::PreferredNotAdvertised => preferred_not_advertised(p).await,
        CheckId::PrestartDeadline => prestart_deadline(p).await,
        CheckId::ParallelCalls => parallel_calls(p).await,
        CheckId::ListStreamStaysOpen => list_stream_stays_open(p).await,
    }
}

async fn options_answer(p: &mut Probe<'_>) -> Finding {
    let f = p.options().await;
    match f.result {
        Ok(o) => {
            let note = p.target.registration.as_ref().and_then(|r| register_options_note(r, &o));
            let note = note.map(|n| format!("; note: {n}")).unwrap_or_default();
            Finding::pass(format!("answered in {}: {}{note}", fmt_duration(f.took), options_text(&o)))
        }
        Err(e) => {
            let hint = if e.contains("answered Unimplemented") {
                "; this socket does not serve v1beta1.DevicePlugin: is it the plugin's socket (not kubelet.sock), \
                 and does the plugin speak device plugin API v1beta1?"
            } else {
                ""
            };
            Finding::fail(format!("GetDevicePluginOptions failed after {}: {e}{hint}", fmt_duration(f.took)))
        }
    }
}

fn options_text(o: &dp::DevicePluginOptions) -> String {
    format!(
        "pre_start_required={}, get_preferred_allocation_available={}",
        o.pre_start_required, o.get_preferred_allocation_available
    )
}

/// What differs between the options a plugin registered with and its
/// GetDevicePluginOptions answer, as a note: every kubelet 1.26+ ignores
/// RegisterRequest.options (`Register` in
/// pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go reads only the
/// version, name and endpoint) and acts on the answer alone, so a plugin
/// whose two answers differ works on every node; the note says what the
/// kubelet will do, in case the plugin expects otherwise.
fn register_options_note(reg: &super::Registration, answered: &dp::DevicePluginOptions) -> Option<String> {
    let sent = reg.options?;
    let mut diffs = Vec::new();
    if sent.pre_start_required != answered.pre_start_required {
        diffs.push(format!(
            "pre_start_required is {} in {} but {} here, so the kubelet {}",
            sent.pre_start_required,
            reg.source,
            answered.pre_start_required,
            if answered.pre_start_required {
                "calls PreStartContainer on every container start"
            } else {
                "never calls PreStartContainer"
            }
        ));
    }
    if sent.get_preferred_allocation_available != answered.get_preferred_allocation_available {
        diffs.push(format!(
            "get_preferred_allocation_available is {} in {} but {} here, so the kubelet {}",
            sent.get_preferred_allocation_available,
            reg.source,
            answered.get_preferred_allocation_available,
            if answered.get_preferred_allocation_available {
                "calls GetPreferredAllocation at admission whenever devices are still needed after init-container reuse"
            } else {
                "never calls GetPreferredAllocation"
            }
        ));
    }
    if diffs.is_empty() {
        return None;
    }
    Some(format!(
        "{}; every kubelet 1.26+ ignores RegisterRequest.options and acts on GetDevicePluginOptions alone, so this \
         works, but the plugin should not expect the calls its RegisterRequest asked for",
        diffs.join("; ")
    ))
}

async fn list_first_message_prompt(p: &mut Probe<'_>) -> Finding {
    match p.first_message().await {
        Ok(f) => Finding::pass(format!(
            "first message after {} (deadline {}): {}, {} bytes",
            fmt_duration(f.after),
            fmt_duration(p.opts.first_message_timeout),
            count(f.snapshot.devices.len() as u64, "device", "devices"),
            grouped(f.snapshot.encoded_len)
        )),
        Err(e) => Finding::fail(e),
    }
}

/// device-ids-valid, health-values and numa-ids-valid: the snapshot rules of
/// [`contract::check_snapshot`] that belong to the check, judged on EVERY
/// ListAndWatch message of the window (from the stream's opening to the
/// stream window after its first message, or its end), not on the first
/// alone. A rule with nothing to judge (no device listed; for NUMA, no
/// device with topology) is skipped with the reason, never passed.
async fn snapshot_rules(p: &mut Probe<'_>, id: CheckId) -> Finding {
    let opened = p.opened();
    let first = match p.first_message().await {
        Ok(f) => f,
        Err(e) => return Finding::error(format!("no device list to check: {e}")),
    };
    let window = p.opts.stream_window;
    let mut rx = p.stream();
    let until = opened + first.after + window;
    let _ = tokio::time::timeout_at(until, rx.wait_for(|s| s.ended.is_some())).await;
    let judged = rx.borrow().judged.clone();
    let rules: &[&str] = match id {
        CheckId::DeviceIdsValid => &["device-id-non-empty", "device-id-unique"],
        CheckId::HealthValues => &["health-value"],
        _ => &["numa-non-negative", "topology-not-empty"],
    };
    let messages = count(judged.messages as u64, "ListAndWatch message", "ListAndWatch messages");
    let within = format!("{messages} in the window (first message + {})", fmt_duration(window));
    // The size rule has its own check (with the margin), so it is not judged here.
    // One part per message that first broke a rule: `message #2: what; what (in 3 messages)`.
    let mut broken: Vec<String> = Vec::new();
    let mut last = 0;
    for b in judged.broken.iter().filter(|b| rules.contains(&b.rule)) {
        let also = if b.messages > 1 { format!(" (in {} messages)", b.messages) } else { String::new() };
        match broken.last_mut() {
            Some(part) if b.first == last => part.push_str(&format!("; {}{also}", b.evidence)),
            _ => broken.push(format!("message #{}: {}{also}", b.first, b.evidence)),
        }
        last = b.first;
    }
    if !broken.is_empty() {
        return Finding::fail(format!("{}; judged {within}", broken.join("; ")));
    }
    if judged.listing == 0 {
        return Finding::skip(format!("no message listed a device ({within}, all empty): nothing to judge"));
    }
    let listing = format!("{} of {within} listed devices", judged.listing);
    match id {
        CheckId::DeviceIdsValid => {
            Finding::pass(format!("{listing} (at most {}), all IDs non-empty and unique", judged.most))
        }
        CheckId::HealthValues => {
            let (healthy, unhealthy) = judged.last_health;
            Finding::pass(format!(
                "{listing}, every health Healthy or Unhealthy; the last: {healthy} Healthy, {unhealthy} Unhealthy"
            ))
        }
        _ if judged.with_topology == 0 => Finding::skip(format!(
            "no device reports NUMA topology ({listing}): nothing to judge; the Topology Manager gets no hint from this \
             plugin"
        )),
        _ => Finding::pass(format!(
            "NUMA nodes {} on every device with topology; {listing}, none negative or empty",
            crate::text::ranges(&judged.numa_nodes.iter().copied().collect::<Vec<_>>())
        )),
    }
}

async fn message_size(p: &mut Probe<'_>) -> Finding {
    let limit = p.target.max_message_bytes;
    let first = p.first_message().await;
    let rx = p.stream();
    let (largest, messages, ended) = {
        let s = rx.borrow();
        (s.largest, s.messages, s.ended.clone())
    };
    if let Some(Ended { too_large: Some(size), how, .. }) = ended {
        let size = size.map_or_else(|| "a message".to_string(), |s| format!("a message of {} bytes", grouped(s)));
        return Finding::fail(format!("{size} was over even dpctl's own receive limit, so the stream ended: {how}"));
    }
    let Some((seq, bytes)) = largest else {
        return Finding::error(match first {
            Err(e) => format!("no ListAndWatch message to measure: {e}"),
            Ok(_) => "no ListAndWatch message to measure".to_string(),
        });
    };
    let pct = |n: usize| percent(n, limit);
    let which =
        if messages == 1 { "the only message so far".to_string() } else { format!("message #{seq} of {messages}") };
    if bytes <= limit {
        let margin = limit - bytes;
        Finding::pass(format!(
            "largest message {} bytes ({which}); margin {} bytes ({}) under the {}-byte limit",
            grouped(bytes),
            grouped(margin),
            pct(margin),
            grouped(limit)
        ))
    } else {
        let over = bytes - limit;
        Finding::fail(format!(
            "ListAndWatch message of {} bytes ({which}) is {} bytes ({}) over the kubelet's {}-byte limit: \
             the kubelet would fail with \"received message larger than max ({bytes} vs. {limit})\"",
            grouped(bytes),
            grouped(over),
            pct(over),
            grouped(limit)
        ))
    }
}

async fn allocate_healthy(p: &mut Probe<'_>) -> Finding {
    let healthy = match p.healthy().await {
        Ok(h) => h,
        Err(e) => return Finding::error(e),
    };
    let Some(first) = healthy.first().cloned() else {
        return Finding::skip("no healthy devices advertised; the kubelet never allocates unhealthy ones");
    };
    let mut shapes = vec![vec![vec![first.clone()]]];
    if let Some(second) = healthy.get(1) {
        shapes.push(vec![vec![first.clone()], vec![second.clone()]]);
    }
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for (i, groups) in shapes.iter().enumerate() {
        let what = format!("Allocate {}", describe_groups(groups));
        match p.client.allocate(groups).await {
            Err(e) => bad.push(format!("{what} failed: {}", said(&e))),
            // docs/protocol.md §3.7 (1.26 to master): the kubelet sends one
            // container per Allocate, rejects an answer with no container
            // response and reads only the first.
            Ok(resp) if i == 0 => {
                let n = resp.container_responses.len();
                p.allocate_ok = Some(contract::kubelet_rejects_allocate(&resp).is_none());
                match contract::kubelet_rejects_allocate(&resp) {
                    Some(v) => bad.push(format!("{what}: {}", v.evidence)),
                    None if n == 1 => good.push(format!("{what}: 1 response")),
                    None => good.push(format!(
                        "{what}: {n} responses (the kubelet reads only the first and ignores the other {})",
                        n - 1
                    )),
                }
            }
            // Two containers in one call: the API allows it but no kubelet
            // sends it, so a count mismatch is reported, never failed.
            Ok(resp) => {
                let v = contract::check_allocate(groups.len(), &resp);
                if v.is_empty() {
                    good.push(format!(
                        "{what}: {}",
                        count(resp.container_responses.len() as u64, "response", "responses")
                    ));
                } else {
                    good.extend(v.into_iter().map(|v| {
                        format!(
                            "{what}: {} (not a failure: the kubelet never sends two containers in one call)",
                            v.evidence
                        )
                    }));
                }
            }
        }
    }
    p.allocate_ok.get_or_insert(false);
    p.allocated = Some(vec![first]);
    if bad.is_empty() {
        let note = if shapes.len() == 1 { " (only one healthy device: two containers not tried)" } else { "" };
        Finding::pass(format!("{}{note}", good.join("; ")))
    } else {
        Finding::fail(bad.join("; "))
    }
}

fn describe_groups(groups: &[Vec<String>]) -> String {
    let n = groups.len();
    let parts: Vec<String> = groups.iter().map(|g| format!("[{}]", g.join(","))).collect();
    format!("{n} container{} {}", if n == 1 { "" } else { "s" }, parts.join(" "))
}

/// Two Allocate calls, one container each, for two different healthy
/// devices: the answers must tell the devices apart
/// ([`contract::distinct_devices`]). The evidence shows both requests and
/// both answers.
async fn distinct_devices(p: &mut Probe<'_>) -> Finding {
    let healthy = match p.healthy().await {
        Ok(h) => h,
        Err(e) => return Finding::error(e),
    };
    let [a, b, ..] = healthy.as_slice() else {
        return Finding::skip(format!(
            "{} advertised: two containers cannot get different devices, nothing to judge",
            count(healthy.len() as u64, "healthy device", "healthy devices")
        ));
    };
    let mut contents = Vec::new();
    for id in [a, b] {
        match p.client.allocate(&[vec![id.clone()]]).await {
            Ok(resp) => match resp.container_responses.first() {
                Some(c) => contents.push(contract::device_content(c)),
                None => {
                    return Finding::skip(format!(
                        "Allocate [{id}] answered no container response (allocate-healthy judges that): nothing to compare"
                    ));
                }
            },
            Err(e) => {
                return Finding::skip(format!(
                    "Allocate [{id}] failed (allocate-healthy judges that): {}; nothing to compare",
                    said(&e)
                ));
            }
        }
    }
    let shown =
        |c: &[String]| if c.is_empty() { "nothing".to_string() } else { crate::text::shorten(&c.join(", "), 300) };
    let seen =
        format!("Allocate [{a}] answered {}; Allocate [{b}] answered {}", shown(&contents[0]), shown(&contents[1]));
    match contract::distinct_devices(a, &contents[0], b, &contents[1]) {
        contract::Distinct::Distinct => Finding::pass(format!("{seen}: each container gets its own device")),
        contract::Distinct::Same(why) => Finding::fail(format!("{why}: both containers would use one device; {seen}")),
        contract::Distinct::NothingToJudge => Finding::skip(format!(
            "{seen}: no env, CDI device, device node or mount in either answer, so nothing tells the devices apart \
             (nothing to judge)"
        )),
    }
}

async fn allocate_unknown_id(p: &mut Probe<'_>) -> Finding {
    let known: HashSet<String> = match p.first_message().await {
        Ok(f) => f.snapshot.devices.iter().map(|d| d.id.clone()).collect(),
        Err(_) => HashSet::new(),
    };
    let mut id = format!("dpctl-check-unknown-{:08x}", rand::random::<u32>());
    while known.contains(&id) {
        id = format!("dpctl-check-unknown-{:08x}", rand::random::<u32>());
    }
    let t = Instant::now();
    let answer = p.client.allocate(&[vec![id.clone()]]).await;
    // Unavailable is both a status a plugin may send on purpose and what a
    // dropped connection reads as: only a plugin that no longer answers crashed.
    let crashed =
        matches!(&answer, Err(Error::Rpc { code: tonic::Code::Unavailable, .. })) && p.client.options().await.is_err();
    match answer {
        Ok(resp) => Finding::fail(format!(
            "Allocate of {id}, which the plugin never advertised, succeeded with {}",
            crate::text::count(resp.container_responses.len(), "container response", "container responses")
        )),
        Err(Error::DeadlineExceeded { timeout, .. }) => Finding::fail(format!(
            "Allocate of {id}, which the plugin never advertised, got no answer within {}: a kubelet would wait \
             forever",
            fmt_duration(timeout)
        )),
        Err(Error::Rpc { code: tonic::Code::Unavailable, message, .. }) if crashed => Finding::fail(format!(
            "Allocate of {id} broke the connection (Unavailable: {message}) and GetDevicePluginOptions gets no \
             answer since: did the plugin crash?"
        )),
        Err(Error::Rpc { code, message, .. }) => {
            let refused = format!("refused in {} with {code:?}: {message}", fmt_duration(t.elapsed()));
            // A plugin that refuses every Allocate refuses unknown IDs too; that
            // says nothing, so the refusal counts only next to a healthy Allocate
            // that works (allocate-healthy's, or one made here when it did not run).
            let healthy = match p.healthy().await {
                Ok(h) => h,
                Err(e) => return Finding::skip(format!("{refused}, but {e}, so no healthy Allocate to compare with")),
            };
            let Some(d) = healthy.first() else {
                return Finding::skip(format!(
                    "{refused}, but the plugin advertises no healthy device, so whether it refuses only unknown \
                     IDs cannot be told"
                ));
            };
            if p.allocate_ok.is_none() {
                let r = p.client.allocate(&[vec![d.clone()]]).await;
                p.allocate_ok = Some(r.is_ok_and(|resp| contract::kubelet_rejects_allocate(&resp).is_none()));
            }
            if p.allocate_ok == Some(true) {
                Finding::pass(format!("{refused}; an Allocate of the healthy {d} works"))
            } else {
                Finding::skip(format!(
                    "{refused}, but an Allocate of the healthy {d} fails as well (see allocate-healthy), so the \
                     refusal says nothing about unknown IDs"
                ))
            }
        }
        Err(Error::Unimplemented { message, .. }) => Finding::error(format!(
            "Allocate is not implemented at all (Unimplemented: {message}), so refusing unknown IDs cannot be told \
             apart; see allocate-healthy"
        )),
        Err(e) => Finding::error(format!("Allocate of {id} could not be made: {}", said(&e))),
    }
}

/// The GetPreferredAllocation requests tried, with a description of each.
fn preferred_shapes(healthy: &[String]) -> Vec<(String, dp::ContainerPreferredAllocationRequest)> {
    let h = &healthy[..healthy.len().min(PREFERRED_MAX_AVAILABLE)];
    let n = h.len();
    let req = |avail: &[String], must: &[String], size: usize| dp::ContainerPreferredAllocationRequest {
        available_device_i_ds: avail.to_vec(),
        must_include_device_i_ds: must.to_vec(),
        allocation_size: i32::try_from(size).unwrap_or(i32::MAX),
    };
    let mut out = Vec::new();
    if n == 0 {
        return out;
    }
    out.push((format!("size 1 of {n} available"), req(h, &[], 1)));
    if n >= 2 {
        let must = [h[n - 1].clone()];
        out.push((format!("size 2 of {n} available, must include {}", must[0]), req(h, &must, 2)));
        let must = [h[n - 1].clone(), h[0].clone()];
        out.push((format!("size {n} of {n} available (forced), must include {}", must.join(",")), req(h, &must, n)));
    }
    if n >= 3 {
        let subset = &h[n / 2..];
        out.push((format!("size 1 of the subset {}", subset.join(",")), req(subset, &[], 1)));
    }
    out
}

async fn preferred_contract(p: &mut Probe<'_>) -> Finding {
    let options = match p.options_or_why().await {
        Ok(o) => o,
        Err(e) => return Finding::error(e),
    };
    if !options.get_preferred_allocation_available {
        return Finding::skip(
            "not advertised (get_preferred_allocation_available=false): the kubelet never calls it; \
             see preferred-not-advertised",
        );
    }
    let healthy = match p.healthy().await {
        Ok(h) => h,
        Err(e) => return Finding::error(e),
    };
    let shapes = preferred_shapes(&healthy);
    if shapes.is_empty() {
        return Finding::skip("no healthy devices to offer; the kubelet only offers healthy ones");
    }
    let mut bad = Vec::new();
    let mut extra = 0usize;
    for (what, req) in &shapes {
        match p.client.preferred(vec![req.clone()]).await {
            Err(e) => bad.push(format!(
                "{what}: {} (the kubelet fails the admission: \"device plugin GetPreferredAllocation rpc failed \
                 with err: ...\")",
                said(&e)
            )),
            Ok(resp) => {
                let answer = contract::preferred_answer(&resp);
                let mut v = contract::check_preferred_response(req, &resp);
                // docs/protocol.md §3.6: the kubelet reads only container_responses[0],
                // so responses after it are ignored, not a failure.
                if resp.container_responses.len() > 1 {
                    extra += 1;
                    v.retain(|x| x.rule != "preferred-one-response-per-container");
                }
                if !v.is_empty() {
                    let broken: Vec<String> = v.iter().map(|x| format!("{}: {}", x.rule, x.evidence)).collect();
                    bad.push(format!("{what}: answered [{}]: {}", answer.join(","), broken.join("; ")));
                }
            }
        }
    }
    if bad.is_empty() {
        let capped = if healthy.len() > PREFERRED_MAX_AVAILABLE {
            format!(" (offering the first {PREFERRED_MAX_AVAILABLE} healthy devices)")
        } else {
            String::new()
        };
        let names: Vec<&str> = shapes.iter().map(|(w, _)| w.as_str()).collect();
        let note = if extra > 0 {
            let (n, verb) = (count(extra as u64, "answer", "answers"), if extra == 1 { "holds" } else { "held" });
            format!(" ({n} {verb} more than one container response; the kubelet reads only the first)")
        } else {
            String::new()
        };
        Finding::pass(format!(
            "{} answered by the contract{capped}: {}{note}",
            count(shapes.len() as u64, "request", "requests"),
            names.join("; ")
        ))
    } else {
        Finding::fail(bad.join("; "))
    }
}

async fn preferred_not_advertised(p: &mut Probe<'_>) -> Finding {
    let options = match p.options_or_why().await {
        Ok(o) => o,
        Err(e) => return Finding::error(e),
    };
    if options.get_preferred_allocation_available {
        return Finding::skip(
            "advertised (get_preferred_allocation_available=true): preferred-contract checks the answers",
        );
    }
    if !p.opts.probe_unadvertised {
        return Finding::skip(
            "not advertised (get_preferred_allocation_available=false): the kubelet never calls it, so dpctl \
             does not either (--probe-unadvertised asks anyway)",
        );
    }
    // Asked for: ask anyway, to tell the user whether the flag was perhaps forgotten.
    let healthy = p.healthy().await.unwrap_or_default();
    let Some((_, req)) = preferred_shapes(&healthy).into_iter().next() else {
        return Finding::skip("not advertised (get_preferred_allocation_available=false): the kubelet never calls it");
    };
    let said = match p.client.preferred(vec![req.clone()]).await {
        Ok(resp) => {
            let answer = contract::preferred_answer(&resp);
            format!(
                "yet the plugin answers it ([{}]): set get_preferred_allocation_available=true if the kubelet \
                 should use it",
                answer.join(",")
            )
        }
        Err(Error::Unimplemented { .. }) => "and the plugin does not implement it".to_string(),
        Err(e) => format!("(asked anyway: {})", said(&e)),
    };
    Finding::skip(format!(
        "not advertised (get_preferred_allocation_available=false): the kubelet never calls it, {said}"
    ))
}

async fn prestart_deadline(p: &mut Probe<'_>) -> Finding {
    let options = match p.options_or_why().await {
        Ok(o) => o,
        Err(e) => return Finding::error(e),
    };
    if !options.pre_start_required {
        return Finding::skip("not required (pre_start_required=false): the kubelet never calls PreStartContainer");
    }
    let devices = match p.allocated.clone() {
        Some(d) => d,
        None => match p.healthy().await {
            Ok(h) => h.into_iter().take(1).collect(),
            Err(e) => return Finding::error(e),
        },
    };
    if devices.is_empty() {
        return Finding::skip(
            "no healthy devices advertised: no container would start with this plugin's devices, so the kubelet \
             would not call PreStartContainer",
        );
    }
    let deadline = p.opts.prestart_timeout;
    let client = p.client_with(deadline);
    let t = Instant::now();
    let answer = client.pre_start(devices.clone()).await;
    p.prestart_ok = Some(answer.is_ok());
    match answer {
        Ok(_) => Finding::pass(format!(
            "answered in {} for [{}] (deadline {})",
            fmt_duration(t.elapsed()),
            devices.join(","),
            fmt_duration(deadline)
        )),
        Err(Error::DeadlineExceeded { .. }) => Finding::fail(format!(
            "no answer within {} for [{}]: the kubelet gives up and the container fails to start",
            fmt_duration(deadline),
            devices.join(",")
        )),
        Err(e) => Finding::fail(format!(
            "PreStartContainer for [{}] failed: {}; the kubelet fails the container start (\"device plugin \
             PreStartContainer rpc failed with err: ...\")",
            devices.join(","),
            said(&e)
        )),
    }
}

type Call = Pin<Box<dyn Future<Output = (&'static str, Result<(), String>)> + Send>>;

/// A kind of call `parallel-calls` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Options,
    Allocate,
    PreStart,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Options => "GetDevicePluginOptions",
            Kind::Allocate => "Allocate",
            Kind::PreStart => "PreStartContainer",
        }
    }
}

/// Which calls work when made alone; only those are made concurrently, so
/// that a failure here is about concurrency, not a repeat of another check.
async fn working_alone(p: &mut Probe<'_>, healthy: &[String]) -> (Vec<Kind>, Vec<Kind>) {
    let options = p.options().await.result.ok();
    let mut works = Vec::new();
    let mut broken = Vec::new();
    if options.is_some() {
        works.push(Kind::Options);
    } else {
        broken.push(Kind::Options);
    }
    if let Some(d) = healthy.first() {
        if p.allocate_ok.is_none() {
            let r = p.client.allocate(&[vec![d.clone()]]).await;
            p.allocate_ok = Some(r.is_ok_and(|resp| contract::kubelet_rejects_allocate(&resp).is_none()));
        }
        if p.allocate_ok == Some(true) {
            works.push(Kind::Allocate)
        } else {
            broken.push(Kind::Allocate)
        }
        if options.is_some_and(|o| o.pre_start_required) {
            if p.prestart_ok.is_none() {
                p.prestart_ok = Some(p.client.pre_start(vec![d.clone()]).await.is_ok());
            }
            if p.prestart_ok == Some(true) { works.push(Kind::PreStart) } else { broken.push(Kind::PreStart) }
        }
    }
    (works, broken)
}

/// How long parallel-calls waits for a stream end caused by its second stream.
const STREAM_END_GRACE: Duration = Duration::from_millis(300);

// long: one scenario (each call alone, then all at once beside a second ListAndWatch, then the
// wait for a stream end) whose evidence compares its phases.
async fn parallel_calls(p: &mut Probe<'_>) -> Finding {
    let healthy = p.healthy().await.unwrap_or_default();
    let listing = p.first_message().await.is_ok();
    let (kinds, broken) = working_alone(p, &healthy).await;
    if kinds.is_empty() && !listing {
        return Finding::error(
            "no call works even when made alone (see options-answer, list-first-message-prompt), so there is no \
             concurrency to test",
        );
    }
    let mut rx = p.stream();
    let ended_before = rx.borrow_and_update().ended.is_some();
    let mut calls: Vec<Call> = Vec::new();
    for i in 0..if kinds.is_empty() { 0 } else { p.opts.parallel.max(1) } {
        let c = p.client.clone();
        let device = healthy.get(i % healthy.len().max(1)).cloned().unwrap_or_default();
        let call: Call = match kinds[i % kinds.len()] {
            Kind::Options => {
                Box::pin(async move { ("GetDevicePluginOptions", c.options().await.map(|_| ()).map_err(|e| said(&e))) })
            }
            Kind::PreStart => Box::pin(async move {
                ("PreStartContainer", c.pre_start(vec![device]).await.map(|_| ()).map_err(|e| said(&e)))
            }),
            Kind::Allocate => Box::pin(async move {
                let r = c
                    .allocate(&[vec![device]])
                    .await
                    .map_err(|e| said(&e))
                    .and_then(|resp| contract::kubelet_rejects_allocate(&resp).map_or(Ok(()), |v| Err(v.evidence)));
                ("Allocate", r)
            }),
        };
        calls.push(call);
    }
    if listing {
        let second = p.stream_client();
        let first_limit = p.opts.first_message_timeout;
        calls.push(Box::pin(async move {
            ("ListAndWatch", second.list_once(first_limit).await.map(|_| ()).map_err(|e| said(&e)))
        }));
    }
    let left_out = if broken.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = broken.iter().map(|k| k.name()).collect();
        format!("; left out, as it fails even alone: {}", names.join(", "))
    };
    let t = Instant::now();
    let results = futures_util::future::join_all(calls).await;
    let took = t.elapsed();
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    let mut bad = Vec::new();
    for (what, r) in &results {
        *counts.entry(what).or_default() += 1;
        if let Err(e) = r {
            bad.push(format!("{what}: {e}"));
        }
    }
    let made: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    if listing && !ended_before {
        // A plugin that ends the first stream when a second one opens does so
        // at once, but the end reaches this client a moment later: wait for it
        // (briefly) rather than miss it.
        let _ = tokio::time::timeout(STREAM_END_GRACE, rx.wait_for(|s| s.ended.is_some())).await;
    }
    let ended_now = rx.borrow().ended.clone();
    let stream_note = match (&ended_now, ended_before) {
        (Some(e), false) => {
            bad.push(format!("the open ListAndWatch stream ended during the calls: {}", e.how));
            String::new()
        }
        (Some(_), true) => "; the first ListAndWatch stream had already ended (see list-stream-stays-open)".into(),
        (None, _) => "; the first ListAndWatch stream is still open".into(),
    };
    if bad.is_empty() {
        Finding::pass(format!(
            "{} concurrent calls ({}) all succeeded in {}{stream_note}{left_out}",
            results.len(),
            made.join(", "),
            fmt_duration(took)
        ))
    } else {
        let n = bad.len();
        let shown: Vec<String> = bad.into_iter().take(5).collect();
        let more = if n > 5 { format!(" and {} more", n - 5) } else { String::new() };
        Finding::fail(format!(
            "{n} of {} concurrent calls ({}) went wrong: {}{more}{left_out}",
            results.len(),
            made.join(", "),
            shown.join("; ")
        ))
    }
}

async fn list_stream_stays_open(p: &mut Probe<'_>) -> Finding {
    let opened = p.opened();
    let first = p.first_message().await;
    let mut rx = p.stream();
    let window = p.opts.stream_window;
    let first = match first {
        Ok(f) => f,
        Err(e) => {
            return if rx.borrow().ended.is_some() {
                Finding::fail(e)
            } else {
                Finding::error(format!("no first message, so the stream's life is not measured: {e}"))
            };
        }
    };
    let first_at = opened + first.after;
    let until = first_at + window;
    let _ = tokio::time::timeout_at(until, rx.wait_for(|s| s.ended.is_some())).await;
    let (ended, messages) = {
        let s = rx.borrow();
        (s.ended.clone(), s.messages)
    };
    match ended {
        Some(e) => Finding::fail(format!(
            "the stream ended {} after the first message: {} ({} received)",
            fmt_duration(e.at.saturating_duration_since(first_at)),
            e.how,
            count(messages as u64, "message", "messages")
        )),
        None => Finding::pass(format!(
            "open for {} after the first message, through the other checks (window {}); {} received",
            fmt_duration(round_ms(first_at.elapsed())),
            fmt_duration(window),
            count(messages as u64, "message", "messages")
        )),
    }
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(crate::text::millis(d))
}

/// `part` as a percentage of `whole` with two decimals, never rounded up to
/// 100% or down to 0% when it is not exactly that.
fn percent(part: usize, whole: usize) -> String {
    let p = part as f64 * 100.0 / whole.max(1) as f64;
    if part < whole && p >= 99.995 {
        ">99.99%".into()
    } else if part > 0 && p < 0.005 {
        "<0.01%".into()
    } else {
        format!("{p:.2}%")
    }
}

/// `4194304` as `4,194,304`.
pub(crate) fn grouped(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(4194304), "4,194,304");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(percent(94, 4_194_304), "<0.01%");
        assert_eq!(percent(4_194_210, 4_194_304), ">99.99%");
        assert_eq!(percent(1, 4), "25.00%");
    }

    #[test]
    fn preferred_shapes_need_devices() {
        let ids = |n: usize| (0..n).map(|i| format!("d{i}")).collect::<Vec<_>>();
        assert!(preferred_shapes(&[]).is_empty());
        assert_eq!(preferred_shapes(&ids(1)).len(), 1);
        let four = preferred_shapes(&ids(4));
        assert_eq!(four.len(), 4);
        // must_include never sits at the front of available, so echoing the first IDs is caught.
        assert_eq!(four[1].1.must_include_device_i_ds, ["d3"]);
        assert_eq!(four[3].1.available_device_i_ds, ["d2", "d3"]);
        assert_eq!(preferred_shapes(&ids(500))[0].1.available_device_i_ds.len(), PREFERRED_MAX_AVAILABLE);
    }
}

//! Changes over time: the config's timeline (set health, add or remove
//! devices at fixed offsets from start) and flapping devices (toggled every
//! period; all devices of one flap entry change in one message).

use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::duration::after;

use super::config::{FlapConfig, TimelineStep};
use super::state::Resource;

/// Runs the timeline and flaps of `res` until `stop` turns true.
pub async fn drive(
    res: Arc<Resource>,
    flaps: Vec<FlapConfig>,
    mut timeline: Vec<TimelineStep>,
    start: Instant,
    mut stop: watch::Receiver<bool>,
) {
    timeline.sort_by_key(|s| s.at);
    let mut steps = timeline.into_iter().peekable();
    let mut next_flap: Vec<Instant> = flaps.iter().map(|f| after(start, f.every)).collect();
    loop {
        let next_step = steps.peek().map(|s| after(start, s.at));
        let next = next_flap.iter().copied().chain(next_step).min();
        let Some(next) = next else { return };
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            () = tokio::time::sleep_until(next) => {}
        }
        let now = Instant::now();
        while let Some(step) = steps.next_if(|s| after(start, s.at) <= now) {
            let result = if let Some(h) = &step.health {
                res.set_health(&step.ids, h, "timeline")
            } else if !step.add.is_empty() {
                res.add(&step.add, "timeline")
            } else {
                res.remove(&step.remove, "timeline")
            };
            if let Err(e) = result {
                tracing::warn!(resource = %res.name, at = ?step.at, error = %e, "timeline step skipped");
            }
        }
        for (f, due) in flaps.iter().zip(next_flap.iter_mut()) {
            if *due > now {
                continue;
            }
            if let Err(e) = res.toggle(&f.ids, "flap") {
                tracing::warn!(resource = %res.name, error = %e, "flap skipped");
            }
            *due = after(*due, f.every);
            if *due <= now {
                // More than a period late: keep the rhythm from now on.
                *due = after(now, f.every);
            }
        }
    }
}

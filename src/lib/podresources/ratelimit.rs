//! The token bucket behind the kubelet's PodResources rate limit (`qps`
//! tokens a second, at most `burst` saved up), shared by the server, which
//! rejects a call when the bucket is empty, and the client, which waits for
//! a token so that it never sends faster than a kubelet accepts.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// A token bucket that starts full.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    /// Tokens left, and when they were counted.
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A full bucket of `burst` tokens, refilled at `qps` tokens a second.
    pub fn new(qps: f64, burst: u32) -> Self {
        Self::new_at(qps, burst, Instant::now())
    }

    fn new_at(qps: f64, burst: u32, now: Instant) -> Self {
        TokenBucket { qps, burst: f64::from(burst), state: Mutex::new((f64::from(burst), now)) }
    }

    /// Takes a token if there is one; otherwise says how long until there is.
    pub fn try_take(&self) -> Result<(), Duration> {
        self.try_take_at(Instant::now())
    }

    /// [`TokenBucket::try_take`] at a given time (tests pass their own clock).
    fn try_take_at(&self, now: Instant) -> Result<(), Duration> {
        // The state is two numbers that are always valid, so a panic elsewhere
        // while the lock was held leaves nothing half-updated.
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let refill = now.saturating_duration_since(s.1).as_secs_f64() * self.qps;
        s.0 = (s.0 + refill).min(self.burst);
        s.1 = now;
        if s.0 >= 1.0 {
            s.0 -= 1.0;
            Ok(())
        } else {
            // A tiny qps must not overflow the conversion: wait at most duration::MAX.
            let secs = (1.0 - s.0) / self.qps.max(f64::MIN_POSITIVE);
            Err(Duration::try_from_secs_f64(secs).map_or(crate::duration::MAX, |d| d.min(crate::duration::MAX)))
        }
    }

    /// Waits until a token is there, and takes it.
    pub async fn take(&self) {
        while let Err(wait) = self.try_take() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_one_token_per_interval() {
        let t0 = Instant::now();
        let b = TokenBucket::new_at(100.0, 10, t0);
        for i in 0..10 {
            assert_eq!(b.try_take_at(t0), Ok(()), "token {i} of the burst");
        }
        let wait = b.try_take_at(t0).unwrap_err();
        assert!((wait.as_secs_f64() - 0.010).abs() < 1e-9, "{wait:?}");
        // 5 ms later: half a token, still no call.
        let wait = b.try_take_at(t0 + Duration::from_millis(5)).unwrap_err();
        assert!((wait.as_secs_f64() - 0.005).abs() < 1e-9, "{wait:?}");
        assert_eq!(b.try_take_at(t0 + Duration::from_millis(10)), Ok(()));
        assert!(b.try_take_at(t0 + Duration::from_millis(10)).is_err());
        // A long pause refills no more than the burst.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..10 {
            assert_eq!(b.try_take_at(later), Ok(()));
        }
        assert!(b.try_take_at(later).is_err());
    }

    #[test]
    fn a_clock_that_goes_backwards_refills_nothing() {
        let t0 = Instant::now() + Duration::from_secs(1);
        let b = TokenBucket::new_at(100.0, 1, t0);
        assert_eq!(b.try_take_at(t0), Ok(()));
        assert!(b.try_take_at(t0 - Duration::from_millis(500)).is_err());
    }

    #[tokio::test]
    async fn take_waits_for_the_next_token() {
        // Only a lower bound (a loaded machine may take any time): the 11th
        // take cannot finish before a token has had 10 ms to come back.
        let start = Instant::now();
        let b = TokenBucket::new(100.0, 10);
        for _ in 0..11 {
            b.take().await;
        }
        assert!(start.elapsed() >= Duration::from_millis(10), "{:?}", start.elapsed());
    }
}

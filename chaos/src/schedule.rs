//! The nemesis schedule: a list of steps drawn from a seed, so a run can be replayed (the
//! same seed and step count give the same steps, on Brook and on Kafka alike; see
//! [`crate::nemesis`] for how each is applied).

use serde::{Deserialize, Serialize};

/// Which replica a step acts on, looked up when the step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Leader,
    Follower,
}

/// One fault, applied and then healed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "kebab-case")]
pub enum Step {
    /// SIGKILL the partition's leader while records are in flight (mid-ack), keep it down
    /// `down_ms`, start it again. With `lag_ms`, the leader's replication traffic is first
    /// delayed that long, so followers trail by that much when it dies.
    KillLeader {
        partition: i32,
        lag_ms: Option<u64>,
        down_ms: u64,
    },
    /// SIGSTOP a replica for `pause_ms`, then SIGCONT.
    Pause {
        partition: i32,
        role: Role,
        pause_ms: u64,
    },
    /// A pending ISR change when the leader dies: cut one follower's replication off the
    /// leader for `cut_ms` (longer than `replica.lag.time.max.ms`, so it leaves the ISR),
    /// delay the leader's controller traffic by `controller_delay_ms` (its AlterPartition is
    /// slow to commit), heal the cut, and SIGKILL the leader `kill_after_ms` later, while the
    /// follower's return to the ISR is pending.
    IsrChurn {
        partition: i32,
        cut_ms: u64,
        controller_delay_ms: u64,
        kill_after_ms: u64,
    },
    /// A crash point of the leader (`docs/FAULTS.md`): it dies at that place in the produce
    /// path; started again once it has.
    CrashPoint { partition: i32, point: String },
    /// Delay the leader's replication traffic (both ways) by `delay_ms` for `for_ms`.
    DelayReplication {
        partition: i32,
        delay_ms: u64,
        for_ms: u64,
    },
}

impl Step {
    /// Whether the step ends with the partition's leader dead (a kill or a crash).
    pub fn kills_leader(&self) -> bool {
        matches!(
            self,
            Step::KillLeader { .. } | Step::IsrChurn { .. } | Step::CrashPoint { .. }
        )
    }
}

/// The crash points of `docs/FAULTS.md` a leader can reach.
pub const CRASH_POINTS: [&str; 2] = ["after-leader-append", "after-replication-before-ack"];

/// SplitMix64 (Steele, Lea, Flood 2014): small, and the same numbers on every platform.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// What the schedule needs to know about the cluster.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub partitions: i32,
    /// The brokers' `replica.lag.time.max.ms`: an ISR cut lasts longer than this.
    pub replica_lag_ms: u64,
}

/// `steps` steps drawn from `seed`. Weights: kill-leader 35%, isr-churn 20%, crash-point 15%,
/// pause 15%, delay-replication 15%.
pub fn generate(seed: u64, steps: usize, shape: Shape) -> Vec<Step> {
    let mut rng = SplitMix64::new(seed);
    (0..steps)
        .map(|_| {
            let partition = rng.range(0, shape.partitions.max(1) as u64 - 1) as i32;
            match rng.range(0, 99) {
                0..=34 => Step::KillLeader {
                    partition,
                    lag_ms: (rng.range(0, 1) == 1).then(|| rng.range(100, 800)),
                    down_ms: rng.range(0, 3000),
                },
                35..=54 => Step::IsrChurn {
                    partition,
                    cut_ms: shape.replica_lag_ms + rng.range(500, 2500),
                    controller_delay_ms: rng.range(200, 2000),
                    kill_after_ms: rng.range(0, 500),
                },
                55..=69 => Step::CrashPoint {
                    partition,
                    point: CRASH_POINTS[rng.range(0, CRASH_POINTS.len() as u64 - 1) as usize]
                        .to_string(),
                },
                70..=84 => Step::Pause {
                    partition,
                    role: if rng.range(0, 1) == 0 {
                        Role::Leader
                    } else {
                        Role::Follower
                    },
                    pause_ms: rng.range(500, 4000),
                },
                _ => Step::DelayReplication {
                    partition,
                    delay_ms: rng.range(50, 500),
                    for_ms: rng.range(1000, 4000),
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: Shape = Shape {
        partitions: 3,
        replica_lag_ms: 3000,
    };

    #[test]
    fn a_seed_replays_the_same_schedule() {
        assert_eq!(generate(7, 50, SHAPE), generate(7, 50, SHAPE));
        assert_ne!(generate(7, 50, SHAPE), generate(8, 50, SHAPE));
    }

    #[test]
    fn every_kind_of_step_comes_up() {
        let s = generate(1, 200, SHAPE);
        let kinds: std::collections::BTreeSet<String> = s
            .iter()
            .map(|st| serde_json::to_value(st).unwrap()["step"].to_string())
            .collect();
        assert_eq!(kinds.len(), 5, "{kinds:?}");
        assert!(s.iter().all(|st| match st {
            Step::IsrChurn { cut_ms, .. } => *cut_ms > SHAPE.replica_lag_ms,
            _ => true,
        }));
    }
}

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
    /// Kill the transaction coordinator of a producer's `transactional.id` (FindCoordinator
    /// key type 1) while an EndTxn is in flight, keep it down `down_ms`, start it again (see
    /// [`crate::coordinator`]). Transactional workload only.
    KillTxnCoordinator { signal: KillSignal, down_ms: u64 },
    /// Kill the group coordinator of the group consumers' group (key type 0) during a
    /// rebalance (a member joins or leaves; the kill lands between JoinGroup and SyncGroup),
    /// keep it down `down_ms`, start it again. Needs group consumers (`--group-consumers`).
    KillGroupCoordinator {
        signal: KillSignal,
        rebalance: Rebalance,
        down_ms: u64,
    },
    /// Kill the share coordinator of the share group's share-partition `partition` (the
    /// leader of the `__share_group_state` partition its key `group:topicId:partition`
    /// hashes to) while the share consumers acknowledge, keep it down `down_ms`, start it
    /// again (see [`crate::share`]). Share workload only.
    KillShareCoordinator {
        signal: KillSignal,
        partition: i32,
        down_ms: u64,
    },
}

/// How a coordinator is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KillSignal {
    /// SIGKILL: nothing written after the signal.
    Kill,
    /// SIGTERM: the node shuts down in order (Kafka: a controlled shutdown).
    Term,
}

/// What starts the rebalance a group coordinator dies in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rebalance {
    /// A new member joins the group.
    Join,
    /// A member leaves it (LeaveGroup).
    Leave,
}

impl Step {
    /// Whether the step ends with the partition's leader dead (a kill or a crash).
    pub fn kills_leader(&self) -> bool {
        matches!(
            self,
            Step::KillLeader { .. } | Step::IsrChurn { .. } | Step::CrashPoint { .. }
        )
    }

    /// Whether the step kills a coordinator.
    pub fn kills_coordinator(&self) -> bool {
        matches!(
            self,
            Step::KillTxnCoordinator { .. }
                | Step::KillGroupCoordinator { .. }
                | Step::KillShareCoordinator { .. }
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

/// How often each kind of step is drawn, relative to the others (`--weights`). The default
/// (35, 20, 15, 15, 15, and 0 for the three coordinator kills) sums to 100, and a schedule drawn
/// with it is the one every earlier run of the same seed applied: the coordinator kinds come
/// last in the draw, so with weight 0 they change nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Weights {
    pub kill_leader: u32,
    pub isr_churn: u32,
    pub crash_point: u32,
    pub pause: u32,
    pub delay_replication: u32,
    #[serde(default)]
    pub kill_txn_coordinator: u32,
    #[serde(default)]
    pub kill_group_coordinator: u32,
    #[serde(default)]
    pub kill_share_coordinator: u32,
}

impl Default for Weights {
    fn default() -> Weights {
        Weights {
            kill_leader: 35,
            isr_churn: 20,
            crash_point: 15,
            pause: 15,
            delay_replication: 15,
            kill_txn_coordinator: 0,
            kill_group_coordinator: 0,
            kill_share_coordinator: 0,
        }
    }
}

/// The step kinds' names, in the order of [`Weights`]' fields and of the draw.
pub const STEP_KINDS: [&str; 8] = [
    "kill-leader",
    "isr-churn",
    "crash-point",
    "pause",
    "delay-replication",
    "kill-txn-coordinator",
    "kill-group-coordinator",
    "kill-share-coordinator",
];

impl Weights {
    fn as_array(&self) -> [u32; 8] {
        [
            self.kill_leader,
            self.isr_churn,
            self.crash_point,
            self.pause,
            self.delay_replication,
            self.kill_txn_coordinator,
            self.kill_group_coordinator,
            self.kill_share_coordinator,
        ]
    }

    /// Parses `kill-leader=60,pause=10,...`; a kind not named gets weight 0.
    pub fn parse(s: &str) -> Result<Weights, String> {
        let mut w = [0u32; STEP_KINDS.len()];
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| format!("weight `{part}`: expected kind=number"))?;
            let i = STEP_KINDS
                .iter()
                .position(|k| *k == name.trim())
                .ok_or_else(|| format!("weight `{part}`: kinds are {}", STEP_KINDS.join(", ")))?;
            w[i] = value
                .trim()
                .parse()
                .map_err(|_| format!("weight `{part}`: not a whole number"))?;
        }
        let parsed = Weights {
            kill_leader: w[0],
            isr_churn: w[1],
            crash_point: w[2],
            pause: w[3],
            delay_replication: w[4],
            kill_txn_coordinator: w[5],
            kill_group_coordinator: w[6],
            kill_share_coordinator: w[7],
        };
        if parsed.total() == 0 {
            return Err("the weights sum to 0".into());
        }
        Ok(parsed)
    }

    fn total(&self) -> u64 {
        self.as_array().iter().map(|w| u64::from(*w)).sum()
    }

    /// The kind (an index into [`STEP_KINDS`]) a draw in `0..total` falls on.
    fn kind_of(&self, draw: u64) -> usize {
        let mut upper = 0u64;
        for (i, w) in self.as_array().iter().enumerate() {
            upper += u64::from(*w);
            if draw < upper {
                return i;
            }
        }
        STEP_KINDS.len() - 1
    }
}

impl std::fmt::Display for Weights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = STEP_KINDS
            .iter()
            .zip(self.as_array())
            .map(|(k, w)| format!("{k}={w}"))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// `steps` steps drawn from `seed`, each kind as often as `weights` says.
pub fn generate(seed: u64, steps: usize, shape: Shape, weights: Weights) -> Vec<Step> {
    let mut rng = SplitMix64::new(seed);
    (0..steps)
        .map(|_| {
            let partition = rng.range(0, shape.partitions.max(1) as u64 - 1) as i32;
            match weights.kind_of(rng.range(0, weights.total() - 1)) {
                0 => Step::KillLeader {
                    partition,
                    lag_ms: (rng.range(0, 1) == 1).then(|| rng.range(100, 800)),
                    down_ms: rng.range(0, 3000),
                },
                1 => Step::IsrChurn {
                    partition,
                    cut_ms: shape.replica_lag_ms + rng.range(500, 2500),
                    controller_delay_ms: rng.range(200, 2000),
                    kill_after_ms: rng.range(0, 500),
                },
                2 => Step::CrashPoint {
                    partition,
                    point: CRASH_POINTS[rng.range(0, CRASH_POINTS.len() as u64 - 1) as usize]
                        .to_string(),
                },
                3 => Step::Pause {
                    partition,
                    role: if rng.range(0, 1) == 0 {
                        Role::Leader
                    } else {
                        Role::Follower
                    },
                    pause_ms: rng.range(500, 4000),
                },
                4 => Step::DelayReplication {
                    partition,
                    delay_ms: rng.range(50, 500),
                    for_ms: rng.range(1000, 4000),
                },
                5 => Step::KillTxnCoordinator {
                    signal: draw_signal(&mut rng),
                    down_ms: rng.range(0, 3000),
                },
                6 => Step::KillGroupCoordinator {
                    signal: draw_signal(&mut rng),
                    rebalance: if rng.range(0, 1) == 0 {
                        Rebalance::Join
                    } else {
                        Rebalance::Leave
                    },
                    down_ms: rng.range(0, 3000),
                },
                _ => Step::KillShareCoordinator {
                    signal: draw_signal(&mut rng),
                    partition,
                    down_ms: rng.range(0, 3000),
                },
            }
        })
        .collect()
}

/// SIGKILL three times in four, SIGTERM otherwise.
fn draw_signal(rng: &mut SplitMix64) -> KillSignal {
    if rng.range(0, 3) == 0 {
        KillSignal::Term
    } else {
        KillSignal::Kill
    }
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
        let w = Weights::default();
        assert_eq!(generate(7, 50, SHAPE, w), generate(7, 50, SHAPE, w));
        assert_ne!(generate(7, 50, SHAPE, w), generate(8, 50, SHAPE, w));
    }

    /// Seed 12's first steps as a run before `--weights` wrote them in its JSON (the long
    /// runs' schedule): the default weights must keep drawing exactly these.
    #[test]
    fn the_default_weights_draw_the_schedules_of_earlier_runs() {
        let earlier = [
            r#"{"step":"kill-leader","partition":0,"lag_ms":null,"down_ms":950}"#,
            r#"{"step":"pause","partition":1,"role":"follower","pause_ms":3425}"#,
            r#"{"step":"isr-churn","partition":2,"cut_ms":4810,"controller_delay_ms":1817,"kill_after_ms":66}"#,
            r#"{"step":"kill-leader","partition":2,"lag_ms":435,"down_ms":825}"#,
        ];
        let drawn: Vec<String> = generate(12, 4, SHAPE, Weights::default())
            .iter()
            .map(|st| serde_json::to_string(st).unwrap())
            .collect();
        assert_eq!(drawn, earlier);
    }

    #[test]
    fn weights_parse_and_steer_the_draw() {
        let w = Weights::parse("kill-leader=3, pause=1").unwrap();
        assert_eq!(
            w.to_string(),
            "kill-leader=3,isr-churn=0,crash-point=0,pause=1,delay-replication=0,\
             kill-txn-coordinator=0,kill-group-coordinator=0,kill-share-coordinator=0"
        );
        assert_eq!(
            Weights::parse(&Weights::default().to_string()),
            Ok(Weights::default())
        );
        assert!(Weights::parse("kill=1").is_err());
        assert!(Weights::parse("pause=0").is_err());
        let s = generate(3, 400, SHAPE, w);
        let kills = s
            .iter()
            .filter(|st| matches!(st, Step::KillLeader { .. }))
            .count();
        let pauses = s
            .iter()
            .filter(|st| matches!(st, Step::Pause { .. }))
            .count();
        assert_eq!(kills + pauses, 400);
        assert!(kills > 2 * pauses, "{kills} kills, {pauses} pauses");
    }

    #[test]
    fn every_kind_of_step_comes_up() {
        let s = generate(1, 200, SHAPE, Weights::default());
        let kinds: std::collections::BTreeSet<String> = s
            .iter()
            .map(|st| serde_json::to_value(st).unwrap()["step"].to_string())
            .collect();
        assert_eq!(kinds.len(), 5, "{kinds:?}");
        assert!(
            !s.iter().any(Step::kills_coordinator),
            "weight 0 by default"
        );
        let w = Weights::parse(
            "kill-txn-coordinator=1,kill-group-coordinator=1,kill-share-coordinator=1",
        )
        .unwrap();
        let s = generate(1, 40, SHAPE, w);
        assert!(s.iter().all(Step::kills_coordinator));
        let signals: std::collections::BTreeSet<String> = s
            .iter()
            .map(|st| serde_json::to_value(st).unwrap()["signal"].to_string())
            .collect();
        assert_eq!(
            signals.len(),
            2,
            "SIGKILL and SIGTERM both come up: {signals:?}"
        );
        assert!(s.iter().all(|st| match st {
            Step::IsrChurn { cut_ms, .. } => *cut_ms > SHAPE.replica_lag_ms,
            _ => true,
        }));
    }
}

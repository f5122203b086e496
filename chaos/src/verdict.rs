//! What a configuration promises, and the verdict of a run against it.
//!
//! Kafka's guarantee for a partition is only as strong as its settings. With `acks=all`, an
//! idempotent producer and `min.insync.replicas=2` on three replicas (clean leader election
//! only, Kafka's default), an acknowledged record is on at least two replicas and the next
//! leader comes from the ISR, and the producer's sequence numbers remove retry duplicates and
//! keep its order: every anomaly is a failure. Weaker settings allow some anomalies by design:
//! - `acks=1` (or `acks=0`, or `min.insync.replicas=1`): the leader acknowledges before any
//!   follower has the record; a leader that dies then takes it along (`lost-write`, or
//!   `unseen` when nothing after it was read either);
//! - idempotence off: a retry after a lost answer is appended again (`duplicate`), and with
//!   several requests in flight a retried one lands after its successors (`reorder`).
//!
//! The verdict names the allowed ones as expected, and fails on anything else. The
//! transactional workload (idempotent, acks=all) allows none of the transactional anomalies
//! either: read_committed shows no record of an aborted or not yet committed transaction, and
//! every committed transaction is in the log whole.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::checker::{Anomaly, PartitionReport};

/// The settings that decide what a run may show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guarantees {
    /// The producers' `acks`: `all`, `1` or `0`.
    pub acks: String,
    pub idempotence: bool,
    pub min_insync_replicas: u32,
    pub replication_factor: u32,
    /// Transactional producers and read_committed consumers.
    #[serde(default)]
    pub transactional: bool,
    /// Share consumers (`--workload share`): their anomalies are failures too.
    #[serde(default)]
    pub share: bool,
}

impl Guarantees {
    /// Whether an acknowledged record is on a quorum of replicas before the ack.
    fn durable_acks(&self) -> bool {
        self.acks == "all" && self.min_insync_replicas >= 2 && self.replication_factor >= 3
    }

    /// The anomalies Kafka allows with these settings.
    pub fn allowed(&self) -> BTreeSet<Anomaly> {
        // A record the client itself sent again under a new epoch: no setting prevents it.
        let mut allowed = BTreeSet::from([Anomaly::DuplicateAfterEpochBump]);
        if !self.durable_acks() {
            allowed.extend([Anomaly::LostWrite, Anomaly::Unseen]);
        }
        if !self.idempotence {
            allowed.extend([Anomaly::Duplicate, Anomaly::Reorder]);
        }
        allowed
    }

    /// One sentence for people: what this configuration promises.
    pub fn promise(&self) -> String {
        let mut allowed = self.allowed();
        allowed.remove(&Anomaly::DuplicateAfterEpochBump);
        let resend = "; a record the producer sent again itself, under an epoch it bumped after a message timeout or a failover's sequence gap, is reported as expected (duplicate-after-epoch-bump)";
        let settings = format!(
            "acks={}, idempotence {}, min.insync.replicas={}, replication factor {}",
            self.acks,
            if self.idempotence { "on" } else { "off" },
            self.min_insync_replicas,
            self.replication_factor
        );
        if self.share {
            format!("{settings}, share consumers: no acknowledged record lost, duplicated or reordered; no record accepted or rejected twice or released past the delivery count limit, none undelivered, none left unacknowledged once drained; any anomaly is a failure{resend}")
        } else if self.transactional {
            format!("{settings}, transactional producers, read_committed: no record of an aborted or uncommitted transaction may be read, no committed one lost, partial, duplicated or reordered; any anomaly is a failure{resend}")
        } else if allowed.is_empty() {
            format!("{settings}: no acknowledged record may be lost, duplicated or reordered; any anomaly is a failure{resend}")
        } else {
            let names: Vec<&str> = allowed.iter().map(|a| a.name()).collect();
            format!(
                "{settings}: Kafka allows {} here (reported as expected); anything else is a failure{resend}",
                names.join(", ")
            )
        }
    }
}

/// The verdict of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub ok: bool,
    pub promise: String,
    /// Allowed anomalies seen, by name, with their counts over every partition.
    pub expected: BTreeMap<String, u64>,
    /// Anomalies the configuration forbids, by name, with their counts.
    pub failures: BTreeMap<String, u64>,
    /// Problems of the run itself (a step that could not be applied, a final read that did not
    /// reach the end): the run proves nothing when there are any.
    pub run_errors: Vec<String>,
}

/// Judges the partition reports against what `g` allows.
pub fn judge(
    g: &Guarantees,
    reports: &BTreeMap<i32, PartitionReport>,
    run_errors: Vec<String>,
) -> Verdict {
    let allowed = g.allowed();
    let mut expected = BTreeMap::new();
    let mut failures = BTreeMap::new();
    for report in reports.values() {
        for (kind, found) in &report.anomalies {
            let into = if allowed.contains(kind) {
                &mut expected
            } else {
                &mut failures
            };
            *into.entry(kind.name().to_string()).or_insert(0) += found.count;
        }
    }
    Verdict {
        ok: failures.is_empty() && run_errors.is_empty(),
        promise: g.promise(),
        expected,
        failures,
        run_errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::Found;

    fn g(acks: &str, idempotence: bool) -> Guarantees {
        Guarantees {
            acks: acks.into(),
            idempotence,
            min_insync_replicas: 2,
            replication_factor: 3,
            transactional: false,
            share: false,
        }
    }

    fn with(kinds: &[Anomaly]) -> BTreeMap<i32, PartitionReport> {
        let mut r = PartitionReport::default();
        for k in kinds {
            r.anomalies.insert(
                *k,
                Found {
                    count: 2,
                    examples: vec![],
                },
            );
        }
        BTreeMap::from([(0, r)])
    }

    #[test]
    fn acks_all_with_idempotence_allows_nothing_but_client_resends() {
        let all = g("all", true);
        assert_eq!(
            all.allowed(),
            BTreeSet::from([Anomaly::DuplicateAfterEpochBump])
        );
        let v = judge(&all, &with(&[Anomaly::LostWrite]), vec![]);
        assert!(!v.ok);
        assert_eq!(v.failures, BTreeMap::from([("lost-write".to_string(), 2)]));
        assert!(!judge(&all, &with(&[Anomaly::Duplicate]), vec![]).ok);
        let resent = judge(&all, &with(&[Anomaly::DuplicateAfterEpochBump]), vec![]);
        assert!(resent.ok, "{resent:?}");
        assert!(
            all.promise()
                .contains("any anomaly is a failure; a record the producer sent again"),
            "{}",
            all.promise()
        );
    }

    #[test]
    fn acks_one_expects_lost_writes_but_not_duplicates() {
        let v = judge(
            &g("1", true),
            &with(&[Anomaly::LostWrite, Anomaly::Unseen]),
            vec![],
        );
        assert!(v.ok, "{v:?}");
        assert_eq!(v.expected.len(), 2);
        assert!(!judge(&g("1", true), &with(&[Anomaly::Duplicate]), vec![]).ok);
    }

    #[test]
    fn idempotence_off_expects_duplicates_and_reorders() {
        let v = judge(
            &g("all", false),
            &with(&[Anomaly::Duplicate, Anomaly::Reorder]),
            vec![],
        );
        assert!(v.ok, "{v:?}");
        assert!(!judge(&g("all", false), &with(&[Anomaly::LostWrite]), vec![]).ok);
        assert!(!judge(&g("1", false), &with(&[Anomaly::PollSkip]), vec![]).ok);
    }

    #[test]
    fn share_anomalies_are_failures() {
        let share = Guarantees {
            share: true,
            ..g("all", true)
        };
        for kind in Anomaly::ALL.into_iter().filter(|a| a.share()) {
            let v = judge(&share, &with(&[kind]), vec![]);
            assert!(!v.ok, "{kind:?}: {v:?}");
            assert_eq!(v.failures, BTreeMap::from([(kind.name().to_string(), 2)]));
        }
        assert!(share.promise().contains("share consumers"));
    }

    #[test]
    fn transactional_anomalies_are_failures() {
        let txn = Guarantees {
            transactional: true,
            ..g("all", true)
        };
        for kind in Anomaly::ALL.into_iter().filter(|a| a.transactional()) {
            let v = judge(&txn, &with(&[kind]), vec![]);
            assert!(!v.ok, "{kind:?}: {v:?}");
            assert_eq!(v.failures, BTreeMap::from([(kind.name().to_string(), 2)]));
        }
        assert!(txn.promise().contains("aborted"), "{}", txn.promise());
    }

    #[test]
    fn a_run_error_fails_a_clean_history() {
        let v = judge(&g("all", true), &with(&[]), vec!["final read".into()]);
        assert!(!v.ok);
    }
}

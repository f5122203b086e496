//! The server-side assignors of KIP-848 groups (Kafka's `UniformAssignor` and
//! `RangeAssignor`): from the members' subscriptions and the topics' partition counts, a
//! target assignment. Pure functions; reconciliation towards the target is `consumer.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::consumer::{TopicPartitions, TopicsImage};

/// The range assignor: per topic, contiguous ranges over the subscribers sorted by id, the
/// first `partitions % members` of them one partition larger.
pub fn assign_range(
    subs: &BTreeMap<String, Vec<String>>,
    topics: &TopicsImage,
) -> HashMap<String, TopicPartitions> {
    let mut out: HashMap<String, TopicPartitions> = HashMap::new();
    for (name, (id, count)) in topics {
        let members: Vec<&String> = subs
            .iter()
            .filter(|(_, ts)| ts.contains(name))
            .map(|(m, _)| m)
            .collect();
        if members.is_empty() || *count <= 0 {
            continue;
        }
        let n = members.len() as i32;
        let (base, extra) = (count / n, count % n);
        let mut start = 0;
        for (i, m) in members.iter().enumerate() {
            let len = base + i32::from((i as i32) < extra);
            if len > 0 {
                out.entry((*m).clone())
                    .or_default()
                    .entry(*id)
                    .or_default()
                    .extend(start..start + len);
            }
            start += len;
        }
    }
    out
}

/// The uniform assignor: balanced counts, keeping previous owners where the balance allows
/// (so that fewer partitions move). The steps follow Kafka's
/// `UniformHomogeneousAssignmentBuilder`: keep previous owners up to the floor, hand the
/// remainder to previous owners, then assign what is left to the least loaded member.
pub fn assign_uniform(
    subs: &BTreeMap<String, Vec<String>>,
    topics: &TopicsImage,
    previous: &HashMap<String, TopicPartitions>,
) -> HashMap<String, TopicPartitions> {
    let ids: BTreeMap<Uuid, &String> = topics.iter().map(|(n, (id, _))| (*id, n)).collect();
    let mut all: Vec<(Uuid, i32)> = Vec::new();
    for (name, (id, count)) in topics {
        if subs.values().any(|ts| ts.contains(name)) {
            all.extend((0..*count).map(|p| (*id, p)));
        }
    }
    let members: Vec<&String> = subs.keys().collect();
    if members.is_empty() {
        return HashMap::new();
    }
    let eligible = |m: &str, t: &Uuid| {
        ids.get(t)
            .is_some_and(|name| subs.get(m).is_some_and(|ts| ts.contains(name)))
    };
    let valid = |t: &Uuid, p: i32| topics.values().any(|(id, c)| id == t && p < *c);
    let keep = |m: &str, t: &Uuid, p: i32| valid(t, p) && eligible(m, t);
    let mut b = UniformBuilder {
        out: HashMap::new(),
        taken: BTreeSet::new(),
        counts: members.iter().map(|m| (*m, 0)).collect(),
    };
    let floor = all.len() / members.len();
    let leftovers = b.keep_previous(&members, previous, floor, &keep);
    b.keep_previous_extra(&members, &leftovers, all.len() % members.len());
    b.assign_remaining(&members, all, &eligible);
    b.out
}

/// One uniform assignment being built: the assignment so far, the partitions already owned
/// and each member's count.
struct UniformBuilder<'a> {
    out: HashMap<String, TopicPartitions>,
    taken: BTreeSet<(Uuid, i32)>,
    counts: BTreeMap<&'a String, usize>,
}

impl<'a> UniformBuilder<'a> {
    fn assign(&mut self, m: &'a String, tp: (Uuid, i32)) {
        self.out
            .entry(m.clone())
            .or_default()
            .entry(tp.0)
            .or_default()
            .insert(tp.1);
        *self.counts.entry(m).or_default() += 1;
    }

    /// Each member keeps up to `floor` of its previous partitions (Kafka's
    /// `assignStickyPartitions`); the rest of them are returned as its leftovers.
    fn keep_previous(
        &mut self,
        members: &[&'a String],
        previous: &HashMap<String, TopicPartitions>,
        floor: usize,
        keep: &dyn Fn(&str, &Uuid, i32) -> bool,
    ) -> BTreeMap<&'a String, Vec<(Uuid, i32)>> {
        let mut leftovers: BTreeMap<&String, Vec<(Uuid, i32)>> = BTreeMap::new();
        for m in members {
            let prev: Vec<(Uuid, i32)> = previous
                .get(*m)
                .into_iter()
                .flat_map(|tp| tp.iter().flat_map(|(t, ps)| ps.iter().map(|p| (*t, *p))))
                .filter(|(t, p)| keep(m, t, *p))
                .collect();
            for (i, tp) in prev.into_iter().enumerate() {
                if i < floor && self.taken.insert(tp) {
                    self.assign(m, tp);
                } else {
                    leftovers.entry(m).or_default().push(tp);
                }
            }
        }
        leftovers
    }

    /// The `extra` members that get one partition above the floor: the first ones, in
    /// member order, that still have an unowned previous partition.
    fn keep_previous_extra(
        &mut self,
        members: &[&'a String],
        leftovers: &BTreeMap<&'a String, Vec<(Uuid, i32)>>,
        mut extra: usize,
    ) {
        for m in members {
            if extra == 0 {
                break;
            }
            if let Some(tp) = leftovers
                .get(m)
                .and_then(|l| l.iter().find(|tp| !self.taken.contains(tp)))
                .copied()
            {
                self.taken.insert(tp);
                self.assign(m, tp);
                extra -= 1;
            }
        }
    }

    /// Every partition still unowned goes to the eligible member with the fewest partitions
    /// (ties by member id; Kafka's `assignRemainingPartitions`).
    fn assign_remaining(
        &mut self,
        members: &[&'a String],
        all: Vec<(Uuid, i32)>,
        eligible: &dyn Fn(&str, &Uuid) -> bool,
    ) {
        for tp in all {
            if self.taken.contains(&tp) {
                continue;
            }
            let best = members
                .iter()
                .filter(|m| eligible(m, &tp.0))
                .min_by_key(|m| (self.counts.get(*m).copied().unwrap_or(0), **m))
                .copied();
            if let Some(m) = best {
                self.assign(m, tp);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tid() -> Uuid {
        Uuid::from_u128(7)
    }

    fn count(a: &TopicPartitions) -> usize {
        a.values().map(|s| s.len()).sum()
    }

    #[test]
    fn range_and_uniform_assignors() {
        let mut subs = BTreeMap::new();
        for m in ["a", "b", "c", "d"] {
            subs.insert(m.to_string(), vec!["t".to_string()]);
        }
        let mut img = BTreeMap::new();
        img.insert("t".to_string(), (tid(), 6));
        let r = assign_range(&subs, &img);
        assert_eq!(r["a"][&tid()], [0, 1].into());
        assert_eq!(r["b"][&tid()], [2, 3].into());
        assert_eq!(r["c"][&tid()], [4].into());
        assert_eq!(r["d"][&tid()], [5].into());
        // Uniform from a 3-member assignment: each keeps at least one partition it had.
        let mut prev = HashMap::new();
        for (i, m) in ["a", "b", "c"].iter().enumerate() {
            let mut tp = BTreeMap::new();
            tp.insert(tid(), [2 * i as i32, 2 * i as i32 + 1].into());
            prev.insert(m.to_string(), tp);
        }
        let u = assign_uniform(&subs, &img, &prev);
        let total: usize = u.values().map(count).sum();
        assert_eq!(total, 6);
        for m in ["a", "b", "c", "d"] {
            let n = u.get(m).map(count).unwrap_or(0);
            assert!((1..=2).contains(&n), "{m} has {n}");
        }
        assert!(u["a"][&tid()].contains(&0) || u["a"][&tid()].contains(&1));
    }
}

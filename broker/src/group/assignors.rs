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
/// (so that fewer partitions move).
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
    let mut out: HashMap<String, TopicPartitions> = HashMap::new();
    if members.is_empty() {
        return out;
    }
    let eligible = |m: &str, t: &Uuid| {
        ids.get(t)
            .is_some_and(|name| subs.get(m).is_some_and(|ts| ts.contains(name)))
    };
    let floor = all.len() / members.len();
    let mut extra = all.len() % members.len();
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    let mut counts: BTreeMap<&String, usize> = members.iter().map(|m| (*m, 0)).collect();
    let valid = |t: &Uuid, p: i32| topics.values().any(|(id, c)| id == t && p < *c);
    let mut leftovers: BTreeMap<&String, Vec<(Uuid, i32)>> = BTreeMap::new();
    for m in &members {
        let prev: Vec<(Uuid, i32)> = previous
            .get(*m)
            .into_iter()
            .flat_map(|tp| tp.iter().flat_map(|(t, ps)| ps.iter().map(|p| (*t, *p))))
            .filter(|(t, p)| valid(t, *p) && eligible(m, t))
            .collect();
        for (i, tp) in prev.into_iter().enumerate() {
            if i < floor && taken.insert(tp) {
                out.entry((*m).clone())
                    .or_default()
                    .entry(tp.0)
                    .or_default()
                    .insert(tp.1);
                *counts.entry(m).or_default() += 1;
            } else {
                leftovers.entry(m).or_default().push(tp);
            }
        }
    }
    for m in &members {
        if extra == 0 {
            break;
        }
        if let Some(tp) = leftovers
            .get(m)
            .and_then(|l| l.iter().find(|tp| !taken.contains(tp)))
            .copied()
        {
            taken.insert(tp);
            out.entry((*m).clone())
                .or_default()
                .entry(tp.0)
                .or_default()
                .insert(tp.1);
            *counts.entry(m).or_default() += 1;
            extra -= 1;
        }
    }
    for tp in all {
        if taken.contains(&tp) {
            continue;
        }
        let best = members
            .iter()
            .filter(|m| eligible(m, &tp.0))
            .min_by_key(|m| (counts.get(*m).copied().unwrap_or(0), **m));
        if let Some(m) = best {
            out.entry((*m).clone())
                .or_default()
                .entry(tp.0)
                .or_default()
                .insert(tp.1);
            *counts.entry(m).or_default() += 1;
        }
    }
    out
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

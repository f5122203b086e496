//! A streams group's topology and its topics: which internal topics (repartition and
//! changelog) the application needs, with how many partitions, and how many tasks each
//! subtopology has. Mirrors Kafka's `streams.topics.InternalTopicManager.configureTopics`
//! with `RepartitionTopics`, `CopartitionedTopicsEnforcer` and `ChangelogTopics`.
//!
//! A subtopology has as many tasks as its largest input topic has partitions. A repartition
//! topic declared with 0 partitions takes the task count of the subtopologies writing to it;
//! a changelog topic always has its subtopology's task count. Internal topics that do not
//! exist are reported missing, and the broker creates them (Kafka's `KafkaApis` does, through
//! `AutoTopicCreationManager.createStreamsInternalTopics`); the group gets no tasks until
//! every topic is there with the right partition count.

use std::collections::{BTreeMap, BTreeSet};

use super::streams::{status, TasksTuple};
use super::GroupError;

/// Bound on subtopologies in one topology.
pub const SUBTOPOLOGIES_MAX: usize = 10_000;

/// An internal topic as the topology declares it (`TopicInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    /// 0: decided by the coordinator.
    pub partitions: i32,
    /// 0: the broker's default.
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
}

/// One subtopology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subtopology {
    pub id: String,
    pub source_topics: Vec<String>,
    pub repartition_sink_topics: Vec<String>,
    pub state_changelog_topics: Vec<TopicInfo>,
    pub repartition_source_topics: Vec<TopicInfo>,
    /// Each group as (indices into `source_topics`, indices into `repartition_source_topics`).
    pub copartition_groups: Vec<(Vec<i16>, Vec<i16>)>,
}

/// A streams application's topology, as its members send it when they join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub epoch: i32,
    pub subtopologies: Vec<Subtopology>,
}

/// An internal topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicToCreate {
    pub name: String,
    pub partitions: i32,
    /// -1: the broker's `default.replication.factor`.
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
}

impl Topology {
    /// Kafka's `throwIfInvalidTopology`: the copartition groups index existing topics.
    /// Source topic regular expressions are refused as Kafka 4.4 refuses them.
    pub fn validate(&self) -> Result<(), GroupError> {
        if self.subtopologies.len() > SUBTOPOLOGIES_MAX {
            return Err(GroupError::InvalidRequest("too many subtopologies".into()));
        }
        let mut ids = BTreeSet::new();
        for s in &self.subtopologies {
            if !ids.insert(s.id.as_str()) {
                return Err(GroupError::StreamsInvalidTopology(format!(
                    "Duplicate subtopology {}.",
                    s.id
                )));
            }
            for (sources, repartition) in &s.copartition_groups {
                let bad_source = sources
                    .iter()
                    .any(|i| *i < 0 || *i as usize >= s.source_topics.len());
                let bad_repartition = repartition
                    .iter()
                    .any(|i| *i < 0 || *i as usize >= s.repartition_source_topics.len());
                if bad_source || bad_repartition {
                    return Err(GroupError::StreamsInvalidTopology(format!(
                        "Copartition group of subtopology {} names a topic it does not read.",
                        s.id
                    )));
                }
            }
        }
        Ok(())
    }

    /// The topics the application reads: source and repartition source topics.
    pub fn input_topics(&self) -> BTreeSet<String> {
        self.subtopologies
            .iter()
            .flat_map(|s| self.subtopology_inputs(&s.id))
            .collect()
    }

    /// A subtopology's input topics.
    pub fn subtopology_inputs(&self, id: &str) -> Vec<String> {
        self.subtopologies
            .iter()
            .filter(|s| s.id == id)
            .flat_map(|s| {
                s.source_topics
                    .iter()
                    .cloned()
                    .chain(s.repartition_source_topics.iter().map(|t| t.name.clone()))
            })
            .collect()
    }

    /// Every topic the topology names (Kafka's `StreamsTopology.requiredTopics`).
    pub fn all_topics(&self) -> BTreeSet<String> {
        let mut out = self.input_topics();
        for s in &self.subtopologies {
            out.extend(s.state_changelog_topics.iter().map(|t| t.name.clone()));
        }
        out
    }
}

/// The outcome of configuring a topology's topics (Kafka's `ConfiguredTopology`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfiguredTopology {
    /// Subtopology → task count; empty when the topics could not be configured.
    pub tasks: BTreeMap<String, i32>,
    /// Subtopologies with state (changelog topics): they get standby tasks.
    pub stateful: BTreeSet<String>,
    pub to_create: Vec<TopicToCreate>,
    /// What stops the group from running: (status code, detail).
    pub status: Option<(i8, String)>,
}

impl ConfiguredTopology {
    pub fn is_ready(&self) -> bool {
        self.status.is_none() && !self.tasks.is_empty()
    }

    /// Kafka's `throwIfRequestContainsInvalidTasks`: owned tasks must exist.
    pub fn check_tasks(&self, owned: &TasksTuple) -> Result<(), GroupError> {
        for tasks in [&owned.active, &owned.standby, &owned.warmup] {
            for (s, ps) in tasks {
                let n = self.tasks.get(s).copied().unwrap_or(0);
                if ps.iter().any(|p| *p < 0 || *p >= n) {
                    return Err(GroupError::InvalidRequest(format!(
                        "Tasks of subtopology {s} contain invalid partitions."
                    )));
                }
            }
        }
        Ok(())
    }
}

fn failed(code: i8, detail: String) -> ConfiguredTopology {
    ConfiguredTopology {
        tasks: BTreeMap::new(),
        stateful: BTreeSet::new(),
        to_create: Vec::new(),
        status: Some((code, detail)),
    }
}

/// Kafka's `summarizeTopics`: up to three names, then a count of the others.
fn summarize<'a>(topics: impl IntoIterator<Item = &'a String>) -> String {
    let all: Vec<&String> = topics.into_iter().collect();
    let shown: Vec<&str> = all.iter().take(3).map(|s| s.as_str()).collect();
    let mut out = shown.join(", ");
    if all.len() > 3 {
        out.push_str(&format!(" and {} additional topics", all.len() - 3));
    }
    out
}

/// Configures `topology` against the existing topics (`partitions` gives a topic's
/// partition count), in the steps of Kafka's `InternalTopicManager.configureTopics`
/// (`coordinator.group.streams.topics`): `throwOnMissingSourceTopics`,
/// `decidePartitionCounts`, each subtopology's tasks and internal topics
/// (`fromPersistedSubtopology`), then `missingInternalTopics`.
pub fn configure(
    topology: &Topology,
    partitions: &dyn Fn(&str) -> Option<i32>,
) -> ConfiguredTopology {
    let missing: BTreeSet<&String> = topology
        .subtopologies
        .iter()
        .flat_map(|s| &s.source_topics)
        .filter(|t| partitions(t).is_none())
        .collect();
    if !missing.is_empty() {
        return failed(
            status::MISSING_SOURCE_TOPICS,
            format!("Source topics {} are missing.", summarize(missing)),
        );
    }
    let decided = match decide_partition_counts(topology, partitions) {
        Ok(d) => d,
        Err(e) => return failed(status::INCORRECTLY_PARTITIONED_TOPICS, e),
    };
    let (tasks, stateful, wanted) = tasks_and_internal_topics(topology, partitions, &decided);
    let to_create = match missing_internal_topics(wanted, partitions) {
        Ok(t) => t,
        Err(e) => return failed(status::INCORRECTLY_PARTITIONED_TOPICS, e),
    };
    let status = (!to_create.is_empty()).then(|| {
        (
            status::MISSING_INTERNAL_TOPICS,
            format!(
                "Internal topics are missing: {}",
                summarize(to_create.iter().map(|t| &t.name))
            ),
        )
    });
    ConfiguredTopology {
        tasks,
        stateful,
        to_create,
        status,
    }
}

/// Subtopology → task count, the stateful subtopologies, internal topic name → topic.
type TasksAndInternalTopics = (
    BTreeMap<String, i32>,
    BTreeSet<String>,
    BTreeMap<String, TopicToCreate>,
);

/// Each subtopology's task count (its inputs' largest partition count), the stateful
/// subtopologies, and the internal topics (repartition sources and changelogs) with the
/// partition counts they must have (Kafka's `fromPersistedSubtopology` with
/// `computeNumberOfTasks`).
fn tasks_and_internal_topics(
    topology: &Topology,
    partitions: &dyn Fn(&str) -> Option<i32>,
    decided: &BTreeMap<String, i32>,
) -> TasksAndInternalTopics {
    let count = |t: &str| partitions(t).or_else(|| decided.get(t).copied());
    let mut tasks = BTreeMap::new();
    let mut stateful = BTreeSet::new();
    let mut wanted: BTreeMap<String, TopicToCreate> = BTreeMap::new();
    for s in &topology.subtopologies {
        let n = topology
            .subtopology_inputs(&s.id)
            .iter()
            .filter_map(|t| count(t))
            .max()
            .unwrap_or(0);
        tasks.insert(s.id.clone(), n);
        if !s.state_changelog_topics.is_empty() {
            stateful.insert(s.id.clone());
        }
        for t in s
            .repartition_source_topics
            .iter()
            .chain(&s.state_changelog_topics)
        {
            let n = if t.partitions == 0 {
                decided.get(&t.name).copied().unwrap_or(n)
            } else {
                t.partitions
            };
            wanted.insert(t.name.clone(), to_create(t, n));
        }
    }
    (tasks, stateful, wanted)
}

/// Kafka's `missingInternalTopics`: the wanted internal topics that do not exist; existing
/// ones must have the decided partition count (the error's detail otherwise).
fn missing_internal_topics(
    wanted: BTreeMap<String, TopicToCreate>,
    partitions: &dyn Fn(&str) -> Option<i32>,
) -> Result<Vec<TopicToCreate>, String> {
    let mut to_create = Vec::new();
    for (name, t) in wanted {
        match partitions(&name) {
            Some(n) if n != t.partitions => {
                return Err(format!(
                "Existing topic {name} has different number of partitions: expected {}, found {n}",
                t.partitions
            ))
            }
            Some(_) => {}
            None => to_create.push(t),
        }
    }
    Ok(to_create)
}

fn to_create(t: &TopicInfo, partitions: i32) -> TopicToCreate {
    TopicToCreate {
        name: t.name.clone(),
        partitions,
        replication_factor: if t.replication_factor == 0 {
            -1
        } else {
            t.replication_factor
        },
        configs: t.configs.clone(),
    }
}

/// The partition counts of repartition topics declared with 0 partitions (Kafka's
/// `RepartitionTopics.setup`, then `CopartitionedTopicsEnforcer.enforce`): each takes the
/// largest task count among the subtopologies writing to it, found by iterating until
/// nothing changes (a subtopology's task count may itself depend on a repartition topic).
fn decide_partition_counts(
    topology: &Topology,
    partitions: &dyn Fn(&str) -> Option<i32>,
) -> Result<BTreeMap<String, i32>, String> {
    let mut decided: BTreeMap<String, i32> = BTreeMap::new();
    for s in &topology.subtopologies {
        for t in s
            .repartition_source_topics
            .iter()
            .filter(|t| t.partitions != 0)
        {
            decided.insert(t.name.clone(), t.partitions);
        }
    }
    let flexible: BTreeSet<String> = topology
        .subtopologies
        .iter()
        .flat_map(|s| &s.repartition_source_topics)
        .filter(|t| t.partitions == 0)
        .map(|t| t.name.clone())
        .collect();
    // Each round settles at least one topic or stops.
    for _ in 0..=flexible.len() {
        let mut progress = false;
        let open: Vec<&String> = flexible
            .iter()
            .filter(|t| !decided.contains_key(*t))
            .collect();
        for topic in open {
            let writers = topology
                .subtopologies
                .iter()
                .filter(|s| s.repartition_sink_topics.contains(topic));
            let mut best = None;
            for w in writers {
                let counts: Vec<i32> = topology
                    .subtopology_inputs(&w.id)
                    .iter()
                    .filter_map(|t| partitions(t).or_else(|| decided.get(t).copied()))
                    .collect();
                best = best.max(counts.into_iter().max());
            }
            if let Some(n) = best {
                decided.insert(topic.clone(), n);
                progress = true;
            }
        }
        if !progress {
            break;
        }
    }
    if let Some(t) = flexible.iter().find(|t| !decided.contains_key(*t)) {
        return Err(format!(
            "Unable to determine the number of partitions of topic {t}."
        ));
    }
    enforce_copartitioning(topology, &flexible, partitions, &mut decided)?;
    Ok(decided)
}

/// Kafka's `CopartitionedTopicsEnforcer.enforce`: the topics of a copartition group must
/// have one partition count; repartition topics whose count the coordinator decides take the
/// fixed topics' count, or the largest of theirs when none is fixed.
fn enforce_copartitioning(
    topology: &Topology,
    flexible: &BTreeSet<String>,
    partitions: &dyn Fn(&str) -> Option<i32>,
    decided: &mut BTreeMap<String, i32>,
) -> Result<(), String> {
    for s in &topology.subtopologies {
        for (sources, repartition) in &s.copartition_groups {
            let names: Vec<String> = sources
                .iter()
                .filter_map(|i| s.source_topics.get(*i as usize).cloned())
                .chain(
                    repartition
                        .iter()
                        .filter_map(|i| s.repartition_source_topics.get(*i as usize))
                        .map(|t| t.name.clone()),
                )
                .collect();
            let fixed: BTreeSet<i32> = names
                .iter()
                .filter(|t| !flexible.contains(*t))
                .filter_map(|t| partitions(t).or_else(|| decided.get(t).copied()))
                .collect();
            if fixed.len() > 1 {
                return Err(format!(
                    "Following topics do not have the same number of partitions: {}",
                    summarize(&names)
                ));
            }
            let n = match fixed.first() {
                Some(n) => *n,
                None => names
                    .iter()
                    .filter_map(|t| decided.get(t).copied())
                    .max()
                    .unwrap_or(0),
            };
            for t in names.iter().filter(|t| flexible.contains(*t)) {
                decided.insert(t.clone(), n);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, partitions: i32) -> TopicInfo {
        TopicInfo {
            name: name.into(),
            partitions,
            replication_factor: 0,
            configs: BTreeMap::new(),
        }
    }

    /// A word count with a repartition: subtopology 0 reads `input` (3 partitions) and
    /// writes the repartition topic, subtopology 1 reads it and keeps a store.
    fn word_count() -> Topology {
        Topology {
            epoch: 0,
            subtopologies: vec![
                Subtopology {
                    id: "0".into(),
                    source_topics: vec!["input".into()],
                    repartition_sink_topics: vec!["app-repartition".into()],
                    state_changelog_topics: vec![],
                    repartition_source_topics: vec![],
                    copartition_groups: vec![],
                },
                Subtopology {
                    id: "1".into(),
                    source_topics: vec![],
                    repartition_sink_topics: vec![],
                    state_changelog_topics: vec![info("app-changelog", 0)],
                    repartition_source_topics: vec![info("app-repartition", 0)],
                    copartition_groups: vec![],
                },
            ],
        }
    }

    #[test]
    fn internal_topics_take_the_upstream_partition_count() {
        let only_input = |t: &str| (t == "input").then_some(3);
        let c = configure(&word_count(), &only_input);
        assert_eq!(
            c.status.as_ref().map(|s| s.0),
            Some(status::MISSING_INTERNAL_TOPICS)
        );
        let created: Vec<(&str, i32)> = c
            .to_create
            .iter()
            .map(|t| (t.name.as_str(), t.partitions))
            .collect();
        assert_eq!(created, vec![("app-changelog", 3), ("app-repartition", 3)]);
        assert!(!c.is_ready());

        let all = |t: &str| (t != "nothing").then_some(3);
        let c = configure(&word_count(), &all);
        assert!(c.is_ready(), "{c:?}");
        assert_eq!(c.tasks, BTreeMap::from([("0".into(), 3), ("1".into(), 3)]));
        assert_eq!(c.stateful, BTreeSet::from(["1".to_string()]));
    }

    #[test]
    fn missing_source_and_mispartitioned_internal_topics_are_reported() {
        let none = |_: &str| None;
        let c = configure(&word_count(), &none);
        assert_eq!(
            c.status,
            Some((
                status::MISSING_SOURCE_TOPICS,
                "Source topics input are missing.".into()
            ))
        );
        let wrong = |t: &str| Some(if t == "app-changelog" { 5 } else { 3 });
        let c = configure(&word_count(), &wrong);
        assert_eq!(
            c.status.map(|s| s.0),
            Some(status::INCORRECTLY_PARTITIONED_TOPICS)
        );
    }
}

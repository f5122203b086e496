//! The `sticky` task assignor of streams groups, after Kafka's
//! `streams.assignor.StickyTaskAssignor`: the active tasks of stateful subtopologies are
//! placed first, under a quota of the stateful tasks over the members (rounded up), then the
//! stateless ones, under a quota of all active tasks over the members. A task stays with its
//! previous member while that member is under the quota, then goes to a previous
//! standby holder under quota, then to the least loaded process (load: tasks per member of
//! the process) and its least loaded member. Standby tasks of stateful subtopologies go to
//! processes that hold no copy of the task yet, previous holders first, least loaded next.
//! Ties break by process and member id, so the assignment is deterministic.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::streams::{Tasks, TasksTuple};

/// One member as the assignor sees it.
#[derive(Debug, Clone)]
pub struct AssignMember {
    pub member_id: String,
    pub process_id: String,
    /// Its previous target assignment.
    pub previous: TasksTuple,
}

type TaskId = (String, i32);

struct State<'a> {
    members: &'a [AssignMember],
    /// Member index → its tasks (active and standby), for load.
    load: Vec<usize>,
    active: Vec<Vec<TaskId>>,
    standby: Vec<Vec<TaskId>>,
    /// Process → its member indices.
    processes: BTreeMap<&'a str, Vec<usize>>,
}

impl State<'_> {
    fn process_load(&self, process: &str) -> f64 {
        let ms = &self.processes[process];
        ms.iter().map(|m| self.load[*m]).sum::<usize>() as f64 / ms.len() as f64
    }

    /// The least loaded member of the least loaded process among `allowed`.
    fn least_loaded(&self, allowed: &dyn Fn(&str) -> bool) -> Option<usize> {
        let process = self
            .processes
            .keys()
            .filter(|p| allowed(p))
            .min_by(|a, b| self.process_load(a).total_cmp(&self.process_load(b)))?;
        self.processes[process]
            .iter()
            .copied()
            .min_by_key(|m| (self.load[*m], &self.members[*m].member_id))
    }

    /// Whether `task` is on `process` already, as active or standby.
    fn on_process(&self, process: &str, task: &TaskId) -> bool {
        self.processes[process]
            .iter()
            .any(|m| self.active[*m].contains(task) || self.standby[*m].contains(task))
    }
}

/// Assigns the tasks of `tasks` (subtopology → task count) to `members`.
pub fn assign(
    members: &[AssignMember],
    tasks: &BTreeMap<String, i32>,
    stateful: &BTreeSet<String>,
    num_standby: usize,
) -> HashMap<String, TasksTuple> {
    let mut st = State {
        members,
        load: vec![0; members.len()],
        active: vec![Vec::new(); members.len()],
        standby: vec![Vec::new(); members.len()],
        processes: BTreeMap::new(),
    };
    for (i, m) in members.iter().enumerate() {
        st.processes
            .entry(m.process_id.as_str())
            .or_default()
            .push(i);
    }
    if !members.is_empty() {
        let (stateful_tasks, stateless_tasks): (BTreeMap<_, _>, BTreeMap<_, _>) = tasks
            .iter()
            .map(|(s, n)| (s.clone(), *n))
            .partition(|(s, _)| stateful.contains(s));
        let total: i32 = tasks.values().sum();
        let stateful_total: i32 = stateful_tasks.values().sum();
        assign_active(
            &mut st,
            &stateful_tasks,
            quota(stateful_total, members.len()),
        );
        assign_active(&mut st, &stateless_tasks, quota(total, members.len()));
        if num_standby > 0 {
            assign_standby(&mut st, tasks, stateful, num_standby);
        }
    }
    let group = |ts: &[TaskId]| {
        let mut out = Tasks::new();
        for (s, p) in ts {
            out.entry(s.clone()).or_default().insert(*p);
        }
        out
    };
    members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let t = TasksTuple {
                active: group(&st.active[i]),
                standby: group(&st.standby[i]),
                warmup: Tasks::new(),
            };
            (m.member_id.clone(), t)
        })
        .collect()
}

fn holders(
    members: &[AssignMember],
    pick: fn(&TasksTuple) -> &Tasks,
) -> HashMap<TaskId, Vec<usize>> {
    let mut out: HashMap<TaskId, Vec<usize>> = HashMap::new();
    for (i, m) in members.iter().enumerate() {
        for (s, ps) in pick(&m.previous) {
            for p in ps {
                out.entry((s.clone(), *p)).or_default().push(i);
            }
        }
    }
    out
}

/// Tasks per member, rounded up (Kafka's `computeTasksPerMember`).
fn quota(tasks: i32, members: usize) -> usize {
    (tasks.max(0) as usize).div_ceil(members.max(1))
}

fn assign_active(st: &mut State, tasks: &BTreeMap<String, i32>, quota: usize) {
    // By partition first: members then get the same partitions of every subtopology.
    let mut todo: Vec<TaskId> = tasks
        .iter()
        .flat_map(|(s, n)| (0..*n).map(move |p| (s.clone(), p)))
        .collect();
    todo.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    let under = |st: &State, m: usize| st.load[m] < quota;
    let prev_active = holders(st.members, |t| &t.active);
    let prev_standby = holders(st.members, |t| &t.standby);
    let mut rest = Vec::new();
    for task in todo {
        let prev = prev_active.get(&task).and_then(|ms| ms.first().copied());
        match prev.filter(|m| under(st, *m)) {
            Some(m) => give_active(st, m, task),
            None => rest.push(task),
        }
    }
    let mut rest2 = Vec::new();
    for task in rest {
        let prev = prev_standby
            .get(&task)
            .and_then(|ms| ms.iter().copied().find(|m| under(st, *m)));
        match prev {
            Some(m) => give_active(st, m, task),
            None => rest2.push(task),
        }
    }
    for task in rest2 {
        if let Some(m) = st.least_loaded(&|_| true) {
            give_active(st, m, task);
        }
    }
}

fn give_active(st: &mut State, m: usize, task: TaskId) {
    st.active[m].push(task);
    st.load[m] += 1;
}

fn assign_standby(
    st: &mut State,
    tasks: &BTreeMap<String, i32>,
    stateful: &BTreeSet<String>,
    num_standby: usize,
) {
    let prev_standby = holders(st.members, |t| &t.standby);
    let todo: Vec<TaskId> = tasks
        .iter()
        .filter(|(s, _)| stateful.contains(*s))
        .flat_map(|(s, n)| (0..*n).map(move |p| (s.clone(), p)))
        .collect();
    for task in todo {
        for _ in 0..num_standby {
            let prev = prev_standby.get(&task).and_then(|ms| {
                ms.iter()
                    .copied()
                    .find(|m| !st.on_process(&st.members[*m].process_id, &task))
            });
            let chosen = prev.or_else(|| st.least_loaded(&|p| !st.on_process(p, &task)));
            let Some(m) = chosen else {
                break;
            };
            st.standby[m].push(task.clone());
            st.load[m] += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, process: &str, previous: TasksTuple) -> AssignMember {
        AssignMember {
            member_id: id.into(),
            process_id: process.into(),
            previous,
        }
    }

    fn count(t: &Tasks) -> usize {
        t.values().map(|p| p.len()).sum()
    }

    #[test]
    fn balances_then_sticks() {
        let tasks = BTreeMap::from([("0".to_string(), 3), ("1".to_string(), 3)]);
        let one = assign(
            &[member("a", "p1", TasksTuple::default())],
            &tasks,
            &BTreeSet::new(),
            0,
        );
        assert_eq!(count(&one["a"].active), 6);
        let two = assign(
            &[
                member("a", "p1", one["a"].clone()),
                member("b", "p2", TasksTuple::default()),
            ],
            &tasks,
            &BTreeSet::new(),
            0,
        );
        assert_eq!(count(&two["a"].active), 3);
        assert_eq!(count(&two["b"].active), 3);
        // `a` kept tasks it had; nothing is assigned twice.
        for (s, ps) in &two["b"].active {
            assert!(two["a"].active.get(s).is_none_or(|q| q.is_disjoint(ps)));
        }
    }

    #[test]
    fn standbys_go_to_other_processes() {
        let tasks = BTreeMap::from([("1".to_string(), 2)]);
        let stateful = BTreeSet::from(["1".to_string()]);
        let members = [
            member("a", "p1", TasksTuple::default()),
            member("b", "p2", TasksTuple::default()),
        ];
        let out = assign(&members, &tasks, &stateful, 1);
        for m in ["a", "b"] {
            assert_eq!(count(&out[m].active), 1);
            assert_eq!(count(&out[m].standby), 1);
            assert!(out[m].active != out[m].standby);
        }
    }
}

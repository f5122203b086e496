//! The labs the live page runs against this cluster, step by step (docs/LABS.md, "Labs on
//! the live page"). The definitions are data, `labs.json`, compiled in: each lab has the
//! article's claim and its steps, each step an action and the outcome it expects, named by
//! observations. The page's picker and the CI test (`protocol-tests/tests/page_labs.rs`) both
//! run them through this API, so they cannot disagree:
//!
//! - `GET /v1/labs`: every lab's definition and the state of its current run;
//! - `POST /v1/labs/{name}/reset`: a fresh run, on a new topic;
//! - `POST /v1/labs/{name}/step`: runs the run's next step and answers what it expected and
//!   what it observed, side by side (`pass` when they are equal).
//!
//! Actions are what a user does: create the topic, produce, run a transaction or consume
//! with a real client (librdkafka, the `lab_client` binary next to `brook`, or
//! `BROOK_LAB_CLIENT`), add link fault rules, kill or restart a node through the supervisor.
//! Observations come from what the client printed (offsets, records read) and from the
//! nodes' `/v1/partitions` views of the lab's topic (ISR, high watermark, log end offsets,
//! last stable offset, aborted ranges); a step waits, up to [`STEP_SETTLE_MS_MAX`], for the
//! views to show what it expects, since replication and elections take their time, and
//! answers what they show then.

use super::*;

use serde::Deserialize;

/// The labs, as data.
const LABS_JSON: &str = include_str!("labs.json");
/// How long a step waits for the views to show its expected outcome (an election waits for
/// `broker.session.timeout.ms`, 9 s by default, to fence the killed leader; an ISR shrink
/// for `replica.lag.time.max.ms`, 30 s by default, plus the period of the leader's check).
pub const STEP_SETTLE_MS_MAX: u64 = 60_000;
/// Pause between two readings of the views while a step settles: the views are the only
/// source of these values (no event carries a high watermark), so they are read again.
const VIEW_POLL_INTERVAL_MS: u64 = 100;
/// Bound on one run of the lab client (its own calls are bounded at 30 s each).
const CLIENT_RUN_MS_MAX: u64 = 90_000;
/// How long the followers' replication link rules may take to fire (they fetch at least every
/// `replica.fetch.wait.max.ms`, 500 ms).
const RULE_FIRED_MS_MAX: u64 = 5_000;
/// The environment variable naming the lab client binary.
pub const LAB_CLIENT_ENV: &str = "BROOK_LAB_CLIENT";

/// One lab, as `labs.json` defines it.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LabDef {
    name: String,
    title: String,
    /// Where docs/LABS.md describes the same scenario.
    article: String,
    claim: String,
    topic: TopicDef,
    steps: Vec<StepDef>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct TopicDef {
    partitions: i32,
    replication_factor: i16,
    configs: BTreeMap<String, String>,
    /// Also create `{topic}.DLT`, one partition, for the dead-letter labs.
    #[serde(default)]
    dead_letter_topic: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct StepDef {
    title: String,
    /// What to look at on the page while the step runs.
    watch: String,
    action: Action,
    /// Observation name to the value it must have.
    expect: Map<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum Action {
    CreateTopic,
    /// `config`: librdkafka settings over the client's defaults (idempotence off, no
    /// retries); `pipelined`: every value sent before any answer is awaited.
    Produce {
        acks: String,
        values: Vec<String>,
        #[serde(default)]
        config: BTreeMap<String, String>,
        #[serde(default)]
        pipelined: bool,
    },
    Transaction {
        values: Vec<String>,
        end: String,
    },
    Consume {
        isolation: String,
    },
    /// A member of the lab's group (`{topic}-group`) reads partition 0 from the group's
    /// committed offset: `take` records (all to the end when absent), processes the first
    /// `process` of them (all when absent), commits synchronously once `commit_after`
    /// records were taken, hands them to a worker thread that dies when `worker_dies`, then
    /// closes (`config` as for `Produce`).
    GroupConsume {
        #[serde(default)]
        take: Option<u32>,
        #[serde(default)]
        process: Option<u32>,
        #[serde(default)]
        commit_after: Option<u32>,
        #[serde(default)]
        worker_dies: bool,
        #[serde(default)]
        config: BTreeMap<String, String>,
    },
    /// Consumer 1 of the group (auto-commit) processes the partition, waits for the
    /// auto-commit, has `values` produced, processes them and exits without closing.
    AutoCommitCrash {
        values: Vec<String>,
    },
    /// The dead-letter loop: `permanent` values go to `{topic}.DLT`, `transient` ones fail
    /// once and are tried again; the offset after the last record is committed.
    DeadLetter {
        permanent: Vec<String>,
        #[serde(default)]
        transient: Vec<String>,
    },
    /// A fault rule (docs/FAULTS.md) scoped to the lab's topic, added on the partition's
    /// leader.
    AddFault {
        rule: Map<String, Value>,
    },
    /// Every running node's fault rules removed.
    Heal,
    /// Link rules: the leader's replication to and from everyone, each follower's to and from
    /// the leader (as `ReplicationScenariosTest` cuts it).
    CutReplication,
    /// SIGKILL of the partition's leader, then the followers' rules cleared.
    KillLeader,
    /// Starts the node `KillLeader` killed.
    RestartKilled,
}

/// The observations a step can expect; anything else in `expect` is a mistake of the file.
const OBSERVATIONS: &[&str] = &[
    "offsets",
    "records",
    "isr_size",
    "high_watermark",
    "log_end_offset",
    "last_stable_offset",
    "follower_log_end_offsets",
    "replica_log_end_offsets",
    "leader_changed",
    "leader_epoch_rose",
    "aborted_ranges",
    "markers",
    "errors",
    "processed",
    "committed_offset",
    "attempts",
    "dead_letters",
];

/// One run of a lab: its topic, the next step and what the steps so far answered.
#[derive(Debug, Clone, Default, Serialize)]
struct LabRun {
    topic: String,
    next: usize,
    results: Vec<Value>,
    /// The partition's leader and leader epoch after the last step.
    leader: i32,
    leader_epoch: i32,
    killed: Option<i32>,
}

/// The labs and their runs; one step runs at a time.
pub(super) struct Labs {
    defs: Vec<LabDef>,
    runs: Mutex<BTreeMap<String, LabRun>>,
    /// Held while a step or a reset runs: one at a time, the others answered 409.
    stepping: tokio::sync::Mutex<()>,
}

impl Labs {
    pub(super) fn load() -> Labs {
        let defs = parse(LABS_JSON).unwrap_or_else(|e| {
            tracing::error!(error = %e, "labs.json is not valid; no labs");
            Vec::new()
        });
        Labs {
            defs,
            runs: Mutex::new(BTreeMap::new()),
            stepping: tokio::sync::Mutex::new(()),
        }
    }

    fn def(&self, name: &str) -> Result<&LabDef, OpError> {
        self.defs
            .iter()
            .find(|d| d.name == name)
            .ok_or_else(|| OpError(StatusCode::NOT_FOUND, format!("no lab {name:?}")))
    }
}

/// The definitions, checked: known observations only, at least one step each.
fn parse(text: &str) -> Result<Vec<LabDef>, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        labs: Vec<LabDef>,
    }
    let file: File = serde_json::from_str(text).map_err(|e| e.to_string())?;
    for lab in &file.labs {
        if lab.steps.is_empty() {
            return Err(format!("lab {} has no steps", lab.name));
        }
        for step in &lab.steps {
            if let Some(k) = step
                .expect
                .keys()
                .find(|k| !OBSERVATIONS.contains(&k.as_str()))
            {
                return Err(format!("lab {}: unknown observation {k:?}", lab.name));
            }
        }
    }
    Ok(file.labs)
}

fn new_run(def: &LabDef) -> LabRun {
    LabRun {
        topic: format!("lab-{}-{}", def.name, unix_ms()),
        leader: -1,
        leader_epoch: -1,
        ..LabRun::default()
    }
}

/// `GET /v1/labs`.
pub(super) async fn list(State(sup): State<Arc<Supervisor>>) -> Response {
    let runs = sup.labs.runs.lock().clone();
    let labs: Vec<Value> = sup
        .labs
        .defs
        .iter()
        .map(|d| json!({ "lab": d, "run": runs.get(&d.name) }))
        .collect();
    Json(json!({ "labs": labs })).into_response()
}

/// `POST /v1/labs/{name}/reset`.
pub(super) async fn reset(
    State(sup): State<Arc<Supervisor>>,
    UrlPath(name): UrlPath<String>,
) -> Result<Json<Value>, OpError> {
    let run = new_run(sup.labs.def(&name)?);
    let _stepping = busy(sup.labs.stepping.try_lock())?;
    sup.labs.runs.lock().insert(name, run.clone());
    Ok(Json(json!({ "run": run })))
}

fn busy<T>(guard: Result<T, tokio::sync::TryLockError>) -> Result<T, OpError> {
    guard.map_err(|_| OpError(StatusCode::CONFLICT, "a lab step is running".into()))
}

/// `POST /v1/labs/{name}/step`: the next step of the run (a new run if there is none or the
/// last one is done).
pub(super) async fn step(
    State(sup): State<Arc<Supervisor>>,
    UrlPath(name): UrlPath<String>,
) -> Result<Json<Value>, OpError> {
    let def = sup.labs.def(&name)?.clone();
    let _stepping = busy(sup.labs.stepping.try_lock())?;
    let current = sup.labs.runs.lock().get(&name).cloned();
    let mut run = current
        .filter(|r| r.next < def.steps.len())
        .unwrap_or_else(|| new_run(&def));
    let answer = run_step(&sup, &def, &mut run).await;
    // Kept even when the action failed: a kill that happened must be known to the restart.
    sup.labs.runs.lock().insert(name, run);
    answer.map(Json)
}

async fn run_step(sup: &Arc<Supervisor>, def: &LabDef, run: &mut LabRun) -> Result<Value, OpError> {
    let index = run.next;
    let step = &def.steps[index];
    sup.note_lab(&def.name, &run.topic, index, "lab_step_started");
    let client = act(sup, def, &step.action, run).await?;
    let (observed, leader) = settle(sup, run, &step.expect, &client).await;
    let pass = Value::Object(observed.clone()) == Value::Object(step.expect.clone());
    if let Some((id, epoch)) = leader {
        (run.leader, run.leader_epoch) = (id, epoch);
    }
    run.next += 1;
    let answer = json!({
        "lab": def.name, "topic": run.topic, "step": index, "title": step.title,
        "expected": step.expect, "observed": observed, "pass": pass,
        "done": run.next >= def.steps.len(),
    });
    run.results.push(answer.clone());
    let kind = if pass {
        "lab_step_passed"
    } else {
        "lab_step_failed"
    };
    sup.note_lab(&def.name, &run.topic, index, kind);
    Ok(answer)
}

impl Supervisor {
    /// A lab step on the timeline.
    fn note_lab(&self, lab: &str, topic: &str, step: usize, kind: &str) {
        let mut obj = Map::new();
        obj.insert("topic".into(), json!(topic));
        obj.insert("partition".into(), json!(0));
        obj.insert("type".into(), json!(kind));
        obj.insert("lab".into(), json!(lab));
        obj.insert("step".into(), json!(step));
        obj.insert("source".into(), json!("supervisor"));
        obj.insert("time_ms".into(), json!(unix_ms()));
        self.events.push_object(obj);
    }

    /// The running nodes' client addresses, comma-separated (a client's bootstrap list).
    fn bootstrap(&self) -> String {
        let views = self.views();
        let alive = views
            .iter()
            .filter(|v| v.alive)
            .filter_map(|v| v.client.clone());
        alive.collect::<Vec<_>>().join(",")
    }
}

fn bad_step(why: impl Into<String>) -> OpError {
    OpError(StatusCode::BAD_GATEWAY, why.into())
}

/// Runs one action; answers what the client printed (`{}` for the others).
async fn act(
    sup: &Arc<Supervisor>,
    def: &LabDef,
    action: &Action,
    run: &mut LabRun,
) -> Result<Map<String, Value>, OpError> {
    let done = |r: Result<(), OpError>| r.map(|_| Map::new());
    match action {
        Action::CreateTopic => done(create_topic(sup, def, &run.topic).await),
        Action::CutReplication => done(cut_replication(sup, run).await),
        Action::KillLeader => done(kill_leader(sup, run).await),
        Action::RestartKilled => {
            let id = run
                .killed
                .ok_or_else(|| bad_step("no node was killed in this run"))?;
            done(sup.start(id).await.map(|_| ()))
        }
        Action::AddFault { rule } => done(add_fault(sup, run, rule).await),
        Action::Heal => done(heal(sup).await),
        client => run_client(sup, client_args(sup, client, run)).await,
    }
}

/// The lab client's command line for a client action.
fn client_args(sup: &Supervisor, action: &Action, run: &LabRun) -> Vec<String> {
    let topic = &run.topic;
    let (cmd, more) = client_command(action, run);
    let mut a = vec![cmd.to_string(), "--bootstrap".into(), sup.bootstrap()];
    a.extend(["--topic".to_string(), topic.clone()]);
    for (k, v) in more {
        a.extend([format!("--{k}"), v]);
    }
    a
}

/// The lab client's command for a client action and its options (name, value).
fn client_command(action: &Action, run: &LabRun) -> (&'static str, Vec<(&'static str, String)>) {
    let topic = &run.topic;
    match action {
        Action::Produce {
            acks,
            values,
            config,
            pipelined,
        } => (
            "produce",
            vec![
                ("acks", acks.clone()),
                ("values", values.join(",")),
                ("config", client_config(config)),
                ("pipelined", pipelined.to_string()),
            ],
        ),
        Action::Transaction { values, end } => (
            "transaction",
            vec![
                ("transactional-id", format!("{topic}-txn-{}", run.next)),
                ("values", values.join(",")),
                ("end", end.clone()),
            ],
        ),
        Action::Consume { isolation } => ("consume", vec![("isolation", isolation.clone())]),
        Action::GroupConsume {
            take,
            process,
            commit_after,
            worker_dies,
            config,
        } => {
            let number = |n: &Option<u32>| n.map_or("all".to_string(), |n| n.to_string());
            (
                "group-consume",
                vec![
                    ("group", format!("{topic}-group")),
                    ("take", number(take)),
                    ("process", number(process)),
                    ("commit-after", commit_after.unwrap_or(0).to_string()),
                    ("worker-dies", worker_dies.to_string()),
                    ("config", client_config(config)),
                ],
            )
        }
        Action::AutoCommitCrash { values } => (
            "auto-commit-crash",
            vec![
                ("group", format!("{topic}-group")),
                ("values", values.join(",")),
            ],
        ),
        Action::DeadLetter {
            permanent,
            transient,
        } => (
            "dead-letter",
            vec![
                ("group", format!("{topic}-group")),
                ("permanent", permanent.join(",")),
                ("transient", transient.join(",")),
            ],
        ),
        _ => ("", Vec::new()),
    }
}

async fn create_topic(sup: &Arc<Supervisor>, def: &LabDef, topic: &str) -> Result<(), OpError> {
    let clients: Vec<String> = sup
        .views()
        .into_iter()
        .filter(|v| v.alive)
        .filter_map(|v| v.client)
        .collect();
    let creator = clients
        .first()
        .ok_or_else(|| bad_step("no node is running"))?;
    let mut specs = vec![topics::TopicSpec {
        name: topic.to_string(),
        partitions: def.topic.partitions,
        replication_factor: def.topic.replication_factor,
        configs: def.topic.configs.clone().into_iter().collect(),
    }];
    if def.topic.dead_letter_topic {
        specs.push(topics::TopicSpec {
            name: format!("{topic}.DLT"),
            partitions: 1,
            replication_factor: def.topic.replication_factor,
            configs: Default::default(),
        });
    }
    let deadline = tokio::time::Instant::now() + Duration::from_millis(STEP_SETTLE_MS_MAX);
    topics::create(&specs, creator, &clients, deadline)
        .await
        .map_err(bad_step)
}

/// The lab client: `BROOK_LAB_CLIENT`, else `lab_client` next to this binary.
fn lab_client(sup: &Supervisor) -> PathBuf {
    match std::env::var_os(LAB_CLIENT_ENV) {
        Some(p) => PathBuf::from(p),
        None => sup.exe.with_file_name("lab_client"),
    }
}

/// Runs the lab client with `args`; answers the JSON object of its last stdout line.
async fn run_client(sup: &Supervisor, args: Vec<String>) -> Result<Map<String, Value>, OpError> {
    let exe = lab_client(sup);
    if !exe.exists() {
        return Err(OpError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "no lab client at {}: build it with `cargo build --bin lab_client` (package \
                 brook-protocol-tests) or name it with {LAB_CLIENT_ENV}",
                exe.display()
            ),
        ));
    }
    let mut cmd = Command::new(&exe);
    cmd.args(&args).stdin(Stdio::null()).kill_on_drop(true);
    let bound = Duration::from_millis(CLIENT_RUN_MS_MAX);
    let out = match tokio::time::timeout(bound, cmd.output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => return Err(bad_step(format!("{}: {e}", exe.display()))),
        Err(_) => {
            return Err(bad_step(format!(
                "the lab client ran longer than {bound:?}"
            )))
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    match serde_json::from_str::<Value>(last) {
        Ok(Value::Object(m)) if out.status.success() => Ok(m),
        _ => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: String = stderr.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
            Err(bad_step(format!(
                "lab client {:?} failed ({}): {tail}",
                args[0], out.status
            )))
        }
    }
}

/// Waits (up to [`STEP_SETTLE_MS_MAX`]) until the observations equal `expect`; answers the
/// last observations and the partition's leader and leader epoch then. Values the client
/// printed do not change by waiting: a difference there ends the wait at once.
async fn settle(
    sup: &Arc<Supervisor>,
    run: &LabRun,
    expect: &Map<String, Value>,
    client: &Map<String, Value>,
) -> (Map<String, Value>, Option<(i32, i32)>) {
    let before = (run.leader, run.leader_epoch);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(STEP_SETTLE_MS_MAX);
    loop {
        let entries = entries(&partition_views(sup, &run.topic).await);
        let observed: Map<String, Value> = expect
            .keys()
            .map(|k| {
                let v = match k.as_str() {
                    "markers" => markers(&sup.events, &run.topic),
                    _ => observe(k, &entries, before, client),
                };
                (k.clone(), v)
            })
            .collect();
        let leader = leader_of(&entries).map(|(id, e)| (id, int(&e["leader_epoch"]) as i32));
        let client_differs = expect
            .iter()
            .any(|(k, v)| client.contains_key(k) && client.get(k) != Some(v));
        if observed == *expect || client_differs || tokio::time::Instant::now() >= deadline {
            return (observed, leader);
        }
        tokio::time::sleep(Duration::from_millis(VIEW_POLL_INTERVAL_MS)).await;
    }
}

/// The transaction markers written on partition 0 of `topic`, by offset: `[offset, "COMMIT"]`
/// or `[offset, "ABORT"]`, from the leaders' `txn_marker` events in the supervisor's merged
/// stream (the partition views list aborted transactions only, as Kafka's transaction index
/// does; no index keeps commits). Bounded by the stream's ring, like the page's own view.
fn markers(events: &EventLog, topic: &str) -> Value {
    let mut found = BTreeMap::new();
    for e in events.read_after(0, usize::MAX).events {
        let Ok(v) = serde_json::from_str::<Value>(&e.json) else {
            continue;
        };
        if v["type"] == json!("txn_marker")
            && v["topic"] == json!(topic)
            && v["partition"] == json!(0)
        {
            let kind = if v["committed"] == json!(true) {
                "COMMIT"
            } else {
                "ABORT"
            };
            found.insert(int(&v["offset"]), kind);
        }
    }
    json!(found
        .into_iter()
        .map(|(o, k)| json!([o, k]))
        .collect::<Vec<_>>())
}

/// Every node's `/v1/partitions` of `topic`, as the merged view gives it.
async fn partition_views(sup: &Supervisor, topic: &str) -> Value {
    let targets = sup.targets();
    let path = format!("/v1/partitions?topic={topic}");
    tokio::task::spawn_blocking(move || crate::supervisor_views::merged_get(&targets, &path))
        .await
        .unwrap_or(Value::Null)
}

/// Each answering node's own entry for partition 0 of the lab's topic, by node id.
fn entries(views: &Value) -> BTreeMap<i32, Value> {
    let Some(nodes) = views.get("nodes").and_then(Value::as_object) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for (id, answer) in nodes {
        let parts = answer.get("partitions").and_then(Value::as_array);
        let p0 = parts.and_then(|ps| ps.iter().find(|p| p["partition"] == json!(0)));
        if let (Ok(id), Some(p)) = (id.parse::<i32>(), p0) {
            out.insert(id, p.clone());
        }
    }
    out
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(-1)
}

/// The node that leads the partition by its own account (the highest leader epoch, should
/// a deposed leader not have heard yet).
fn leader_of(entries: &BTreeMap<i32, Value>) -> Option<(i32, &Value)> {
    entries
        .iter()
        .filter(|(_, e)| e["role"] == json!("leader"))
        .max_by_key(|(_, e)| int(&e["leader_epoch"]))
        .map(|(id, e)| (*id, e))
}

/// One observation: the client's own value, or one read from the views.
fn observe(
    key: &str,
    entries: &BTreeMap<i32, Value>,
    (leader_before, epoch_before): (i32, i32),
    client: &Map<String, Value>,
) -> Value {
    if let Some(v) = client.get(key) {
        return v.clone();
    }
    let Some((leader, lead)) = leader_of(entries) else {
        return Value::Null;
    };
    let replicas: Vec<i64> = lead["replicas"]
        .as_array()
        .into_iter()
        .flatten()
        .map(int)
        .collect();
    let own_leo = |id: i64| {
        entries
            .get(&(id as i32))
            .map_or(-1, |e| int(&e["log_end_offset"]))
    };
    let leos = |ids: Vec<i64>| -> Value {
        let mut v: Vec<i64> = ids.into_iter().map(own_leo).collect();
        v.sort_unstable();
        json!(v)
    };
    match key {
        "isr_size" => json!(lead["isr"].as_array().map_or(0, Vec::len)),
        "high_watermark" | "log_end_offset" | "last_stable_offset" => lead[key].clone(),
        "follower_log_end_offsets" => leos(
            replicas
                .into_iter()
                .filter(|r| *r != i64::from(leader))
                .collect(),
        ),
        "replica_log_end_offsets" => leos(replicas),
        "leader_changed" => json!(leader != leader_before),
        "leader_epoch_rose" => json!(int(&lead["leader_epoch"]) > i64::from(epoch_before)),
        "aborted_ranges" => {
            let aborted = lead["aborted_transactions"]
                .as_array()
                .into_iter()
                .flatten();
            json!(aborted
                .map(|a| json!([a["first_offset"], a["marker_offset"]]))
                .collect::<Vec<_>>())
        }
        _ => Value::Null,
    }
}

/// The partition's leader and its followers, now.
async fn leader_and_followers(
    sup: &Arc<Supervisor>,
    topic: &str,
) -> Result<(i32, Vec<i32>), OpError> {
    let entries = entries(&partition_views(sup, topic).await);
    let (leader, lead) =
        leader_of(&entries).ok_or_else(|| bad_step("the partition has no leader"))?;
    let followers = lead["replicas"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| int(r) as i32)
        .filter(|r| *r != leader)
        .collect();
    Ok((leader, followers))
}

/// A call to node `id`'s fault API (blocking, off the runtime).
async fn node_faults(
    sup: &Supervisor,
    id: i32,
    method: &'static str,
    body: Option<Value>,
) -> Result<Value, OpError> {
    let admin = super::http::node_admin(sup, id)?;
    let answer = tokio::task::spawn_blocking(move || {
        crate::supervisor_views::forward(method, admin, "/faults", body)
    })
    .await
    .map_err(|e| bad_step(e.to_string()))?;
    match answer {
        Ok((status, v)) if status.is_success() => Ok(v),
        Ok((status, v)) => Err(bad_step(format!("node {id} /faults: {status} {v}"))),
        Err(e) => Err(bad_step(e)),
    }
}

async fn cut_replication(sup: &Arc<Supervisor>, run: &LabRun) -> Result<(), OpError> {
    let (leader, followers) = leader_and_followers(sup, &run.topic).await?;
    // Spent rules of earlier labs (a drop-response that fired once) would count as fired
    // below and end the wait before the cut holds: start from no rules.
    heal(sup).await?;
    let rule = |to: Value| json!({"action": "partition", "to": to, "direction": "both", "traffic": "replication"});
    node_faults(sup, leader, "POST", Some(rule(json!("*")))).await?;
    for f in &followers {
        node_faults(sup, *f, "POST", Some(rule(json!(leader)))).await?;
    }
    // Once a follower's own rule has fired, its next fetch is cut, and no fetch of it is
    // parked on the leader that could still carry a record appended after this
    // (`ReplicationScenariosTest.cutReplicationWithLinkFaults` waits the same way).
    let deadline = tokio::time::Instant::now() + Duration::from_millis(RULE_FIRED_MS_MAX);
    for f in &followers {
        loop {
            let rules = node_faults(sup, *f, "GET", None).await?;
            let fired: i64 = rules["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| int(&r["fired"]))
                .sum();
            if fired > 0 {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(bad_step(format!(
                    "node {f}'s replication rule did not fire within {RULE_FIRED_MS_MAX} ms"
                )));
            }
            tokio::time::sleep(Duration::from_millis(VIEW_POLL_INTERVAL_MS)).await;
        }
    }
    Ok(())
}

/// `k=v` pairs joined with `,`, as the lab client's `--config` takes them.
fn client_config(config: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = config.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(",")
}

async fn add_fault(
    sup: &Arc<Supervisor>,
    run: &LabRun,
    rule: &Map<String, Value>,
) -> Result<(), OpError> {
    let (leader, _) = leader_and_followers(sup, &run.topic).await?;
    let mut rule = rule.clone();
    rule.insert("topic".into(), json!(run.topic));
    node_faults(sup, leader, "POST", Some(Value::Object(rule))).await?;
    Ok(())
}

/// Removes every running node's rules (a killed node's went with its process).
async fn heal(sup: &Arc<Supervisor>) -> Result<(), OpError> {
    let alive: Vec<i32> = sup
        .views()
        .iter()
        .filter(|v| v.alive)
        .map(|v| v.id)
        .collect();
    for id in alive {
        node_faults(sup, id, "DELETE", None).await?;
    }
    Ok(())
}

async fn kill_leader(sup: &Arc<Supervisor>, run: &mut LabRun) -> Result<(), OpError> {
    let (leader, followers) = leader_and_followers(sup, &run.topic).await?;
    sup.signal(leader, Sig::Kill).await?;
    run.killed = Some(leader);
    // The killed leader's rules went with its process; the followers' would keep them from
    // fetching from it once it is back.
    for f in &followers {
        node_faults(sup, *f, "DELETE", None).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiled_in_labs_parse() {
        let labs = parse(LABS_JSON).expect("labs.json");
        let names: Vec<&str> = labs.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names.len(), 14, "{names:?}");
        assert_eq!(names[4], "acks1-lost-write");
    }

    #[test]
    fn an_unknown_observation_is_refused() {
        let bad = LABS_JSON.replacen("\"isr_size\"", "\"isr_count\"", 1);
        assert!(parse(&bad).unwrap_err().contains("isr_count"));
    }

    #[test]
    fn observations_read_the_leaders_entry() {
        let views = json!({"nodes": {
            "1": {"partitions": [{"partition": 0, "role": "follower", "leader_epoch": 1, "log_end_offset": 1}]},
            "2": {"partitions": [{"partition": 0, "role": "leader", "leader_epoch": 1, "replicas": [1, 2, 3],
                  "isr": [1, 2, 3], "high_watermark": 1, "log_end_offset": 2,
                  "aborted_transactions": [{"first_offset": 3, "marker_offset": 5}]}]},
            "3": {"error": "node is not running"}}});
        let e = entries(&views);
        let client = Map::new();
        let o = |k| observe(k, &e, (1, 0), &client);
        assert_eq!(o("isr_size"), json!(3));
        assert_eq!(o("follower_log_end_offsets"), json!([-1, 1]));
        assert_eq!(o("replica_log_end_offsets"), json!([-1, 1, 2]));
        assert_eq!(o("leader_changed"), json!(true));
        assert_eq!(o("leader_epoch_rose"), json!(true));
        assert_eq!(o("aborted_ranges"), json!([[3, 5]]));
    }
}

//! The version matrix: every API key a node advertises, at every version from its advertised
//! minimum to its maximum, sent as a realistic request that reaches the handler's full path.
//! Each answer must arrive, decode at its version, and mean what the newest version's answer
//! means: each API has a case, a request builder and a "meaning" (a normalized summary that
//! leaves out what older versions lack), and the summary at each version is compared with
//! the summary at the maximum. An advertised key without a case is a failure, so a new API or
//! version cannot go uncovered. APIs that change state get a fresh topic, group or
//! transactional id at each version, so that every version meets the same situation.
//!
//! Given Brook's fault rules ([`Faults`]), a second pass answers each API with an error rule:
//! where the newest version gets an error answer, every version must get the same one.

/// `(partition, error)` of every partition of every topic of an answer, in order (the
/// answers' structures differ by API but share these field names).
macro_rules! partition_codes {
    ($topics:expr) => {{
        let mut codes: Vec<(i32, i16)> = $topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (p.partition_index, p.error_code))
            })
            .collect();
        codes.sort();
        codes
    }};
}

pub mod acls;
pub mod cases;
pub mod env;
pub mod features;
pub mod groups;
pub mod share;
pub mod share_state;
pub mod streams;
pub mod txns;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest};
use kafka_protocol::protocol::StrBytes;

pub use env::Env;

/// What a version's answer means, less what that version lacks.
pub type Meaning = String;

/// One API's case: `run` sends the request at a version and returns its meaning.
pub struct Case {
    pub key: ApiKey,
    pub run: fn(&mut Env, i16) -> Result<Meaning, String>,
    /// Versions below this are advertised but answered by closing the connection (the case
    /// checks the close itself); their meaning is not compared with the maximum's.
    pub served_from: i16,
}

/// `label` and `items` in order: a meaning that does not depend on answer order.
pub fn sorted<T: std::fmt::Debug + Ord>(
    label: &str,
    items: impl IntoIterator<Item = T>,
) -> Meaning {
    let mut items: Vec<T> = items.into_iter().collect();
    items.sort();
    format!("{label} {items:?}")
}

/// Advertised version ranges by API key.
pub type Advertised = BTreeMap<i16, (i16, i16)>;

/// Brook's fault rules, for the fault pass: an `error` rule makes a node answer a request
/// with an error code without processing it (`error_response` in broker/src/api/mod.rs), or
/// close the connection for an API without an error form.
pub trait Faults {
    /// Answers every request of `key` from `client_id` with `error_code`, from now on.
    fn error_for(&self, key: ApiKey, client_id: &str, error_code: i16);
    /// Removes every rule.
    fn clear(&self);
}

/// The client id whose requests the fault pass's rules match.
pub const FAULT_CLIENT_ID: &str = "brook-version-matrix-faults";
/// The error the fault pass injects (NOT_LEADER_OR_FOLLOWER: a partition-level error every
/// error form carries).
pub const FAULT_ERROR_CODE: i16 = 6;

/// The result of one matrix run.
#[derive(Debug, Default)]
pub struct Report {
    pub pairs: usize,
    pub failures: Vec<String>,
    pub seconds: f64,
}

/// ApiVersions v3 from `bootstrap`: what the node advertises.
pub fn advertised(bootstrap: &str) -> Advertised {
    let first = bootstrap.split(',').next().unwrap_or(bootstrap);
    let mut c = crate::WireClient::connect(first);
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("brook-version-matrix"))
        .with_client_software_version(StrBytes::from_static_str("1.0"));
    let r = c.request(3, &req);
    assert_eq!(r.error_code, 0, "ApiVersions: {r:?}");
    r.api_keys
        .iter()
        .map(|k| (k.api_key, (k.min_version, k.max_version)))
        .collect()
}

/// Keeps, for each key of `a`, the versions `b` advertises too (a reference broker's run
/// compares only versions both sides serve).
pub fn intersect(a: &Advertised, b: &Advertised) -> Advertised {
    a.iter()
        .filter_map(|(k, (lo, hi))| {
            let (blo, bhi) = b.get(k)?;
            let (lo, hi) = ((*lo).max(*blo), (*hi).min(*bhi));
            (lo <= hi).then_some((*k, (lo, hi)))
        })
        .collect()
}

/// Runs one case at one version; a panic (an answer that does not decode) is a failure.
fn run_pair(env: &mut Env, case: &Case, v: i16) -> Result<Meaning, String> {
    let r = catch_unwind(AssertUnwindSafe(|| (case.run)(env, v))).unwrap_or_else(|p| {
        Err(p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".into()))
    });
    if r.is_err() {
        env.reset();
    }
    r
}

/// Runs the matrix over `advertised` against the node(s) behind `bootstrap`; with `faults`,
/// then the fault pass.
pub fn run(bootstrap: &str, advertised: &Advertised, faults: Option<&dyn Faults>) -> Report {
    let t0 = Instant::now();
    let mut env = Env::connect(bootstrap);
    env.build_fixture();
    // A pair that panics (an answer that does not decode) is reported with the others: one
    // line each instead of a backtrace each.
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| eprintln!("version matrix: {info}")));
    let mut report = Report::default();
    // Each API's meaning at its newest version, without faults.
    let mut newest: BTreeMap<i16, Meaning> = BTreeMap::new();
    for (&key, &(min, max)) in advertised {
        let Ok(api) = ApiKey::try_from(key) else {
            report
                .failures
                .push(format!("advertised api key {key} is unknown to the codec"));
            continue;
        };
        let Some(case) = cases::case(api) else {
            report.failures.push(format!(
                "{api:?} (key {key}) is advertised {min}..={max} but has no case"
            ));
            continue;
        };
        if let Some(m) = run_case(&mut env, &case, min, max, &mut report) {
            newest.insert(case.key as i16, m);
        }
    }
    if let Some(faults) = faults {
        fault_pass(&mut env, advertised, &newest, faults, &mut report);
    }
    std::panic::set_hook(previous_hook);
    report.seconds = t0.elapsed().as_secs_f64();
    report
}

/// One API from `max` down to `min`, each version's meaning against the maximum's; returns
/// the maximum's.
fn run_case(
    env: &mut Env,
    case: &Case,
    min: i16,
    max: i16,
    report: &mut Report,
) -> Option<Meaning> {
    let t = Instant::now();
    let newest = run_pair(env, case, max);
    report.pairs += 1;
    let newest = match newest {
        Ok(m) => m,
        Err(e) => {
            report.failures.push(format!("{:?} v{max}: {e}", case.key));
            return None;
        }
    };
    for v in (min..max).rev() {
        report.pairs += 1;
        match run_pair(env, case, v) {
            Err(e) => report.failures.push(format!("{:?} v{v}: {e}", case.key)),
            Ok(m) if v >= case.served_from && m != newest => report.failures.push(format!(
                "{:?} v{v} means\n    {m}\n  but v{max} means\n    {newest}",
                case.key
            )),
            Ok(_) => {}
        }
    }
    eprintln!(
        "version matrix: {:?} v{min}..=v{max} in {} ms; v{max} means {newest}",
        case.key,
        t.elapsed().as_millis()
    );
    Some(newest)
}

/// Every case again with a fault rule answering its API with an error: an API whose newest
/// version gets an error answer must get one at every version, decoded and meaning the same
/// (an answer that cannot be encoded closes the connection instead).
fn fault_pass(
    env: &mut Env,
    advertised: &Advertised,
    unfaulted: &BTreeMap<i16, Meaning>,
    faults: &dyn Faults,
    report: &mut Report,
) {
    let mut answered = Vec::new();
    for (&key, &(min, max)) in advertised {
        let Some(case) = ApiKey::try_from(key).ok().and_then(cases::case) else {
            continue; // reported by the first pass
        };
        faults.error_for(case.key, FAULT_CLIENT_ID, FAULT_ERROR_CODE);
        env.set_client_id(FAULT_CLIENT_ID);
        report.pairs += 1;
        if let Ok(newest) = run_pair(env, &case, max) {
            answered.push(case.key);
            if unfaulted.get(&key) == Some(&newest) {
                report.failures.push(format!(
                    "{:?}: the error fault rule did not change the answer",
                    case.key
                ));
            }
            for v in (min.max(case.served_from)..max).rev() {
                report.pairs += 1;
                match run_pair(env, &case, v) {
                    Err(e) => report.failures.push(format!("{:?} v{v} under an error fault rule: {e}", case.key)),
                    Ok(m) if m != newest => report.failures.push(format!(
                        "{:?} v{v} under an error fault rule means\n    {m}\n  but v{max} means\n    {newest}",
                        case.key
                    )),
                    Ok(_) => {}
                }
            }
        }
        env.set_client_id(env::CLIENT_ID);
        faults.clear();
    }
    eprintln!("version matrix: error fault rules answered {answered:?} at every version; the other APIs closed");
}

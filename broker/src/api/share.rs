//! KIP-932 share groups: ShareGroupHeartbeat and ShareGroupDescribe (the group coordinator,
//! [`crate::group::share`]), ShareFetch and ShareAcknowledge (the partition leader's
//! share-partitions, [`crate::share`]).
//!
//! A ShareFetch first applies its piggybacked acknowledgements, then acquires records for
//! the member, long-polling like Fetch (`max_wait_ms`) on appends to its partitions and on
//! share-partition changes (a release or an acknowledgement), and waking at the earliest
//! acquisition lock deadline, when locked records become acquirable again.
//!
//! From v2 (KIP-1222) an acknowledgement may RENEW a record's acquisition lock; a ShareFetch
//! with `IsRenewAck` only acknowledges (it must ask for nothing: zero bytes, records and
//! wait), as Kafka's `KafkaApis.handleShareFetchRequest`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

use super::fetch::FETCH_MAX_WAIT_MS_LIMIT;
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::cluster::partition::Partition;
use crate::group::share::{ShareHeartbeatParams, SHARE_ASSIGNOR};
use crate::security::acl::{AclOperation, ResourceType};
use crate::share::config::ShareGroupSettings;
use crate::share::partition::{MaxRecords, ACKNOWLEDGE_TYPE_RENEW};

/// ShareFetch v2's ShareAcquireMode ids (Kafka's `ShareAcquireMode`).
const ACQUIRE_MODE_BATCH_OPTIMIZED: i8 = 0;
const ACQUIRE_MODE_RECORD_LIMIT: i8 = 1;
use crate::share::{FetchContext, SharePartitionKey};

/// READ on the share group, as Kafka's `KafkaApis` checks for ShareGroupHeartbeat, ShareFetch
/// and ShareAcknowledge (GROUP_AUTHORIZATION_FAILED otherwise).
fn may_read_group(broker: &Broker, ctx: &RequestContext, group: &str) -> bool {
    super::auth_helper::authorize(broker, ctx, AclOperation::Read, ResourceType::Group, group)
}

/// The topics of `ids` this session may not READ (Kafka's `KafkaApis.handleShareFetchRequest`
/// and `handleShareAcknowledgeRequest` filter the request's topics by READ; each partition of
/// the others is answered TOPIC_AUTHORIZATION_FAILED). An id no topic has is left to the
/// partition lookup, which answers UNKNOWN_TOPIC_ID.
fn unreadable_topics(
    broker: &Broker,
    ctx: &RequestContext,
    ids: impl Iterator<Item = Uuid>,
) -> HashSet<Uuid> {
    if broker.authorizer().is_none() {
        return HashSet::new();
    }
    ids.filter(|&id| {
        broker.replicas.topic_name_by_id(id).is_some_and(|name| {
            !super::auth_helper::authorize(
                broker,
                ctx,
                AclOperation::Read,
                ResourceType::Topic,
                &name,
            )
        })
    })
    .collect()
}

/// Kafka's `KafkaApis.handleShareGroupHeartbeat`: every subscribed topic needs DESCRIBE, or the
/// heartbeat is answered TOPIC_AUTHORIZATION_FAILED before the coordinator sees it.
fn may_describe_topics(broker: &Broker, ctx: &RequestContext, names: &[TopicName]) -> bool {
    names.iter().all(|t| {
        super::auth_helper::authorize(broker, ctx, AclOperation::Describe, ResourceType::Topic, t)
    })
}

fn topic_denied() -> (ResponseError, String) {
    let e = ResponseError::TopicAuthorizationFailed;
    (e, e.to_string())
}

/// ShareGroupHeartbeat.
pub async fn handle_share_group_heartbeat(
    broker: &Broker,
    ctx: &RequestContext,
    req: ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
    use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
    let interval = broker
        .groups
        .share_limits(&req.group_id)
        .heartbeat_interval_ms;
    if !crate::api::features::enabled(broker, crate::features::SHARE_VERSION) {
        return ShareGroupHeartbeatResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code());
    }
    if !may_read_group(broker, ctx, &req.group_id) {
        return ShareGroupHeartbeatResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code())
            .with_heartbeat_interval_ms(interval);
    }
    if !may_describe_topics(
        broker,
        ctx,
        req.subscribed_topic_names.as_deref().unwrap_or(&[]),
    ) {
        return ShareGroupHeartbeatResponse::default()
            .with_error_code(ResponseError::TopicAuthorizationFailed.code());
    }
    let params = ShareHeartbeatParams {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        rack_id: req.rack_id.map(|s| s.to_string()),
        subscribed_topic_names: req
            .subscribed_topic_names
            .map(|ts| ts.into_iter().map(|t| t.to_string()).collect()),
        client_id: ctx.client_id.clone().unwrap_or_default(),
        client_host: ctx.client_host(),
    };
    broker.groups.prepare_write().await;
    let result = broker.groups.share_heartbeat(&req.group_id, params);
    if let Ok(Some(init)) = result.as_ref().map(|r| r.initialize.as_ref()) {
        initialize_share_state(broker, &req.group_id, init).await;
    }
    match result {
        Ok(r) => ShareGroupHeartbeatResponse::default()
            .with_member_id(Some(sb(r.member_id)))
            .with_member_epoch(r.member_epoch)
            .with_heartbeat_interval_ms(interval)
            .with_assignment(r.assignment.map(|a| {
                Assignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(id, ps)| {
                            TopicPartitions::default()
                                .with_topic_id(id)
                                .with_partitions(ps.into_iter().collect())
                        })
                        .collect(),
                )
            })),
        Err(e) => ShareGroupHeartbeatResponse::default()
            .with_error_code(e.error_code())
            .with_error_message(Some(sb(e.to_string())))
            .with_member_id(Some(req.member_id))
            .with_member_epoch(req.member_epoch)
            .with_heartbeat_interval_ms(interval),
    }
}

/// Initializes the share-partitions a heartbeat marked initializing, before the heartbeat is
/// answered (Kafka's `GroupCoordinatorService.shareGroupHeartbeat` composes
/// `persisterInitialize`): those initialized become assignable at the next heartbeat, those
/// that failed are asked for again by a later one (`uninitializeShareGroupState`).
async fn initialize_share_state(
    broker: &Broker,
    group: &str,
    init: &crate::group::share::ShareInitialize,
) {
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    for &(id, partition, start) in &init.partitions {
        let key = (group.to_string(), id, partition);
        let r = broker
            .share
            .persister
            .initialize(broker, &key, init.state_epoch, start)
            .await;
        match r {
            Ok(()) => done.push((id, partition)),
            Err(e) => {
                tracing::warn!(group, topic_id = %id, partition, error = ?e, "share-partition state not initialized");
                failed.push((id, partition));
            }
        }
    }
    if let Err(e) = broker.groups.share_initialized(group, &done, &failed).await {
        // The heartbeat is still answered: the coordinator holds them as initialized in
        // memory, and its next change writes the difference again.
        tracing::warn!(group, error = %e, "initialized share-partitions not written");
    }
}

/// ShareGroupDescribe (share groups; any other group is GROUP_ID_NOT_FOUND, as in Kafka).
pub async fn handle_share_group_describe(
    broker: &Broker,
    ctx: &RequestContext,
    req: ShareGroupDescribeRequest,
) -> ShareGroupDescribeResponse {
    use kafka_protocol::messages::share_group_describe_response as sgd;
    let groups = req
        .group_ids
        .iter()
        .map(|g| {
            let base = sgd::DescribedGroup::default()
                .with_group_id(g.clone())
                .with_authorized_operations(if req.include_authorized_operations {
                    super::auth_helper::authorized_operations(
                        broker,
                        ctx,
                        crate::security::acl::ResourceType::Group,
                        g,
                    )
                } else {
                    i32::MIN
                });
            let d = match broker.groups.describe_share_group(g) {
                Err(e) => {
                    return base
                        .with_error_code(e.error_code())
                        .with_error_message(Some(sb(e.to_string())))
                }
                Ok(d) => d,
            };
            let members = d
                .members
                .into_iter()
                .map(|m| described_member(broker, m))
                .collect();
            base.with_group_state(sb(d.state))
                .with_group_epoch(d.group_epoch)
                .with_assignment_epoch(d.assignment_epoch)
                .with_assignor_name(sb(SHARE_ASSIGNOR))
                .with_members(members)
        })
        .collect();
    ShareGroupDescribeResponse::default().with_groups(groups)
}

/// A share group member as ShareGroupDescribe describes it.
fn described_member(
    broker: &Broker,
    m: crate::group::share::ShareMember,
) -> kafka_protocol::messages::share_group_describe_response::Member {
    use kafka_protocol::messages::share_group_describe_response as sgd;
    let assignment = sgd::Assignment::default().with_topic_partitions(
        m.assigned
            .iter()
            .map(|(id, ps)| {
                sgd::TopicPartitions::default()
                    .with_topic_id(*id)
                    .with_topic_name(sb(broker.groups.topic_name(*id).unwrap_or_default()).into())
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    );
    sgd::Member::default()
        .with_member_id(sb(m.member_id))
        .with_rack_id(m.rack_id.map(sb))
        .with_member_epoch(m.member_epoch)
        .with_client_id(sb(m.client_id))
        .with_client_host(sb(m.client_host))
        .with_subscribed_topic_names(
            m.subscribed_topics
                .into_iter()
                .map(|t| sb(t).into())
                .collect(),
        )
        .with_assignment(assignment)
}

/// A partition's answer: its error, and its acknowledgement's error.
#[derive(Default)]
struct PartitionAnswer {
    error: Option<ResponseError>,
    ack_error: Option<(ResponseError, String)>,
    acquired: crate::share::Acquired,
    leader_epoch: i32,
}

/// The group and member of a share request, both required.
fn member_of(
    group: &Option<GroupId>,
    member: &Option<kafka_protocol::protocol::StrBytes>,
) -> Result<(String, String), (ResponseError, String)> {
    let group = group.as_ref().map(|g| g.to_string()).unwrap_or_default();
    let member = member.as_ref().map(|m| m.to_string()).unwrap_or_default();
    if group.trim().is_empty() {
        return Err((
            ResponseError::InvalidRequest,
            "GroupId can't be empty.".into(),
        ));
    }
    if member.trim().is_empty() {
        return Err((
            ResponseError::InvalidRequest,
            "MemberId can't be empty.".into(),
        ));
    }
    Ok((group, member))
}

/// The partition a share request names, led here.
fn led_partition(
    broker: &Broker,
    topic_id: Uuid,
    index: i32,
) -> Result<Arc<Partition>, ResponseError> {
    let name = broker
        .replicas
        .topic_name_by_id(topic_id)
        .ok_or(ResponseError::UnknownTopicId)?;
    let part = broker.replicas.partition_or_error(&name, index)?;
    if !part.is_leader() {
        return Err(ResponseError::NotLeaderOrFollower);
    }
    Ok(part)
}

/// A share group's settings at this moment: the broker's with the group's `share.*`
/// configs ([`crate::share::config`]).
fn group_settings(broker: &Broker, group: &str) -> ShareGroupSettings {
    broker.share.settings(
        &broker.replicas.config,
        &broker.replicas.group_configs(group),
    )
}

/// The acknowledge types a request may carry (Kafka's `KafkaApis.validateAcknowledgementBatches`):
/// up to REJECT (3) before v2, up to RENEW (4) from v2, and RENEW only in a request that
/// says so (`IsRenewAck`); otherwise the partition's answer is INVALID_REQUEST.
fn check_ack_types(
    version: i16,
    is_renew_ack: bool,
    types: &[i8],
) -> Result<(), (ResponseError, String)> {
    let max = if version >= 2 {
        ACKNOWLEDGE_TYPE_RENEW
    } else {
        ACKNOWLEDGE_TYPE_RENEW - 1
    };
    let invalid = |m: String| Err((ResponseError::InvalidRequest, m));
    if let Some(t) = types.iter().find(|&&t| !(0..=max).contains(&t)) {
        return invalid(format!("invalid acknowledge type {t}"));
    }
    if !is_renew_ack && types.contains(&ACKNOWLEDGE_TYPE_RENEW) {
        return invalid("RENEW acknowledgements need IsRenewAck".into());
    }
    Ok(())
}

/// Kafka's check of a ShareFetch with `IsRenewAck`: it acknowledges only, so it must ask for
/// no bytes, no records and no wait (INVALID_REQUEST naming each field set).
fn check_renew_fetch(req: &ShareFetchRequest) -> Result<(), String> {
    let fields = [
        ("maxBytes", req.max_bytes),
        ("minBytes", req.min_bytes),
        ("maxRecords", req.max_records),
        ("maxWaitMs", req.max_wait_ms),
    ];
    let set: String = fields
        .iter()
        .filter(|(_, v)| *v != 0)
        .map(|(name, _)| format!("{name} must be set to 0, "))
        .collect();
    if set.is_empty() {
        Ok(())
    } else {
        Err(format!("{set}if isRenewAck is true."))
    }
}

/// Applies one partition's acknowledgement batches and writes the result to the share
/// coordinator before answering, as Kafka's `SharePartition.acknowledge` does.
async fn acknowledge(
    broker: &Broker,
    settings: &ShareGroupSettings,
    group: &str,
    member: &str,
    topic_id: Uuid,
    index: i32,
    batches: Vec<(i64, i64, Vec<i8>)>,
) -> Option<(ResponseError, String)> {
    if let Err(e) = led_partition(broker, topic_id, index) {
        return Some((e, e.to_string()));
    }
    let key: SharePartitionKey = (group.to_string(), topic_id, index);
    if let Err(e) = broker.share.acknowledge(&key, member, &batches, settings) {
        return Some(e);
    }
    let written = broker.share.persist(broker, &key).await;
    written.err().map(|e| (e, e.to_string()))
}

/// ShareFetch, in the steps of Kafka's `KafkaApis.handleShareFetchRequest`: check the
/// request, open the share session's context, apply the piggybacked acknowledgements, then
/// acquire (`SharePartitionManager.fetchMessages`) and answer.
pub async fn handle_share_fetch(
    broker: &Broker,
    ctx: &RequestContext,
    req: ShareFetchRequest,
) -> ShareFetchResponse {
    let group_name = req.group_id.as_ref().map(|g| g.to_string());
    let settings = group_settings(broker, group_name.as_deref().unwrap_or_default());
    let lock_ms = settings.limits.lock_duration_ms as i32;
    let top_error = |e: ResponseError, msg: String| {
        ShareFetchResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(sb(msg)))
            .with_acquisition_lock_timeout_ms(lock_ms)
    };
    let checked = match check_share_fetch(broker, ctx, &req) {
        Ok(c) => c,
        Err((e, m)) => return top_error(e, m),
    };
    let (group, member) = (checked.group.as_str(), checked.member.as_str());
    let context = match share_fetch_context(broker, &req, group, member) {
        Ok(c) => c,
        Err(e) => return top_error(e, e.to_string()),
    };
    let denied = unreadable_topics(broker, ctx, req.topics.iter().map(|t| t.topic_id));
    let mut answers: HashMap<(Uuid, i32), PartitionAnswer> = HashMap::new();
    let who = (group, member);
    fetch_acknowledgements(broker, ctx, &req, &settings, who, &denied, &mut answers).await;
    let (fetch, full) = context_partitions(broker, context, &settings, group, member).await;
    // A renewal fetch acquires nothing (Kafka answers its acknowledgements only).
    let fetch = if checked.renew_only {
        Vec::new()
    } else {
        fetch
    };
    let (fetch, refused): (Vec<_>, Vec<_>) =
        fetch.into_iter().partition(|(t, _)| !denied.contains(t));
    for key in refused {
        answers.entry(key).or_default().error = Some(ResponseError::TopicAuthorizationFailed);
    }
    let max_bytes = (req.max_bytes.max(0) as usize).min(broker.config.fetch_max_bytes);
    let max_wait = Duration::from_millis(req.max_wait_ms.clamp(0, FETCH_MAX_WAIT_MS_LIMIT) as u64);
    let max_records = MaxRecords {
        count: req.max_records.max(0) as usize,
        record_limit: checked.record_limit,
    };
    acquire_waiting(
        broker,
        &settings,
        group,
        member,
        &fetch,
        max_records,
        max_bytes,
        max_wait,
        &mut answers,
    )
    .await;
    let order = answer_order(full, &fetch, &answers);
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(lock_ms)
        .with_responses(fetch_topics(broker, order, &mut answers))
}

/// What `check_share_fetch` found valid in a ShareFetch.
struct ShareFetchCheck {
    group: String,
    member: String,
    /// The acquire mode is record-limit (1) rather than batch-optimized (0).
    record_limit: bool,
    /// A v2+ renewal fetch: acknowledgements only, nothing acquired.
    renew_only: bool,
}

/// The request's checks, in Kafka's order: group and member ids, group authorization, the
/// acquire mode, then a renewal fetch's fields.
fn check_share_fetch(
    broker: &Broker,
    ctx: &RequestContext,
    req: &ShareFetchRequest,
) -> Result<ShareFetchCheck, (ResponseError, String)> {
    let (group, member) = member_of(&req.group_id, &req.member_id)?;
    if !may_read_group(broker, ctx, &group) {
        let e = ResponseError::GroupAuthorizationFailed;
        return Err((e, e.to_string()));
    }
    let record_limit = match req.share_acquire_mode {
        ACQUIRE_MODE_BATCH_OPTIMIZED => false,
        ACQUIRE_MODE_RECORD_LIMIT => true,
        m => {
            return Err((
                ResponseError::InvalidRequest,
                format!("Unknown share acquire mode id: {m}"),
            ))
        }
    };
    let renew_only = ctx.api_version >= 2 && req.is_renew_ack;
    if renew_only {
        if let Err(m) = check_renew_fetch(req) {
            return Err((ResponseError::InvalidRequest, m));
        }
    }
    Ok(ShareFetchCheck {
        group,
        member,
        record_limit,
        renew_only,
    })
}

/// The share session's context for this fetch (Kafka's `SharePartitionManager.newContext`):
/// the requested and forgotten partitions, and whether acknowledgements ride along.
fn share_fetch_context(
    broker: &Broker,
    req: &ShareFetchRequest,
    group: &str,
    member: &str,
) -> Result<FetchContext, ResponseError> {
    let requested: Vec<(Uuid, i32)> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic_id, p.partition_index))
        })
        .collect();
    let forgotten: Vec<(Uuid, i32)> = req
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
        .collect();
    let has_acks = req.topics.iter().any(|t| {
        t.partitions
            .iter()
            .any(|p| !p.acknowledgement_batches.is_empty())
    });
    broker.share.new_context(
        group,
        member,
        req.share_session_epoch,
        &requested,
        &forgotten,
        has_acks,
    )
}

/// The acknowledgements a ShareFetch carries, applied before acquiring (Kafka's
/// `handleFetchAcknowledgements`); each partition's outcome lands in `answers`.
async fn fetch_acknowledgements(
    broker: &Broker,
    ctx: &RequestContext,
    req: &ShareFetchRequest,
    settings: &ShareGroupSettings,
    (group, member): (&str, &str),
    denied: &HashSet<Uuid>,
    answers: &mut HashMap<(Uuid, i32), PartitionAnswer>,
) {
    for t in &req.topics {
        for p in &t.partitions {
            if p.acknowledgement_batches.is_empty() {
                continue;
            }
            if denied.contains(&t.topic_id) {
                let a = answers.entry((t.topic_id, p.partition_index)).or_default();
                a.ack_error = Some(topic_denied());
                continue;
            }
            let batches: Vec<_> = p
                .acknowledgement_batches
                .iter()
                .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
                .collect();
            let types: Vec<i8> = batches.iter().flat_map(|b| b.2.clone()).collect();
            let err = match check_ack_types(ctx.api_version, req.is_renew_ack, &types) {
                Err(e) => Some(e),
                Ok(()) => {
                    acknowledge(
                        broker,
                        settings,
                        group,
                        member,
                        t.topic_id,
                        p.partition_index,
                        batches,
                    )
                    .await
                }
            };
            answers
                .entry((t.topic_id, p.partition_index))
                .or_default()
                .ack_error = err;
        }
    }
}

/// The partitions to acquire from and whether the answer names them all (a full context);
/// a final fetch closes the share session instead.
async fn context_partitions(
    broker: &Broker,
    context: FetchContext,
    settings: &ShareGroupSettings,
    group: &str,
    member: &str,
) -> (Vec<(Uuid, i32)>, bool) {
    match context {
        FetchContext::Final => {
            broker.share.close_session(group, member, &settings.limits);
            broker.share.persist_group(broker, group).await;
            (Vec::new(), false)
        }
        FetchContext::Full(ps) => (ps, true),
        FetchContext::Incremental(ps) => (ps, false),
    }
}

/// The answer's partition order: a full context's partitions first, then any other answer;
/// an incremental one's answers sorted.
fn answer_order(
    full: bool,
    fetch: &[(Uuid, i32)],
    answers: &HashMap<(Uuid, i32), PartitionAnswer>,
) -> Vec<(Uuid, i32)> {
    if full {
        fetch
            .iter()
            .copied()
            .chain(answers.keys().copied())
            .collect()
    } else {
        let mut v: Vec<(Uuid, i32)> = answers.keys().copied().collect();
        v.sort();
        v
    }
}

/// Acquires for the member on each partition, waiting up to `max_wait` while nothing can be
/// acquired (Kafka's `DelayedShareFetch`: try to complete, park, wake on news or on the next
/// acquisition lock timeout).
#[allow(clippy::too_many_arguments)]
async fn acquire_waiting(
    broker: &Broker,
    settings: &ShareGroupSettings,
    group: &str,
    member: &str,
    fetch: &[(Uuid, i32)],
    max_records: MaxRecords,
    max_bytes: usize,
    max_wait: Duration,
    answers: &mut HashMap<(Uuid, i32), PartitionAnswer>,
) {
    let deadline = Instant::now() + max_wait;
    let waiter = Arc::new(Notify::new());
    let mut parked = false;
    let who = (group, member);
    loop {
        let limits = (max_records, max_bytes);
        let park = (!parked).then_some(&waiter);
        let got = acquire_round(broker, settings, who, fetch, limits, park, answers).await;
        if got > 0 || Instant::now() >= deadline || fetch.is_empty() || max_records.count == 0 {
            return;
        }
        if !parked {
            // Parked first, then read again: a change between the read and the park would
            // otherwise wait for the deadline.
            broker.share.park(&waiter);
            parked = true;
            continue;
        }
        let wake = next_wake(broker, group, fetch, deadline);
        let _ = tokio::time::timeout_at(wake, waiter.notified()).await;
        parked = false;
    }
}

/// One pass over the fetch's partitions (Kafka's `SharePartition.acquire` on each, within
/// the records and bytes still left): returns the number of records acquired, and parks
/// `park` on each partition when given.
async fn acquire_round(
    broker: &Broker,
    settings: &ShareGroupSettings,
    (group, member): (&str, &str),
    fetch: &[(Uuid, i32)],
    (max_records, max_bytes): (MaxRecords, usize),
    park: Option<&Arc<Notify>>,
    answers: &mut HashMap<(Uuid, i32), PartitionAnswer>,
) -> usize {
    let mut got = 0usize;
    let mut bytes_left = max_bytes;
    for &(topic_id, index) in fetch {
        let a = answers.entry((topic_id, index)).or_default();
        let part = match led_partition(broker, topic_id, index) {
            Ok(p) => p,
            Err(e) => {
                a.error = Some(e);
                continue;
            }
        };
        a.leader_epoch = part.leader_epoch();
        let key: SharePartitionKey = (group.to_string(), topic_id, index);
        if let Err(e) = broker
            .share
            .maybe_initialize(broker, &key, &part, settings)
            .await
        {
            a.error = Some(e);
            continue;
        }
        if got < max_records.count && bytes_left > 0 {
            match broker.share.acquire(
                &key,
                member,
                &part,
                MaxRecords {
                    count: max_records.count - got,
                    ..max_records
                },
                bytes_left,
                settings,
            ) {
                Ok(acq) => {
                    got += acq
                        .ranges
                        .iter()
                        .map(|r| (r.last_offset - r.first_offset + 1) as usize)
                        .sum::<usize>();
                    bytes_left = bytes_left.saturating_sub(acq.records.len());
                    a.acquired = acq;
                }
                Err(e) => a.error = Some(e),
            }
            // Lock timeouts the acquisition found are written, failures only logged
            // (Kafka's `releaseAcquisitionLockOnTimeout`).
            if let Err(e) = broker.share.persist(broker, &key).await {
                tracing::warn!(error = %e, "share state not written");
            }
        }
        if let Some(waiter) = park {
            part.park_fetch(waiter);
        }
    }
    got
}

/// When a parked fetch wakes without news: the earliest acquisition lock timeout of its
/// partitions, or `deadline` if sooner.
fn next_wake(broker: &Broker, group: &str, fetch: &[(Uuid, i32)], deadline: Instant) -> Instant {
    let keys: Vec<SharePartitionKey> = fetch
        .iter()
        .map(|&(t, p)| (group.to_string(), t, p))
        .collect();
    broker
        .share
        .next_lock_deadline_ms(&keys)
        .map(|ms| {
            let now = crate::cluster::replica_manager::now_ms();
            Instant::now() + Duration::from_millis(ms.saturating_sub(now).max(0) as u64)
        })
        .map_or(deadline, |t| t.min(deadline))
}

/// The answer's topics, in `order` (each partition once).
fn fetch_topics(
    broker: &Broker,
    order: Vec<(Uuid, i32)>,
    answers: &mut HashMap<(Uuid, i32), PartitionAnswer>,
) -> Vec<ShareFetchableTopicResponse> {
    let mut out: Vec<ShareFetchableTopicResponse> = Vec::new();
    for (topic_id, index) in order {
        let Some(a) = answers.remove(&(topic_id, index)) else {
            continue;
        };
        let leader = if a.error.is_none() {
            broker.node_id()
        } else {
            -1
        };
        let data = PartitionData::default()
            .with_partition_index(index)
            .with_error_code(a.error.map_or(0, |e| e.code()))
            .with_error_message(a.error.map(|e| sb(e.to_string())))
            .with_acknowledge_error_code(a.ack_error.as_ref().map_or(0, |e| e.0.code()))
            .with_acknowledge_error_message(a.ack_error.map(|e| sb(e.1)))
            .with_current_leader(
                LeaderIdAndEpoch::default()
                    .with_leader_id(leader)
                    .with_leader_epoch(a.leader_epoch),
            )
            .with_records(Some(a.acquired.records.clone()))
            .with_acquired_records(
                a.acquired
                    .ranges
                    .iter()
                    .map(|r| {
                        AcquiredRecords::default()
                            .with_first_offset(r.first_offset)
                            .with_last_offset(r.last_offset)
                            .with_delivery_count(r.delivery_count)
                    })
                    .collect(),
            );
        match out.iter_mut().find(|t| t.topic_id == topic_id) {
            Some(t) => t.partitions.push(data),
            None => out.push(
                ShareFetchableTopicResponse::default()
                    .with_topic_id(topic_id)
                    .with_partitions(vec![data]),
            ),
        }
    }
    out
}

/// ShareAcknowledge, in the steps of Kafka's `KafkaApis.handleShareAcknowledgeRequest`:
/// check the request, update the share session, acknowledge each partition
/// (`SharePartitionManager.acknowledge`), then close the session on its final epoch.
pub async fn handle_share_acknowledge(
    broker: &Broker,
    ctx: &RequestContext,
    req: ShareAcknowledgeRequest,
) -> ShareAcknowledgeResponse {
    use kafka_protocol::messages::share_acknowledge_response as sar;
    let top_error = |e: ResponseError, msg: String| {
        ShareAcknowledgeResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(sb(msg)))
    };
    let (group, member) = match member_of(&req.group_id, &req.member_id) {
        Ok(gm) => gm,
        Err((e, m)) => return top_error(e, m),
    };
    if !may_read_group(broker, ctx, &group) {
        let e = ResponseError::GroupAuthorizationFailed;
        return top_error(e, e.to_string());
    }
    let last =
        match broker
            .share
            .acknowledge_session_update(&group, &member, req.share_session_epoch)
        {
            Ok(f) => f,
            Err(e) => return top_error(e, e.to_string()),
        };
    let settings = group_settings(broker, &group);
    let denied = unreadable_topics(broker, ctx, req.topics.iter().map(|t| t.topic_id));
    let is_renew_ack = req.is_renew_ack;
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let check = AckCheck {
                version: ctx.api_version,
                is_renew_ack,
                denied: denied.contains(&t.topic_id),
            };
            let who = (group.as_str(), member.as_str());
            parts.push(acknowledge_partition(broker, &settings, who, check, t.topic_id, p).await);
        }
        topics.push(
            sar::ShareAcknowledgeTopicResponse::default()
                .with_topic_id(t.topic_id)
                .with_partitions(parts),
        );
    }
    if last {
        broker
            .share
            .close_session(&group, &member, &settings.limits);
        broker.share.persist_group(broker, &group).await;
    }
    // v2's lock duration (dropped below v2), as Kafka answers a ShareAcknowledge.
    ShareAcknowledgeResponse::default()
        .with_acquisition_lock_timeout_ms(settings.limits.lock_duration_ms as i32)
        .with_responses(topics)
}

/// What decides a ShareAcknowledge partition's checks: the request version and renew flag,
/// and whether the session may not READ the topic.
#[derive(Clone, Copy)]
struct AckCheck {
    version: i16,
    is_renew_ack: bool,
    denied: bool,
}

/// One ShareAcknowledge partition: topic authorization, then the acknowledge types, then
/// the acknowledgement itself; answered with the partition's current leader.
async fn acknowledge_partition(
    broker: &Broker,
    settings: &ShareGroupSettings,
    (group, member): (&str, &str),
    check: AckCheck,
    topic_id: Uuid,
    p: kafka_protocol::messages::share_acknowledge_request::AcknowledgePartition,
) -> kafka_protocol::messages::share_acknowledge_response::PartitionData {
    use kafka_protocol::messages::share_acknowledge_response as sar;
    let batches: Vec<_> = p
        .acknowledgement_batches
        .into_iter()
        .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types))
        .collect();
    let types: Vec<i8> = batches.iter().flat_map(|b| b.2.clone()).collect();
    let err = if check.denied {
        Some(topic_denied())
    } else if let Err(e) = check_ack_types(check.version, check.is_renew_ack, &types) {
        Some(e)
    } else {
        let index = p.partition_index;
        acknowledge(broker, settings, group, member, topic_id, index, batches).await
    };
    let leader = led_partition(broker, topic_id, p.partition_index).ok();
    sar::PartitionData::default()
        .with_partition_index(p.partition_index)
        .with_error_code(err.as_ref().map_or(0, |e| e.0.code()))
        .with_error_message(err.map(|e| sb(e.1)))
        .with_current_leader(
            sar::LeaderIdAndEpoch::default()
                .with_leader_id(leader.as_ref().map_or(-1, |_| broker.node_id()))
                .with_leader_epoch(leader.map_or(-1, |p| p.leader_epoch())),
        )
}

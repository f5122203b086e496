//! Changes to the metadata quorum's voters (KIP-853): AddRaftVoter and RemoveRaftVoter as
//! Kafka's `AddVoterHandler` and `RemoveVoterHandler` decide them, and the observers that
//! `controller.quorum.bootstrap.servers` brings in.
//!
//! Kafka keeps the voter set in `VotersRecord`s of the metadata log; Brook's is openraft's
//! membership, also in the Raft log. The mapping:
//! - an observer (a node started with bootstrap servers and not among the voters) asks a
//!   bootstrap server to be taken in ([`observer_join_task`]); the active controller adds it
//!   as a Raft learner, which it then replicates to, so DescribeQuorum lists it as an observer
//!   as Kafka lists a fetching observer;
//! - AddRaftVoter: the learner must catch up with the leader's log within the request's
//!   timeout (openraft's blocking `add_learner`), then `change_membership` makes it a voter;
//!   the answer comes once the new voter set is committed (joint, then final configuration);
//! - RemoveRaftVoter: `change_membership` without the voter, which stays a learner (Kafka's
//!   removed voter keeps fetching as an observer); the leader removing itself leaves the
//!   membership, so that it steps down, and rejoins as an observer.
//!
//! As in Kafka, only the active controller (the Raft leader) changes voters, one change at a
//! time, and only at `kraft.version` 1: a quorum started from `controller.quorum.voters` has
//! 0 until `kafka-features upgrade --feature kraft.version=1`.
//!
//! Directory ids (Kafka's `ReplicaKey`): openraft's membership holds ids and addresses, so
//! each voter's directory id is a metadata record beside it
//! (`MetadataRecord::VoterDirectoryId`), written before the membership change that adds the
//! voter, or from the formatted voter set ([`bootstrap`]). A static voter has none (the
//! zero uuid), as in Kafka. RemoveRaftVoter removes only the voter whose recorded directory
//! id is the request's (`VoterSet.removeVoter` compares the whole `ReplicaKey`).
//!
//! Observers tell the leader their directory ids when they ask to be taken in; AddRaftVoter of
//! an observer's id with another directory id is refused as not caught up, as Kafka's leader
//! finds no caught-up replica with that `ReplicaKey`. A leader that did not take the observer
//! in (after a failover) knows no directory id for it and does not check.
//!
//! AddRaftVoter v1 (KIP-1186): with `AckWhenCommitted` false the answer comes once the leader
//! has appended the new voter set, not once it is committed; the change goes on.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use uuid::Uuid;

use super::image::{MetadataBatch, MetadataImage, MetadataRecord};
use super::{internal, network, ControllerError, Inner, NodeId};
use crate::features::KRAFT_VERSION;
pub use brook_controller::voter_set::{bootstrap, directory_id_of};
use brook_controller::voter_set::{replica_key, voter_keys};

/// How often an observer asks the bootstrap servers to take it in, until it is a member.
pub const OBSERVER_JOIN_RETRY: Duration = Duration::from_millis(500);

/// One voter change, as the broker or a forwarding node hands it to the active controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum VoterChange {
    /// AddRaftVoter: `address` is the new voter's controller listener (`host:port`).
    Add {
        voter_id: i32,
        directory_id: Uuid,
        address: String,
        timeout_ms: u64,
        /// AddRaftVoter v1's `AckWhenCommitted` (true below v1).
        #[serde(default = "ack_when_committed_default")]
        ack_when_committed: bool,
    },
    /// RemoveRaftVoter.
    Remove { voter_id: i32, directory_id: Uuid },
}

fn ack_when_committed_default() -> bool {
    true
}

/// An observer's request to be replicated to (`/controller/observe`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObserveRequest {
    pub node_id: i32,
    pub address: String,
    /// Set by a node that passed the request on to the leader: never passed on again.
    pub forwarded: bool,
    /// The observer's `directory.id` (its `ReplicaKey` with `node_id`, as a Kafka observer's
    /// fetches carry it); the zero uuid from a node that sends none.
    #[serde(default)]
    pub directory_id: Uuid,
}

fn client_write_error(
    inner: &Inner,
    e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>,
) -> ControllerError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => inner.not_controller(),
        RaftError::APIError(ClientWriteError::ChangeMembershipError(
            ChangeMembershipError::InProgress(p),
        )) => ControllerError::RequestTimedOut(format!(
            "Request timed out waiting for voters to commit the latest voter change at {:?}",
            p.membership_log_id
        )),
        other => internal(other),
    }
}

/// Decides and commits one voter change; only on the active controller (Kafka's
/// `KafkaRaftClient.handleAddVoterRequest` / `handleRemoveVoterRequest`, which only the leader
/// serves).
pub(super) async fn change_locally(
    inner: &Inner,
    change: VoterChange,
) -> Result<(), ControllerError> {
    // One change at a time (`LeaderState.isOperationPending`).
    let Ok(_one) = inner.voter_change.try_lock() else {
        return Err(ControllerError::RequestTimedOut(
            "Request timed out waiting for leader to handle previous voter change request".into(),
        ));
    };
    // The leader has committed an entry of its term: its view of the voters is current
    // (Kafka: the high watermark is known).
    inner
        .raft
        .ensure_linearizable()
        .await
        .map_err(|_| inner.not_controller())?;
    let kraft_version = inner.image_rx.borrow().feature_level(KRAFT_VERSION);
    let verb = match change {
        VoterChange::Add { .. } => "adding",
        VoterChange::Remove { .. } => "removing",
    };
    if kraft_version < 1 {
        return Err(ControllerError::UnsupportedVersion(format!(
            "Cluster doesn't support {verb} voter because the {KRAFT_VERSION} feature is \
             {kraft_version}"
        )));
    }
    let voters = committed_voters(inner)?;
    let image = inner.image_rx.borrow().clone();
    match change {
        VoterChange::Add {
            voter_id,
            directory_id,
            address,
            timeout_ms,
            ack_when_committed,
        } => {
            let key = check_new_voter(inner, &image, &voters, voter_id, directory_id)?;
            let deadline = Instant::now() + Duration::from_millis(timeout_ms);
            catch_up(inner, voter_id, &key, address.clone(), deadline).await?;
            let new_voter = NewVoter {
                voter_id,
                directory_id,
                key,
                ack_when_committed,
            };
            add_voter(inner, new_voter, deadline).await?;
            tracing::info!(voter_id, %address, "added a voter to the metadata quorum");
            Ok(())
        }
        VoterChange::Remove {
            voter_id,
            directory_id,
        } => remove_voter(inner, &image, &voters, voter_id, directory_id).await,
    }
}

/// The voters of the last voter change, once committed (Kafka's
/// `LeaderState.isOperationPending` and the uncommitted voter set): a change not yet
/// committed, or a joint configuration, answers REQUEST_TIMED_OUT.
fn committed_voters(inner: &Inner) -> Result<BTreeSet<NodeId>, ControllerError> {
    let (voters, uncommitted) = {
        let metrics = inner.raft.metrics();
        let m = metrics.borrow();
        let membership = &m.membership_config;
        let voters: BTreeSet<NodeId> = membership.membership().voter_ids().collect();
        let joint = membership.membership().get_joint_config().len() > 1;
        let at = membership.log_id().map(|l| l.index);
        (voters, joint || at > inner.log.committed_index())
    };
    if uncommitted {
        return Err(ControllerError::RequestTimedOut(
            "Request timed out waiting for voters to commit the latest voter change".into(),
        ));
    }
    Ok(voters)
}

/// AddRaftVoter's checks of the new voter before it is caught up (Kafka's
/// `AddVoterHandler.handleAddVoterRequest`): a valid id, not a voter yet, and no observer of
/// that id fetching with another directory. Returns the voter's replica key.
fn check_new_voter(
    inner: &Inner,
    image: &MetadataImage,
    voters: &BTreeSet<NodeId>,
    voter_id: i32,
    directory_id: Uuid,
) -> Result<String, ControllerError> {
    let key = replica_key(voter_id, directory_id);
    if voter_id < 0 {
        return Err(ControllerError::InvalidRequest(format!(
            "{key} is not a valid replica id"
        )));
    }
    if voters.contains(&(voter_id as NodeId)) {
        return Err(ControllerError::DuplicateVoter(format!(
            "The voter id for {key} is already part of the set of voters {}.",
            voter_keys(image, voters)
        )));
    }
    // The observer that fetches as this voter id has another directory: the voter
    // with the request's `ReplicaKey` is not caught up (Kafka's
    // `AddVoterHandler.handleApiVersionsResponse`, `isReplicaCaughtUp`).
    let observed = inner.observer_directory_ids.lock().get(&voter_id).copied();
    if observed.is_some_and(|o| !o.is_nil() && o != directory_id) {
        return Err(ControllerError::RequestTimedOut(format!(
            "Aborted add voter operation for {key} since it is lagging behind"
        )));
    }
    Ok(key)
}

/// The voter an AddRaftVoter adds, once caught up.
struct NewVoter {
    voter_id: i32,
    directory_id: Uuid,
    /// Kafka's `ReplicaKey` of it, for messages.
    key: String,
    ack_when_committed: bool,
}

/// Kafka's `AddVoterHandler` up to `isReplicaCaughtUp`: the new voter, a Raft learner, has
/// the leader's log within the request's timeout, else REQUEST_TIMED_OUT.
async fn catch_up(
    inner: &Inner,
    voter_id: i32,
    key: &str,
    address: String,
    deadline: Instant,
) -> Result<(), ControllerError> {
    // Blocking: returns once the learner has the leader's log as it was when asked.
    let caught_up = tokio::time::timeout_at(
        deadline,
        inner
            .raft
            .add_learner(voter_id as NodeId, BasicNode::new(&address), true),
    )
    .await;
    match caught_up {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(client_write_error(inner, e)),
        Err(_) => Err(ControllerError::RequestTimedOut(format!(
            "Aborted add voter operation for {key} since it is lagging behind"
        ))),
    }
}

/// Kafka's `AddVoterHandler` from the caught-up voter on: its `ReplicaKey` recorded, then the
/// new voter set, answered once committed, or with `AckWhenCommitted` false once the leader
/// has appended it (`AddVoterHandlerState`'s `ackWhenCommitted`, KIP-1186).
async fn add_voter(
    inner: &Inner,
    voter: NewVoter,
    deadline: Instant,
) -> Result<(), ControllerError> {
    let record = MetadataRecord::VoterDirectoryId {
        voter_id: voter.voter_id,
        directory_id: voter.directory_id,
    };
    let recorded = tokio::time::timeout_at(
        deadline,
        inner.raft.client_write(MetadataBatch(vec![record])),
    )
    .await;
    match recorded {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(client_write_error(inner, e)),
        Err(_) => return Err(timed_out_committing(&voter.key)),
    }
    let id = voter.voter_id as NodeId;
    let raft = inner.raft.clone();
    let mut change = tokio::spawn(async move {
        raft.change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), true)
            .await
    });
    if !voter.ack_when_committed {
        // Appended: the leader's effective membership (its log's last) lists the voter.
        let mut metrics = inner.raft.metrics();
        let appended = metrics.wait_for(|m| {
            m.membership_config
                .membership()
                .voter_ids()
                .any(|v| v == id)
        });
        tokio::select! {
            Ok(_) = appended => return Ok(()),
            _ = tokio::time::sleep_until(deadline) => return Err(timed_out_committing(&voter.key)),
            joined = &mut change => return change_result(inner, joined, &voter.key),
        }
    }
    match tokio::time::timeout_at(deadline, &mut change).await {
        Ok(joined) => change_result(inner, joined, &voter.key),
        // The change goes on: openraft cannot take back an appended membership.
        Err(_) => Err(timed_out_committing(&voter.key)),
    }
}

fn timed_out_committing(key: &str) -> ControllerError {
    ControllerError::RequestTimedOut(format!(
        "Request timed out waiting for the voter set with {key} to commit"
    ))
}

type MembershipResult = Result<
    openraft::raft::ClientWriteResponse<super::TypeConfig>,
    RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>,
>;

fn change_result(
    inner: &Inner,
    joined: Result<MembershipResult, tokio::task::JoinError>,
    key: &str,
) -> Result<(), ControllerError> {
    match joined {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(client_write_error(inner, e)),
        Err(e) => Err(internal(format!("adding {key}: {e}"))),
    }
}

/// Kafka's `RemoveVoterHandler`: a current voter with this `ReplicaKey`, not the last one
/// (`VoterSet.removeVoter`); it stays a learner, an observer.
async fn remove_voter(
    inner: &Inner,
    image: &MetadataImage,
    voters: &BTreeSet<NodeId>,
    voter_id: i32,
    directory_id: Uuid,
) -> Result<(), ControllerError> {
    let key = replica_key(voter_id, directory_id);
    let id = voter_id as NodeId;
    let same_key = directory_id_of(image, voter_id) == directory_id;
    if voter_id < 0 || !voters.contains(&id) || !same_key || voters.len() == 1 {
        return Err(ControllerError::VoterNotFound(format!(
            "Cannot remove voter {key} from the set of voters {}",
            voter_keys(image, voters)
        )));
    }
    let timeout = Duration::from_millis(inner.config.request_timeout_ms);
    // The leader removing itself leaves the membership altogether: openraft keeps a leader
    // that stays a learner leading, where Kafka's resigns. It comes back as an observer
    // (`observer_join_task`), as Kafka's keeps fetching.
    let retain = voter_id != inner.config.node_id;
    let changed = tokio::time::timeout(
        timeout,
        inner
            .raft
            .change_membership(ChangeMembers::RemoveVoters(BTreeSet::from([id])), retain),
    )
    .await;
    match changed {
        Ok(Ok(_)) => {
            tracing::info!(voter_id, "removed a voter from the metadata quorum");
            Ok(())
        }
        Ok(Err(e)) => Err(client_write_error(inner, e)),
        Err(_) => Err(ControllerError::RequestTimedOut(format!(
            "Request timed out waiting for the voter set without {key} to commit"
        ))),
    }
}

/// Takes observer `req.node_id` in as a Raft learner, on the leader; another node passes the
/// request on to the leader once.
pub(super) async fn observe(inner: &Inner, req: ObserveRequest) -> Result<(), ControllerError> {
    let me = inner.config.node_id;
    let deadline = Instant::now() + Duration::from_millis(inner.config.request_timeout_ms);
    let active = inner.wait_for_active(deadline).await?;
    if active != me {
        if req.forwarded {
            return Err(inner.not_controller());
        }
        let addr = inner
            .node_address(active)
            .ok_or(ControllerError::NotController { active: None })?;
        let link = inner.link_to(active);
        let req = ObserveRequest {
            forwarded: true,
            ..req
        };
        let timeout = deadline.saturating_duration_since(Instant::now());
        return network::post_json(&link, &addr, "/controller/observe", &req, timeout)
            .await
            .unwrap_or(Err(ControllerError::NotController {
                active: Some(active),
            }));
    }
    // The leader knows each observer by its `ReplicaKey` (Kafka's `LeaderState` keeps
    // observers' states by it), for AddRaftVoter's check and DescribeQuorum.
    inner
        .observer_directory_ids
        .lock()
        .insert(req.node_id, req.directory_id);
    if inner
        .node_address(req.node_id)
        .is_some_and(|a| a == req.address && inner.is_member(req.node_id))
    {
        return Ok(());
    }
    if inner.is_member(req.node_id) {
        // A member's listener does not move under it (Kafka's UpdateRaftVoter, not served).
        return Err(ControllerError::InvalidRequest(format!(
            "node {} is a member of the quorum at another address",
            req.node_id
        )));
    }
    let added = tokio::time::timeout_at(
        deadline,
        inner
            .raft
            .add_learner(req.node_id as NodeId, BasicNode::new(&req.address), false),
    )
    .await;
    match added {
        Ok(Ok(_)) => {
            tracing::info!(node_id = req.node_id, address = %req.address, "observer joined the metadata quorum");
            Ok(())
        }
        Ok(Err(e)) => Err(client_write_error(inner, e)),
        Err(_) => Err(ControllerError::RequestTimedOut(
            "the observer was not added in time".into(),
        )),
    }
}

/// While this node is not a member of the quorum (a new observer, or a voter the leader
/// removed along with itself), asks each bootstrap server (else each other configured voter)
/// in turn to take it in, every [`OBSERVER_JOIN_RETRY`].
pub(super) async fn observer_join_task(inner: Arc<Inner>) {
    let me = inner.config.node_id;
    let address = inner.config.listen.to_string();
    // A static voter that RemoveRaftVoter took out of the membership asks the other voters.
    let servers: Vec<String> = match inner.config.bootstrap_servers.is_empty() {
        false => inner.config.bootstrap_servers.clone(),
        true => inner
            .config
            .voters
            .iter()
            .filter(|(id, _)| **id != me)
            .map(|(_, addr)| addr.clone())
            .collect(),
    };
    if servers.is_empty() {
        return;
    }
    let directory_id = inner
        .config
        .metadata_dir
        .parent()
        .and_then(crate::metadata::read_directory_id)
        .unwrap_or_default();
    let mut next = 0usize;
    loop {
        if !inner.is_member(me) {
            let server = &servers[next % servers.len()];
            next = next.wrapping_add(1);
            let req = ObserveRequest {
                node_id: me,
                address: address.clone(),
                forwarded: false,
                directory_id,
            };
            let link = inner.link_to(super::NO_LEADER);
            let answer: Result<Result<(), ControllerError>, _> = network::post_json(
                &link,
                server,
                "/controller/observe",
                &req,
                OBSERVER_JOIN_RETRY * 4,
            )
            .await;
            match answer {
                Ok(Ok(())) => {
                    tracing::info!(server, "asked to join the metadata quorum as an observer")
                }
                Ok(Err(e)) => tracing::debug!(server, error = %e, "joining the metadata quorum"),
                Err(e) => tracing::debug!(server, error = %e, "bootstrap server unreachable"),
            }
        }
        tokio::time::sleep(OBSERVER_JOIN_RETRY).await;
    }
}

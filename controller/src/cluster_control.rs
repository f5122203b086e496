//! Broker registrations and heartbeats (Kafka's `ClusterControlManager.registerBroker` and
//! `BrokerHeartbeatManager`, with `ReplicationControlManager.processBrokerHeartbeat`): broker
//! epochs, unfencing once a broker has caught up, controlled shutdown, and the end of a
//! previous incarnation, clean or not. What these do to partitions (leaving ISRs and
//! leaderships) is decided by [`crate::replication_control`].

use std::collections::HashMap;
use std::ops::Add;
use std::time::Duration;

use uuid::Uuid;

use crate::configuration_control::ElectionPolicy;
use crate::error::ControllerError;
use crate::image::{BrokerEndpoint, MetadataImage, MetadataRecord};
use crate::replication_control::{
    fence_broker, move_replica_away, remove_unclean_replica, unfence_broker,
};
use crate::request::{ControllerReply, ControllerResult};

/// What a broker registers with (Kafka's `BrokerRegistrationRequest`).
pub struct Registration<'a> {
    pub node_id: i32,
    pub host: &'a str,
    pub port: u16,
    pub incarnation: Uuid,
    pub previous_epoch: Option<i64>,
    /// Every advertised listener.
    pub endpoints: &'a [BrokerEndpoint],
}

/// A (re-)registration. The new epoch is above every epoch handed out before: the metadata
/// offset only grows and registrations are decided one at a time.
///
/// A broker that registers again while its previous incarnation is still unfenced restarted
/// without being noticed (faster than the session timeout). Its previous incarnation is
/// fenced first, so it leaves the ISRs and gives up leadership.
///
/// A new incarnation then ends the previous one (Kafka's `ClusterControlManager.registerBroker`
/// and `ReplicationControlManager.handleBrokerShutdown`): its shutdown was clean only if it
/// names the epoch it was registered with. After an unclean one, with ELR on, it leaves every
/// ISR and ELR (it may have lost records it had acknowledged); after a clean one it leaves
/// the ISRs only, as at fencing.
pub fn register_broker(
    image: &MetadataImage,
    reg: &Registration<'_>,
    policy: &ElectionPolicy,
) -> ControllerResult {
    let epoch = image.metadata_offset as i64 + 1;
    let node_id = reg.node_id;
    let existing = image.brokers.get(&node_id);
    assert!(
        existing.is_none_or(|b| b.epoch < epoch),
        "broker epochs increase"
    );
    let mut records = fence_broker(image, node_id, policy);
    if existing.is_none_or(|b| b.incarnation != reg.incarnation) {
        let clean = existing.is_some_and(|b| reg.previous_epoch == Some(b.epoch));
        // The shutdown's changes are decided on the image as fencing leaves it.
        let mut fenced = image.clone();
        for r in &records {
            if let Err(reason) = fenced.apply(r) {
                tracing::warn!(?r, reason, "fencing record does not apply");
            }
        }
        records.extend(if clean || !policy.elr_enabled {
            move_replica_away(&fenced, node_id, policy)
        } else {
            remove_unclean_replica(&fenced, node_id, policy)
        });
    }
    records.push(MetadataRecord::RegisterBroker {
        node_id,
        host: reg.host.to_string(),
        port: reg.port,
        epoch,
        incarnation: reg.incarnation,
        endpoints: reg.endpoints.to_vec(),
    });
    (records, ControllerReply::BrokerRegistered { epoch })
}

/// A heartbeat from a registered broker unfences it if it was fenced and has caught up with
/// the metadata log as far as its own registration (Kafka's BrokerHeartbeatManager: a broker
/// that does not yet know the current partition states must not lead).
pub fn heartbeat(
    image: &MetadataImage,
    node_id: i32,
    epoch: i64,
    metadata_offset: u64,
    policy: &ElectionPolicy,
) -> Result<ControllerResult, ControllerError> {
    let b = image
        .brokers
        .get(&node_id)
        .ok_or(ControllerError::BrokerIdNotRegistered(node_id))?;
    if b.epoch != epoch {
        return Err(ControllerError::StaleBrokerEpoch {
            request: epoch,
            current: b.epoch,
        });
    }
    if b.fenced && metadata_offset < b.registration_offset {
        return Ok((Vec::new(), heartbeat_reply(true, false)));
    }
    let records = if b.fenced {
        unfence_broker(image, node_id, policy)
    } else {
        Vec::new()
    };
    Ok((records, heartbeat_reply(false, false)))
}

fn heartbeat_reply(fenced: bool, should_shut_down: bool) -> ControllerReply {
    ControllerReply::Heartbeat {
        fenced,
        should_shut_down,
    }
}

/// A heartbeat with `want_shut_down` (Kafka's controlled shutdown,
/// `ReplicationControlManager.processBrokerHeartbeat` entering `CONTROLLED_SHUTDOWN`): the
/// broker is marked as in controlled shutdown (it may no longer lead or join an ISR), leaves
/// every ISR it is in and every partition it leads gets a new leader, as when it is fenced
/// (`PartitionChangeBuilder`: into the ELR where the ISR is below min ISR), but while it still runs,
/// so clients move before it stops. Once the records are committed it leads nothing, and the
/// reply lets it shut down. A fenced broker leads nothing already.
pub fn shut_down_heartbeat(
    image: &MetadataImage,
    node_id: i32,
    epoch: i64,
    metadata_offset: u64,
    policy: &ElectionPolicy,
) -> Result<ControllerResult, ControllerError> {
    // The usual checks (registered, current epoch); a fenced broker is not unfenced.
    heartbeat(image, node_id, epoch, metadata_offset, policy)?;
    let Some(b) = image.brokers.get(&node_id).filter(|b| !b.fenced) else {
        return Ok((Vec::new(), heartbeat_reply(true, true)));
    };
    // Marked first, so that no later election (an ELR one above all) picks it while it stops.
    let mut records = Vec::new();
    if !b.in_controlled_shutdown {
        records.push(MetadataRecord::BrokerInControlledShutdown { node_id, epoch });
    }
    records.extend(move_replica_away(image, node_id, policy));
    Ok((records, heartbeat_reply(false, true)))
}

/// The first moment a live (unfenced) broker's session is over: its last contact plus the
/// session timeout, just past it (expiry is "longer than the session"). Kafka's
/// `BrokerHeartbeatManager.nextCheckTimeNs`, which `QuorumController` schedules its expired
/// broker check at, so a dead broker is fenced when its session ends, not up to a check
/// interval later. Brokers without a recorded contact get theirs at the next check. The
/// caller's clock is `T` (the broker's is tokio's `Instant`): this crate reads none.
pub fn next_session_expiry<T>(
    last_contact: &HashMap<i32, T>,
    image: &MetadataImage,
    session: Duration,
) -> Option<T>
where
    T: Copy + Ord + Add<Duration, Output = T>,
{
    image
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .filter_map(|b| last_contact.get(&b.node_id))
        .map(|last| *last + session + Duration::from_millis(1))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    #[test]
    fn controlled_shutdown_moves_leadership_before_the_broker_stops() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 3, 3);
        let led_by_1 = |img: &MetadataImage| {
            img.topics[&id]
                .partitions
                .iter()
                .filter(|p| p.leader == 1)
                .count()
        };
        assert_eq!(led_by_1(&img), 1);
        let (records, reply) = shut_down_heartbeat(&img, 1, 1, 0, &no_elr(false)).unwrap();
        apply(&mut img, &records);
        assert_eq!(reply, heartbeat_reply(false, true));
        assert_eq!(led_by_1(&img), 0, "every leadership moved");
        for p in &img.topics[&id].partitions {
            assert!(!p.isr.contains(&1), "out of the ISR: {p:?}");
            assert!(p.leader > 0, "still led: {p:?}");
        }
        // Unlike fencing, the broker stays registered and unfenced until it stops.
        assert!(img.is_live(1));
        // A stale broker epoch is refused as in any heartbeat.
        assert_eq!(
            shut_down_heartbeat(&img, 1, 7, 0, &no_elr(false))
                .unwrap_err()
                .code(),
            77
        );
    }

    #[test]
    fn fast_restart_gives_up_leadership() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 1, 3);
        assert_eq!(img.partition(id, 0).unwrap().leader, 1);
        img.metadata_offset = 10;
        let (records, reply) = register_broker(&img, &restart(1, None), &no_elr(false));
        apply(&mut img, &records);
        assert_eq!(reply, ControllerReply::BrokerRegistered { epoch: 11 });
        let p = img.partition(id, 0).unwrap();
        assert_eq!((p.leader, p.leader_epoch), (2, 1));
        assert_eq!(p.isr, vec![2, 3]);
        assert!(!img.is_live(1));
        assert_eq!(img.brokers[&1].epoch, 11);
        // Its old epoch is refused; the new one unfences it.
        assert_eq!(
            heartbeat(&img, 1, 1, 20, &no_elr(false))
                .unwrap_err()
                .code(),
            77
        );
        // Registered at offset 10: a broker that has not applied that far stays fenced.
        assert_eq!(img.brokers[&1].registration_offset, 10);
        let (records, reply) = heartbeat(&img, 1, 11, 9, &no_elr(false)).unwrap();
        assert!(records.is_empty());
        assert_eq!(reply, heartbeat_reply(true, false));
        let (records, _) = heartbeat(&img, 1, 11, 10, &no_elr(false)).unwrap();
        apply(&mut img, &records);
        assert!(img.is_live(1));
    }

    /// A second registration of the same process (after STALE_BROKER_EPOCH) is no restart:
    /// the epoch it names is no longer the registered one, and that must not count as unclean.
    #[test]
    fn re_registering_the_same_incarnation_keeps_the_elr() {
        let mut img = cluster(3);
        let id = with_topic(&mut img, 1, 3);
        fence_with(&mut img, 3, &ELR);
        fence_with(&mut img, 2, &ELR);
        assert_eq!(state(&img, id), (1, vec![1], vec![2], vec![]));
        let reg = restart(2, Some(1));
        for offset in [10, 20] {
            img.metadata_offset = offset;
            let (records, _) = register_broker(&img, &reg, &ELR);
            apply(&mut img, &records);
            assert_eq!(
                state(&img, id),
                (1, vec![1], vec![2], vec![]),
                "at {offset}"
            );
        }
        // The same epoch from a new process after a crash would have been unclean.
        img.metadata_offset = 30;
        let (records, _) = register_broker(&img, &restart(2, Some(1)), &ELR);
        apply(&mut img, &records);
        assert_eq!(state(&img, id), (1, vec![1], vec![], vec![]));
    }

    #[test]
    fn the_next_liveness_check_is_when_the_first_live_session_ends() {
        let mut img = cluster(3);
        // Times as offsets from an origin: any clock's instants add durations alike.
        let ms = Duration::from_millis;
        let now = ms(10_000);
        let session = ms(3000);
        let contacts: HashMap<i32, Duration> =
            [(1, now), (2, now + ms(400)), (3, now - ms(200))].into();
        // Node 3 was heard from first: its session ends first, just past the timeout.
        assert_eq!(
            next_session_expiry(&contacts, &img, session),
            Some(now - ms(200) + session + ms(1))
        );
        // A fenced broker has no session to end.
        img.brokers.get_mut(&3).unwrap().fenced = true;
        assert_eq!(
            next_session_expiry(&contacts, &img, session),
            Some(now + session + ms(1))
        );
        assert_eq!(
            next_session_expiry(&HashMap::<i32, Duration>::new(), &img, session),
            None
        );
    }
}

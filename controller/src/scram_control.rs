//! SCRAM credentials in the metadata log (Kafka's `ScramControlManager`): AlterUserScramCredentials
//! validated against the image and turned into `UserScramCredential` /
//! `RemoveUserScramCredential` records, and the bootstrap credentials a node was formatted
//! with (`brook format --add-scram`, Kafka's `kafka-storage format --add-scram`), written once
//! per cluster.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use serde::{Deserialize, Serialize};

use crate::image::{MetadataImage, MetadataRecord};
use crate::request::{ControllerReply, ControllerResult};
use crate::scram::{ScramCredential, ScramMechanism, SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN};

/// One upsertion of AlterUserScramCredentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramUpsertion {
    pub name: String,
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Vec<u8>,
    pub salted_password: Vec<u8>,
}

/// One user's result: error code and message (Kafka's `AlterUserScramCredentialsResult`).
pub type ScramResult = (String, i16, Option<String>);

type ApiError = (i16, String);

fn validate_name_and_mechanism(name: &str, mechanism: i8) -> Result<ScramMechanism, ApiError> {
    if name.is_empty() {
        return Err((
            ResponseError::UnacceptableCredential.code(),
            "Username must not be empty".into(),
        ));
    }
    ScramMechanism::from_type_id(mechanism).ok_or((
        ResponseError::UnsupportedSaslMechanism.code(),
        "Unknown SCRAM mechanism".into(),
    ))
}

fn validate_upsertion(u: &ScramUpsertion) -> Result<ScramMechanism, ApiError> {
    let m = validate_name_and_mechanism(&u.name, u.mechanism)?;
    let code = ResponseError::UnacceptableCredential.code();
    if u.iterations < SCRAM_ITERATIONS_MIN {
        return Err((code, "Too few iterations".into()));
    }
    if u.iterations > SCRAM_ITERATIONS_MAX {
        return Err((code, "Too many iterations".into()));
    }
    Ok(m)
}

fn validate_deletion(image: &MetadataImage, name: &str, mechanism: i8) -> Result<(), ApiError> {
    let m = validate_name_and_mechanism(name, mechanism)?;
    if image.scram_credential(name, m).is_none() {
        return Err((
            ResponseError::ResourceNotFound.code(),
            "Attempt to delete a user credential that does not exist".into(),
        ));
    }
    Ok(())
}

const DUPLICATE: &str = "A user credential cannot be altered twice in the same request";

/// Kafka's `ScramControlManager.alterCredentials`: a user named twice (in either list) fails
/// with DUPLICATE_RESOURCE; the others are validated one by one and the valid ones recorded.
pub fn alter_credentials(
    image: &MetadataImage,
    deletions: &[(String, i8)],
    upsertions: &[ScramUpsertion],
) -> ControllerResult {
    let duplicate = || {
        (
            ResponseError::DuplicateResource.code(),
            DUPLICATE.to_string(),
        )
    };
    let mut errors: BTreeMap<String, ApiError> = BTreeMap::new();
    let mut to_delete: BTreeMap<String, i8> = BTreeMap::new();
    let mut to_upsert: BTreeMap<String, (ScramMechanism, &ScramUpsertion)> = BTreeMap::new();
    for (name, mechanism) in deletions {
        if errors.contains_key(name) {
            continue;
        }
        if to_delete.remove(name).is_some() {
            errors.insert(name.clone(), duplicate());
            continue;
        }
        match validate_deletion(image, name, *mechanism) {
            Ok(()) => {
                to_delete.insert(name.clone(), *mechanism);
            }
            Err(e) => {
                errors.insert(name.clone(), e);
            }
        }
    }
    for u in upsertions {
        if errors.contains_key(&u.name) {
            continue;
        }
        if to_delete.remove(&u.name).is_some() || to_upsert.remove(&u.name).is_some() {
            errors.insert(u.name.clone(), duplicate());
            continue;
        }
        match validate_upsertion(u) {
            Ok(m) => {
                to_upsert.insert(u.name.clone(), (m, u));
            }
            Err(e) => {
                errors.insert(u.name.clone(), e);
            }
        }
    }
    let mut records = Vec::new();
    let mut results: Vec<ScramResult> = Vec::new();
    for (name, mechanism) in to_delete {
        records.push(MetadataRecord::RemoveUserScramCredential {
            name: name.clone(),
            mechanism,
        });
        results.push((name, 0, None));
    }
    for (name, (m, u)) in to_upsert {
        let credential = ScramCredential::from_salted_password(
            m,
            u.salt.clone(),
            &u.salted_password,
            u.iterations,
        );
        records.push(MetadataRecord::UserScramCredential {
            name: name.clone(),
            mechanism: u.mechanism,
            credential,
        });
        results.push((name, 0, None));
    }
    results.extend(errors.into_iter().map(|(n, (c, m))| (n, c, Some(m))));
    (records, ControllerReply::ScramResults(results))
}

/// The credentials a node was formatted with, recorded unless a bootstrap already was (by
/// this node before, or by another node of the cluster): Kafka writes its bootstrap records
/// once, when the metadata log is created.
pub fn bootstrap(
    image: &MetadataImage,
    credentials: &[(String, i8, ScramCredential)],
) -> ControllerResult {
    if image.scram_bootstrapped || credentials.is_empty() {
        return (Vec::new(), ControllerReply::Done);
    }
    let mut records: Vec<MetadataRecord> = credentials
        .iter()
        .map(
            |(name, mechanism, credential)| MetadataRecord::UserScramCredential {
                name: name.clone(),
                mechanism: *mechanism,
                credential: credential.clone(),
            },
        )
        .collect();
    records.push(MetadataRecord::ScramBootstrapped);
    (records, ControllerReply::Done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::MetadataBatch;

    fn up(name: &str, mechanism: i8, iterations: i32) -> ScramUpsertion {
        ScramUpsertion {
            name: name.into(),
            mechanism,
            iterations,
            salt: b"salt".to_vec(),
            salted_password: vec![7; 32],
        }
    }

    fn codes(r: &ControllerResult) -> BTreeMap<String, i16> {
        match &r.1 {
            ControllerReply::ScramResults(v) => v.iter().map(|(n, c, _)| (n.clone(), *c)).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn validation_is_kafkas() {
        let img = MetadataImage::default();
        let r = alter_credentials(
            &img,
            &[("ghost".into(), 1)],
            &[
                up("few", 1, 4095),
                up("many", 1, 16385),
                up("", 1, 8192),
                up("unknown", 3, 8192),
                up("twice", 1, 8192),
                up("twice", 2, 8192),
                up("ok", 2, 4096),
            ],
        );
        let c = codes(&r);
        assert_eq!(c["ghost"], ResponseError::ResourceNotFound.code());
        assert_eq!(c["few"], ResponseError::UnacceptableCredential.code());
        assert_eq!(c["many"], ResponseError::UnacceptableCredential.code());
        assert_eq!(c[""], ResponseError::UnacceptableCredential.code());
        assert_eq!(c["unknown"], ResponseError::UnsupportedSaslMechanism.code());
        assert_eq!(c["twice"], ResponseError::DuplicateResource.code());
        assert_eq!(c["ok"], 0);
        assert_eq!(r.0.len(), 1);
        let mut img = img;
        img.apply_batch(&MetadataBatch(r.0));
        assert!(img.scram_credential("ok", ScramMechanism::Sha512).is_some());
        let r = alter_credentials(&img, &[("ok".into(), 2)], &[]);
        assert_eq!(codes(&r)["ok"], 0);
        img.apply_batch(&MetadataBatch(r.0));
        assert!(img.scram_credential("ok", ScramMechanism::Sha512).is_none());
    }

    #[test]
    fn bootstrap_happens_once() {
        let mut img = MetadataImage::default();
        let salted = ScramMechanism::Sha256.salted_password("pw", b"salt", 4096);
        let c = ScramCredential::from_salted_password(
            ScramMechanism::Sha256,
            b"salt".to_vec(),
            &salted,
            4096,
        );
        let creds = vec![("admin".to_string(), 1, c)];
        let (records, _) = bootstrap(&img, &creds);
        assert_eq!(records.len(), 2);
        img.apply_batch(&MetadataBatch(records));
        assert!(img
            .scram_credential("admin", ScramMechanism::Sha256)
            .is_some());
        assert!(bootstrap(&img, &creds).0.is_empty());
    }
}

//! ACL writes decided by the active controller (Kafka's `AclControlManager`): CreateAcls and
//! DeleteAcls turned into `AccessControlEntry` and `RemoveAccessControlEntry` records.

use std::collections::BTreeSet;

use uuid::Uuid;

use crate::acl::{
    AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType, StandardAcl,
};
use crate::error::ControllerError;
use crate::image::{MetadataImage, MetadataRecord};
use crate::request::{ControllerReply, ControllerResult};

/// The most records one CreateAcls or DeleteAcls may write (Kafka's
/// `QuorumController.MAX_RECORDS_PER_USER_OP`).
pub const ACL_RECORDS_PER_REQUEST_MAX: usize = 10_000;

/// Per binding: `None` when created (or already present), else the INVALID_REQUEST message.
pub type AclCreateResults = Vec<Option<String>>;

/// Per filter: the ACLs it deleted, or the INVALID_REQUEST message.
pub type AclDeleteResults = Vec<Result<Vec<StandardAcl>, String>>;

/// Kafka's `AclControlManager.validateNewAcl`.
fn validate_new_acl(acl: &StandardAcl) -> Result<(), String> {
    if matches!(acl.resource_type, ResourceType::Unknown | ResourceType::Any) {
        return Err(format!(
            "Invalid resourceType {}",
            acl.resource_type.kafka_name()
        ));
    }
    if !matches!(
        acl.pattern_type,
        PatternType::Literal | PatternType::Prefixed
    ) {
        return Err(format!(
            "Invalid patternType {}",
            acl.pattern_type.kafka_name()
        ));
    }
    if matches!(acl.operation, AclOperation::Unknown | AclOperation::Any) {
        return Err(format!("Invalid operation {}", acl.operation.kafka_name()));
    }
    if !matches!(
        acl.permission_type,
        AclPermissionType::Allow | AclPermissionType::Deny
    ) {
        return Err(format!(
            "Invalid permissionType {}",
            acl.permission_type.kafka_name()
        ));
    }
    if acl.resource_name.is_empty() {
        return Err("Resource name should not be empty".to_string());
    }
    Ok(())
}

/// Kafka's `AclControlManager.createAcls`: each valid binding not already present gets a new
/// id and a record; a duplicate (of the image or of an earlier binding) succeeds with none.
pub fn create_acls(
    image: &MetadataImage,
    acls: &[StandardAcl],
) -> Result<ControllerResult, ControllerError> {
    let mut existing: BTreeSet<&StandardAcl> = image.acls.values().collect();
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(acls.len());
    let mut ids: BTreeSet<Uuid> = BTreeSet::new();
    for acl in acls {
        if let Err(message) = validate_new_acl(acl) {
            results.push(Some(message));
            continue;
        }
        if existing.insert(acl) {
            if records.len() >= ACL_RECORDS_PER_REQUEST_MAX {
                return Err(ControllerError::InvalidRequest(format!(
                    "Cannot create more than {ACL_RECORDS_PER_REQUEST_MAX} acls in a single operation."
                )));
            }
            let id = loop {
                let id = Uuid::new_v4();
                if !image.acls.contains_key(&id) && ids.insert(id) {
                    break id;
                }
            };
            records.push(MetadataRecord::AccessControlEntry {
                id,
                acl: acl.clone(),
            });
        }
        results.push(None);
    }
    Ok((records, ControllerReply::AclsCreated(results)))
}

/// Kafka's `AclControlManager.deleteAcls`: every ACL each valid filter matches is removed
/// (once, however many filters match it) and listed in that filter's result; all or nothing.
pub fn delete_acls(
    image: &MetadataImage,
    filters: &[AclBindingFilter],
) -> Result<ControllerResult, ControllerError> {
    let mut removed: BTreeSet<Uuid> = BTreeSet::new();
    let mut results = Vec::with_capacity(filters.len());
    for filter in filters {
        if filter.pattern_is_unknown() {
            results.push(Err("Unknown patternFilter.".to_string()));
            continue;
        }
        if filter.entry_is_unknown() {
            results.push(Err("Unknown entryFilter.".to_string()));
            continue;
        }
        let mut deleted = Vec::new();
        for (id, acl) in image.acls.iter().filter(|(_, a)| filter.matches(a)) {
            removed.insert(*id);
            deleted.push(acl.clone());
            if removed.len() > ACL_RECORDS_PER_REQUEST_MAX {
                return Err(ControllerError::InvalidRequest(format!(
                    "Cannot remove more than {ACL_RECORDS_PER_REQUEST_MAX} acls in a single delete operation."
                )));
            }
        }
        results.push(Ok(deleted));
    }
    let records = removed
        .into_iter()
        .map(|id| MetadataRecord::RemoveAccessControlEntry { id })
        .collect();
    Ok((records, ControllerReply::AclsDeleted(results)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(name: &str, op: AclOperation) -> StandardAcl {
        StandardAcl {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern_type: PatternType::Literal,
            principal: "User:a".into(),
            host: "*".into(),
            operation: op,
            permission_type: AclPermissionType::Allow,
        }
    }

    fn apply(image: &mut MetadataImage, records: &[MetadataRecord]) {
        for r in records {
            image.apply(r).unwrap();
        }
    }

    #[test]
    fn create_validates_each_binding_and_skips_duplicates() {
        let mut image = MetadataImage::default();
        let mut bad = acl("t", AclOperation::Any);
        let (records, reply) = create_acls(
            &image,
            &[
                acl("t", AclOperation::Read),
                acl("t", AclOperation::Read),
                bad.clone(),
            ],
        )
        .unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(
            reply,
            ControllerReply::AclsCreated(vec![None, None, Some("Invalid operation ANY".into())])
        );
        apply(&mut image, &records);
        let (again, _) = create_acls(&image, &[acl("t", AclOperation::Read)]).unwrap();
        assert!(again.is_empty(), "an existing ACL writes nothing");
        bad.operation = AclOperation::Read;
        bad.resource_name.clear();
        let (_, reply) = create_acls(&image, &[bad]).unwrap();
        assert_eq!(
            reply,
            ControllerReply::AclsCreated(vec![Some("Resource name should not be empty".into())])
        );
    }

    #[test]
    fn delete_removes_each_match_once_and_refuses_unknown_filters() {
        let mut image = MetadataImage::default();
        let (records, _) = create_acls(
            &image,
            &[acl("t", AclOperation::Read), acl("u", AclOperation::Write)],
        )
        .unwrap();
        apply(&mut image, &records);
        let any = AclBindingFilter {
            resource_type: ResourceType::Any,
            resource_name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission_type: AclPermissionType::Any,
        };
        let mut unknown = any.clone();
        unknown.operation = AclOperation::Unknown;
        let (records, reply) = delete_acls(&image, &[any.clone(), any, unknown]).unwrap();
        assert_eq!(records.len(), 2);
        let ControllerReply::AclsDeleted(results) = reply else {
            panic!("{reply:?}")
        };
        assert_eq!(results[0].as_ref().unwrap().len(), 2);
        assert_eq!(results[1].as_ref().unwrap().len(), 2);
        assert_eq!(results[2], Err("Unknown entryFilter.".into()));
        apply(&mut image, &records);
        assert!(image.acls.is_empty());
    }
}

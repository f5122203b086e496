//! Producer id blocks (Kafka's `ProducerIdControlManager`): each AllocateProducerIds hands a
//! broker the next [`PRODUCER_ID_BLOCK_SIZE`] ids past the image's watermark, which only moves
//! up, so no two blocks overlap.

use crate::image::{MetadataImage, MetadataRecord};
use crate::request::{ControllerReply, ControllerResult};

/// Producer ids handed out per AllocateProducerIds, as Kafka's `ProducerIdsBlock` size.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// AllocateProducerIds for `node_id` (Kafka's `ProducerIdControlManager.
/// generateNextProducerId`): the block that starts at the image's watermark; the record moves
/// the watermark past it.
pub fn allocate_producer_ids(image: &MetadataImage, node_id: i32) -> ControllerResult {
    let first_id = image.next_producer_id_block;
    (
        vec![MetadataRecord::AllocateProducerIds {
            node_id,
            next_block: first_id + PRODUCER_ID_BLOCK_SIZE,
        }],
        ControllerReply::ProducerIds {
            first_id,
            size: PRODUCER_ID_BLOCK_SIZE,
        },
    )
}

#[cfg(test)]
mod tests {
    use crate::fixtures::*;
    use crate::request::{decide, ControllerReply, ControllerRequest};

    #[test]
    fn producer_id_blocks_do_not_overlap() {
        let mut img = cluster(1);
        let req = ControllerRequest::AllocateProducerIds { node_id: 1 };
        let (r1, a) = decide(&img, &req, &no_elr(false)).unwrap();
        apply(&mut img, &r1);
        let (_, b) = decide(&img, &req, &no_elr(false)).unwrap();
        assert_eq!(
            (a, b),
            (
                ControllerReply::ProducerIds {
                    first_id: 0,
                    size: 1000
                },
                ControllerReply::ProducerIds {
                    first_id: 1000,
                    size: 1000
                }
            )
        );
    }
}

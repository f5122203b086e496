//! Producer id blocks (Kafka's `ProducerIdControlManager`): each AllocateProducerIds hands a
//! broker the next [`PRODUCER_ID_BLOCK_SIZE`] ids past the image's watermark, which only moves
//! up, so no two blocks overlap.

/// Producer ids handed out per AllocateProducerIds, as Kafka's `ProducerIdsBlock` size.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

#[cfg(test)]
mod tests {
    use crate::controller::fixtures::*;
    use crate::controller::request::{decide, ControllerReply, ControllerRequest};

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

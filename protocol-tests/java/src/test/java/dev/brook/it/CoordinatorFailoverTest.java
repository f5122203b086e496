package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.utils.Utils;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Committed offsets in a cluster live in {@code __consumer_offsets}, a replicated topic created through the
 * controller, and a group's coordinator is the leader of partition {@code abs(hash(group)) % partitions}, as in
 * Kafka. These tests kill that leader with SIGKILL and check, with the Java client 4.4, that the group's committed
 * offsets and its members (classic and KIP-848) come back on the node elected in its place, and that a commit is only
 * answered once the offsets partition's in-sync replicas have it.
 *
 * <p>Every wait is a condition polled against a deadline; no sleep stands in for an event.
 */
@ExtendWith(BrookCluster.LogOnFailure.class)
class CoordinatorFailoverTest {
    private static final String OFFSETS_TOPIC = "__consumer_offsets";
    private static final int OFFSETS_PARTITIONS = 5;
    private static final Duration WAIT = Duration.ofSeconds(60);

    private final Closer closeables = new Closer();

    @BeforeEach
    void forgetEarlierClusters() {
        BrookCluster.resetStarted();
    }

    @AfterEach
    void closeAll() {
        closeables.closeAll();
    }

    /** A 3-node cluster with a topic of two RF=3 partitions holding 20 records each, and a group name for it. */
    private final class Setup {
        final BrookCluster c;
        final String topic;
        final String group;
        final TopicPartition p0;
        final TopicPartition p1;
        final int offsetsPartition;

        Setup(String name) throws Exception {
            Map<String, String> props = new LinkedHashMap<>(GroupSupport.brokerProps());
            props.put("offsets.topic.num.partitions", String.valueOf(OFFSETS_PARTITIONS));
            c = closeables.add(BrookCluster.start(name, 3, props));
            topic = Clients.uniqueTopic(name);
            group = topic + "-g";
            p0 = new TopicPartition(topic, 0);
            p1 = new TopicPartition(topic, 1);
            offsetsPartition = Utils.abs(group.hashCode()) % OFFSETS_PARTITIONS;
            c.createTopic(topic, 2, 3, Map.of());
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(c.bootstrap(), Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
                for (int i = 0; i < 40; i++) {
                    p.send(new ProducerRecord<>(topic, i % 2, null, ("v" + i).getBytes(UTF_8))).get(30, TimeUnit.SECONDS);
                }
            }
        }

        /** A member of the group that has read all 40 records. */
        KafkaConsumer<byte[], byte[]> consumerAtTheEnd(String protocol) {
            KafkaConsumer<byte[], byte[]> consumer = GroupSupport.groupConsumer(c.bootstrap(), group,
                Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol));
            consumer.subscribe(List.of(topic));
            Clients.pollAtLeast(consumer, 40, WAIT);
            return consumer;
        }
    }

    private static ConsumerGroupDescription describeGroup(Admin admin, String group) throws Exception {
        return admin.describeConsumerGroups(List.of(group)).all().get(30, TimeUnit.SECONDS).get(group);
    }

    private static Map<TopicPartition, Long> committed(Admin admin, String group) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> got = admin.listConsumerGroupOffsets(group)
            .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
        Map<TopicPartition, Long> out = new HashMap<>();
        got.forEach((tp, om) -> out.put(tp, om == null ? -1 : om.offset()));
        return out;
    }

    /** The first offset a fresh member of {@code group} reads in each partition of {@code topic}. */
    private static Map<Integer, Long> resumePoints(BrookCluster c, String topic, String group, String protocol,
                                                   int expected) throws InterruptedException {
        try (KafkaConsumer<byte[], byte[]> consumer = GroupSupport.groupConsumer(c.bootstrap(), group,
            Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol))) {
            consumer.subscribe(List.of(topic));
            List<ConsumerRecord<byte[], byte[]>> rest = Clients.pollAtLeast(consumer, expected, WAIT);
            assertEquals(expected, rest.size(), "records after the committed offsets, none before");
            Map<Integer, Long> first = new HashMap<>();
            for (ConsumerRecord<byte[], byte[]> r : rest) first.merge(r.partition(), r.offset(), Math::min);
            return first;
        }
    }

    /**
     * A classic-protocol consumer commits, the coordinator is SIGKILLed, and the same consumer, without rejoining,
     * commits again through the node that took over the offsets partition; a new member then resumes exactly at the
     * second commit.
     */
    @Test
    @Timeout(240)
    void classicGroupSurvivesTheCoordinatorsDeath() throws Exception {
        groupSurvivesTheCoordinatorsDeath("classic");
    }

    /** The same with the KIP-848 protocol: the member, its epoch and its partitions come back from the records. */
    @Test
    @Timeout(240)
    void consumerProtocolGroupSurvivesTheCoordinatorsDeath() throws Exception {
        groupSurvivesTheCoordinatorsDeath("consumer");
    }

    private void groupSurvivesTheCoordinatorsDeath(String protocol) throws Exception {
        Setup s = new Setup("coord-" + protocol);
        BrookCluster c = s.c;
        String group = s.group;
        TopicPartition p0 = s.p0;
        TopicPartition p1 = s.p1;
        int offsetsPartition = s.offsetsPartition;
        Admin admin = c.admin();

        try (KafkaConsumer<byte[], byte[]> consumer = s.consumerAtTheEnd(protocol)) {
            consumer.commitSync(Map.of(p0, new OffsetAndMetadata(10), p1, new OffsetAndMetadata(15)), WAIT);

            ConsumerGroupDescription before = describeGroup(admin, group);
            int coordinator = before.coordinator().id();
            assertEquals(c.leaderOf(OFFSETS_TOPIC, offsetsPartition), coordinator,
                "the coordinator is the leader of " + OFFSETS_TOPIC + "-" + offsetsPartition);
            assertEquals(Set.of(1, 2, 3), c.isrViaAdmin(OFFSETS_TOPIC, offsetsPartition),
                "the offsets partition is replicated to every node");
            String member = before.members().iterator().next().consumerId();
            System.out.println("[coordinator-observed] " + protocol + " group " + group + " on " + OFFSETS_TOPIC + "-"
                + offsetsPartition + ", coordinator " + coordinator + ", member " + member);

            long killedAt = System.nanoTime();
            c.kill(coordinator);
            // The consumer finds the new coordinator by itself (NOT_COORDINATOR or a dead connection make it look
            // again); the commit is retried until the new leader of the offsets partition answers it.
            consumer.commitSync(Map.of(p0, new OffsetAndMetadata(12), p1, new OffsetAndMetadata(16)), WAIT);
            long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killedAt);

            ConsumerGroupDescription after = describeGroup(admin, group);
            assertNotEquals(coordinator, after.coordinator().id(), "a live node coordinates the group");
            assertEquals(c.leaderOf(OFFSETS_TOPIC, offsetsPartition), after.coordinator().id());
            assertEquals(List.of(member),
                after.members().stream().map(m -> m.consumerId()).collect(Collectors.toList()),
                "the member came back with the group: no rejoin was needed");
            System.out.println("[coordinator-figure] " + protocol + ": SIGKILL of the coordinator -> commit answered by"
                + " node " + after.coordinator().id() + " in " + tookMs + " ms");
            c.startNode(coordinator);
        }
        assertEquals(Map.of(p0, 12L, p1, 16L), committed(admin, group));
        assertEquals(Map.of(0, 12L, 1, 16L), resumePoints(c, s.topic, group, protocol, (20 - 12) + (20 - 16)));
    }

    /**
     * A commit is answered only when the offsets partition's high watermark passes it. With the coordinator cut off
     * from both followers (replication link faults) and min.insync.replicas=2, no commit can be acknowledged: the
     * client keeps retrying (COORDINATOR_NOT_AVAILABLE) until its own timeout. Healing the links lets the next commit
     * through, and the committed offset is the one of that commit.
     */
    @Test
    @Timeout(240)
    void aCommitWaitsForTheOffsetsPartitionsIsr() throws Exception {
        Setup s = new Setup("coord-isr");
        BrookCluster c = s.c;
        TopicPartition p0 = s.p0;
        int offsetsPartition = s.offsetsPartition;
        try (KafkaConsumer<byte[], byte[]> consumer = s.consumerAtTheEnd("classic")) {
            consumer.commitSync(Map.of(p0, new OffsetAndMetadata(3)), WAIT);
            int coordinator = c.leaderOf(OFFSETS_TOPIC, offsetsPartition);
            Set<Integer> followers = new TreeSet<>(c.ids());
            followers.remove(coordinator);
            c.addFault(coordinator, "{\"action\":\"partition\",\"to\":\"*\",\"direction\":\"both\",\"traffic\":\"replication\"}");
            for (int f : followers) {
                c.addFault(f, "{\"action\":\"partition\",\"to\":" + coordinator
                    + ",\"direction\":\"both\",\"traffic\":\"replication\"}");
            }
            assertThrows(TimeoutException.class,
                () -> consumer.commitSync(Map.of(p0, new OffsetAndMetadata(5)), Duration.ofSeconds(8)),
                "no commit is acknowledged while the offsets partition has too few in-sync replicas");
            c.clearFaults(coordinator);
            for (int f : followers) c.clearFaults(f);
            c.awaitIsr(OFFSETS_TOPIC, offsetsPartition, Set.of(1, 2, 3), WAIT);
            consumer.commitSync(Map.of(p0, new OffsetAndMetadata(6)), WAIT);
            assertEquals(6L, committed(c.admin(), s.group).get(p0));
        }
    }
}

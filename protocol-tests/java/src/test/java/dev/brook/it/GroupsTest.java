package dev.brook.it;

import static dev.brook.it.GroupSupport.await;
import static dev.brook.it.GroupSupport.coversExactly;
import static dev.brook.it.GroupSupport.describe;
import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Consumer groups with the Java client: rebalances (eager, cooperative, KIP-848), poll timeouts, lag, group admin. */
@ExtendWith(BrokerLogOnFailure.class)
class GroupsTest {
    static final int PARTITIONS = 6;
    static final Duration REBALANCE_WAIT = Duration.ofSeconds(60);
    static BrookBroker broker;
    static String bootstrap;

    @BeforeAll
    static void start() {
        assumeFalse(TestBrokers.isExternal(), "group tests start their own broker with fast-rebalance settings");
        broker = GroupSupport.startBroker("groups");
        bootstrap = broker.bootstrap();
    }

    @AfterAll
    static void stop() {
        if (broker != null) broker.close();
    }

    static Map<String, Object> classic(String assignor) {
        return Map.of(
            ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor,
            ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300",
            ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
    }

    static void produce(String topic, int n) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap)) {
            for (int i = 0; i < n; i++) p.send(new ProducerRecord<>(topic, ("k" + i).getBytes(UTF_8), ("v" + i).getBytes(UTF_8)));
            p.flush();
        }
    }

    /** Three members share six partitions; a fourth joins; then one leaves. Returns partitions revoked by the fourth join. */
    private void rebalanceScenario(String assignor, boolean eager) throws Exception {
        String topic = Clients.uniqueTopic(eager ? "eager" : "coop");
        String group = topic + "-g";
        Clients.createTopic(bootstrap, topic, PARTITIONS);
        List<GroupSupport.Member> members = new ArrayList<>();
        try {
            for (int i = 1; i <= 3; i++) members.add(new GroupSupport.Member("m" + i, bootstrap, group, topic, classic(assignor)));
            List<GroupSupport.Member> three = List.copyOf(members);
            await("three members to share " + PARTITIONS + " partitions", REBALANCE_WAIT,
                () -> coversExactly(three, topic, PARTITIONS) && three.stream().allMatch(m -> m.assignment().size() == 2),
                () -> describe(three));
            for (GroupSupport.Member m : three) m.revoked.set(0);

            GroupSupport.Member fourth = new GroupSupport.Member("m4", bootstrap, group, topic, classic(assignor));
            members.add(fourth);
            List<GroupSupport.Member> four = List.copyOf(members);
            await("four members to share " + PARTITIONS + " partitions", REBALANCE_WAIT,
                () -> coversExactly(four, topic, PARTITIONS) && !fourth.assignment().isEmpty(), () -> describe(four));
            int revoked = three.stream().mapToInt(m -> m.revoked.get()).sum();
            if (eager) {
                assertEquals(PARTITIONS, revoked, "eager: every owned partition is revoked; " + describe(four));
            } else {
                assertEquals(fourth.assignment().size(), revoked,
                    "cooperative: only the partitions that moved to m4 are revoked; " + describe(four));
                assertTrue(revoked < PARTITIONS, "cooperative revokes fewer than all partitions");
            }

            GroupSupport.Member leaving = members.remove(0);
            leaving.close();
            List<GroupSupport.Member> rest = List.copyOf(members);
            await("the leaver's partitions to be reassigned", REBALANCE_WAIT,
                () -> coversExactly(rest, topic, PARTITIONS) && rest.stream().allMatch(m -> m.assignment().size() == 2),
                () -> describe(rest));
        } finally {
            for (GroupSupport.Member m : members) m.close();
        }
    }

    @Test
    void eagerRangeRevokesEverything() throws Exception {
        rebalanceScenario("org.apache.kafka.clients.consumer.RangeAssignor", true);
    }

    @Test
    void eagerRoundRobinRevokesEverything() throws Exception {
        rebalanceScenario("org.apache.kafka.clients.consumer.RoundRobinAssignor", true);
    }

    @Test
    void kip848CommitsWithMemberEpochAndResumes() throws Exception {
        String topic = Clients.uniqueTopic("kip848c");
        String group = topic + "-g";
        Clients.createTopic(bootstrap, topic, 2);
        produce(topic, 10);
        Map<String, Object> props = Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        Map<TopicPartition, Long> positions;
        try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group, props)) {
            c.subscribe(List.of(topic));
            assertEquals(10, Clients.pollAtLeast(c, 10, Clients.WAIT).size());
            c.commitSync(Clients.WAIT);  // OffsetCommit v9 carrying the member epoch
            positions = Clients.positions(c);
            Map<TopicPartition, OffsetAndMetadata> committed = c.committed(positions.keySet(), Clients.WAIT);
            positions.forEach((tp, pos) -> assertEquals(pos, committed.get(tp).offset(), "committed " + tp));
        }
        produce(topic, 4);
        try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group, props)) {
            c.subscribe(List.of(topic));
            var again = Clients.pollAtLeast(c, 4, Clients.WAIT);
            for (var r : again) {
                assertTrue(r.offset() >= positions.get(new TopicPartition(r.topic(), r.partition())),
                    "record " + r.partition() + "@" + r.offset() + " was committed before");
            }
        }
    }

    @Test
    void cooperativeStickyRevokesOnlyMovedPartitions() throws Exception {
        rebalanceScenario("org.apache.kafka.clients.consumer.CooperativeStickyAssignor", false);
    }

    @Test
    void restartedStaticMemberGetsItsPartitionsBackWithoutARebalance() throws Exception {
        String topic = Clients.uniqueTopic("static");
        String group = topic + "-g";
        int parts = 4;
        Clients.createTopic(bootstrap, topic, parts);
        Map<String, Object> s1Props = new HashMap<>(classic("org.apache.kafka.clients.consumer.RangeAssignor"));
        s1Props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "s1");
        Map<String, Object> s2Props = new HashMap<>(classic("org.apache.kafka.clients.consumer.RangeAssignor"));
        s2Props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "s2");
        try (GroupSupport.Member s1 = new GroupSupport.Member("s1", bootstrap, group, topic, s1Props)) {
            java.util.Set<TopicPartition> before;
            try (GroupSupport.Member s2 = new GroupSupport.Member("s2", bootstrap, group, topic, s2Props)) {
                List<GroupSupport.Member> both = List.of(s1, s2);
                await("s1 and s2 to split the partitions", REBALANCE_WAIT,
                    () -> coversExactly(both, topic, parts) && s1.assignment().size() == 2, () -> describe(both));
                before = s2.assignment();
                s1.revoked.set(0);
            } // a static member's close does not leave the group
            try (GroupSupport.Member s2 = new GroupSupport.Member("s2-restarted", bootstrap, group, topic, s2Props)) {
                await("the restarted s2 to own its old partitions", REBALANCE_WAIT,
                    () -> s2.assignment().equals(before), () -> describe(List.of(s1, s2)));
                assertEquals(0, s1.revoked.get(), "no rebalance: s1 kept its partitions");
                assertEquals(2, s1.assignment().size());
            }
        }
    }

    @Test
    void kip848StaticMemberRestartKeepsItsPartitions() throws Exception {
        String topic = Clients.uniqueTopic("static848");
        String group = topic + "-g";
        int parts = 4;
        Clients.createTopic(bootstrap, topic, parts);
        Map<String, Object> p1 = Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer",
            ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "k1");
        Map<String, Object> p2 = Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer",
            ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "k2");
        try (GroupSupport.Member k1 = new GroupSupport.Member("k1", bootstrap, group, topic, p1)) {
            java.util.Set<TopicPartition> before;
            try (GroupSupport.Member k2 = new GroupSupport.Member("k2", bootstrap, group, topic, p2)) {
                List<GroupSupport.Member> both = List.of(k1, k2);
                await("k1 and k2 to split the partitions", REBALANCE_WAIT,
                    () -> coversExactly(both, topic, parts) && !k1.assignment().isEmpty() && !k2.assignment().isEmpty(),
                    () -> describe(both));
                before = k2.assignment();
                k1.revoked.set(0);
            } // leaves with epoch -2: its partitions wait for it
            try (GroupSupport.Member k2 = new GroupSupport.Member("k2-restarted", bootstrap, group, topic, p2)) {
                await("the restarted k2 to own its old partitions", REBALANCE_WAIT,
                    () -> k2.assignment().equals(before), () -> describe(List.of(k1, k2)));
                assertEquals(0, k1.revoked.get(), "k1 kept its partitions");
                assertEquals(parts - before.size(), k1.assignment().size());
            }
        }
    }

    @Test
    void kip848ConsumerJoinsConsumesAndHandsOverPartitions() throws Exception {
        String topic = Clients.uniqueTopic("kip848");
        String group = topic + "-g";
        int parts = 4;
        Clients.createTopic(bootstrap, topic, parts);
        Map<String, Object> props = Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        try (GroupSupport.Member c1 = new GroupSupport.Member("c1", bootstrap, group, topic, props)) {
            await("c1 to own every partition", REBALANCE_WAIT, () -> c1.assignment().size() == parts, c1::toString);
            produce(topic, 20);
            await("c1 to read 20 records", REBALANCE_WAIT, () -> c1.records.get() == 20, () -> c1.records + " read");
            try (GroupSupport.Member c2 = new GroupSupport.Member("c2", bootstrap, group, topic, props)) {
                List<GroupSupport.Member> both = List.of(c1, c2);
                await("c1 and c2 to split the partitions", REBALANCE_WAIT,
                    () -> coversExactly(both, topic, parts) && !c2.assignment().isEmpty() && !c1.assignment().isEmpty(),
                    () -> describe(both));
                assertTrue(c1.revoked.get() > 0, "c1 revoked what moved to c2");
                try (Admin admin = Clients.admin(bootstrap)) {
                    await("describeConsumerGroups to show a stable KIP-848 group of two", REBALANCE_WAIT, () -> {
                        ConsumerGroupDescription d = describeGroup(admin, group);
                        int assigned = d.members().stream().mapToInt(m -> m.assignment().topicPartitions().size()).sum();
                        return d.type() == GroupType.CONSUMER && d.groupState() == GroupState.STABLE
                            && d.members().size() == 2 && assigned == parts;
                    }, () -> String.valueOf(describeGroup(admin, group)));
                }
            }
            await("c1 to own every partition again after c2 left", REBALANCE_WAIT,
                () -> c1.assignment().size() == parts, c1::toString);
        }
    }

    @Test
    void kip848RegexSubscriptionPicksUpNewTopics() throws Exception {
        String prefix = Clients.uniqueTopic("rx");
        Clients.createTopic(bootstrap, prefix + "-a", 2);
        Map<String, Object> props = Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        try (GroupSupport.Member c = new GroupSupport.Member("rx", bootstrap, prefix + "-g",
            GroupSupport.REGEX_PREFIX + prefix + "-.*", props)) {
            await("the matching topic's partitions", REBALANCE_WAIT, () -> c.assignment().size() == 2, c::toString);
            Clients.createTopic(bootstrap, prefix + "-b", 3);
            await("the new matching topic's partitions too", REBALANCE_WAIT,
                () -> c.assignment().size() == 5, c::toString);
        }
    }

    @Test
    void memberThatStopsPollingIsRemovedAndCannotCommit() throws Exception {
        String topic = Clients.uniqueTopic("pollint");
        String group = topic + "-g";
        Clients.createTopic(bootstrap, topic, 1);
        produce(topic, 3);
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<String, Object> props = new HashMap<>(classic("org.apache.kafka.clients.consumer.RangeAssignor"));
        props.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "2000");
        props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group, props);
             Admin admin = Clients.admin(bootstrap)) {
            c.subscribe(List.of(topic));
            int got = Clients.pollAtLeast(c, 3, Clients.WAIT).size();
            assertEquals(3, got);
            await("the group to report one member", REBALANCE_WAIT, () -> members(admin, group) == 1,
                () -> "members=" + members(admin, group));
            // The application now "processes" for longer than max.poll.interval.ms: no poll.
            await("the member to be removed after max.poll.interval.ms", REBALANCE_WAIT,
                () -> members(admin, group) == 0, () -> "members=" + members(admin, group));
            assertThrows(CommitFailedException.class,
                () -> c.commitSync(Map.of(tp, new OffsetAndMetadata(3)), Clients.WAIT));
        }
    }

    static ConsumerGroupDescription describeGroup(Admin admin, String group) {
        try {
            return admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    static int members(Admin admin, String group) {
        return describeGroup(admin, group).members().size();
    }

    @Test
    void lagIsZeroAfterCatchingUpAndGroupAdminWorks() throws Exception {
        String topic = Clients.uniqueTopic("lag");
        String group = topic + "-g";
        int parts = 3;
        int n = 30;
        Clients.createTopic(bootstrap, topic, parts);
        produce(topic, n);
        try (Admin admin = Clients.admin(bootstrap)) {
            try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group,
                classic("org.apache.kafka.clients.consumer.RangeAssignor"))) {
                c.subscribe(List.of(topic));
                assertEquals(n, Clients.pollAtLeast(c, n, Clients.WAIT).size());
                c.commitSync(Clients.WAIT);
                Map<TopicPartition, Long> lag = lag(admin, group);
                assertEquals(parts, lag.size(), "a committed offset per partition: " + lag);
                lag.forEach((tp, l) -> assertEquals(0L, l, "lag of " + tp));

                Collection<ConsumerGroupListing> listed = admin.listConsumerGroups().all().get(30, TimeUnit.SECONDS);
                assertTrue(listed.stream().anyMatch(g -> g.groupId().equals(group)), "listed: " + listed);
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                    .get(30, TimeUnit.SECONDS);
                assertEquals(GroupState.STABLE, d.groupState());
                assertEquals(GroupType.CLASSIC, d.type());
                assertEquals(1, d.members().size());
                assertEquals(parts, d.members().iterator().next().assignment().topicPartitions().size());
            }
            // Produce more: lag shows up per partition while the group is away.
            produce(topic, 9);
            long totalLag = lag(admin, group).values().stream().mapToLong(Long::longValue).sum();
            assertEquals(9, totalLag);
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                .get(30, TimeUnit.SECONDS);
            assertEquals(GroupState.EMPTY, d.groupState());
            admin.deleteConsumerGroups(List.of(group)).all().get(30, TimeUnit.SECONDS);
            Map<TopicPartition, OffsetAndMetadata> after = admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            assertTrue(after.isEmpty(), "offsets are gone with the group: " + after);
            assertFalse(admin.listConsumerGroups().all().get(30, TimeUnit.SECONDS).stream()
                .anyMatch(g -> g.groupId().equals(group)), "deleted group is not listed");
        }
    }

    /** Lag per partition: log end offset (Admin listOffsets latest) minus committed offset (listConsumerGroupOffsets). */
    static Map<TopicPartition, Long> lag(Admin admin, String group) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group)
            .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
        Map<TopicPartition, OffsetSpec> latest = committed.keySet().stream()
            .collect(Collectors.toMap(tp -> tp, tp -> OffsetSpec.latest()));
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> ends = admin.listOffsets(latest).all()
            .get(30, TimeUnit.SECONDS);
        Map<TopicPartition, Long> lag = new HashMap<>();
        committed.forEach((tp, om) -> lag.put(tp, ends.get(tp).offset() - om.offset()));
        return lag;
    }
}

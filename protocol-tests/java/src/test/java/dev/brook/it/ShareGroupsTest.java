package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * KIP-932 share groups with Kafka 4.4's {@code KafkaShareConsumer}: implicit and explicit
 * acknowledgement, redelivery with delivery counts, the delivery limit, several members on one
 * partition, the acquisition lock timeout, and close releasing what a member holds.
 *
 * <p>A share-partition starts at the log end when first fetched ({@code share.auto.offset.reset}
 * defaults to latest), so each test first primes its group: it produces a marker until the consumer
 * sees one, and only then produces the records under test.
 *
 * <p>The group's own {@code share.*} configs ({@code kafka-configs --entity-type groups}) override the
 * broker's: the start of a new share-partition, the isolation level, the lock duration and the delivery limit.
 */
@ExtendWith(BrokerLogOnFailure.class)
class ShareGroupsTest {
    /** Short enough for the lock-timeout case to run in seconds; the minimum is lowered to allow it. */
    static final int LOCK_MS = 5000;
    static final int DELIVERY_LIMIT = 5;
    static final Duration WAIT = Duration.ofSeconds(30);
    static BrookBroker broker;
    static String bootstrap;

    @BeforeAll
    static void start() {
        assumeFalse(TestBrokers.isExternal(), "share group tests start their own broker with a short lock duration");
        Map<String, String> props = new HashMap<>();
        props.put("group.share.min.record.lock.duration.ms", "1000");
        props.put("group.share.record.lock.duration.ms", Integer.toString(LOCK_MS));
        props.put("group.share.delivery.count.limit", Integer.toString(DELIVERY_LIMIT));
        // A member learns its assignment from a heartbeat: Kafka's 5 s default interval made each
        // test wait seconds for it (about 6 s per test on Kafka 4.4).
        props.put("group.share.min.heartbeat.interval.ms", "500");
        props.put("group.share.heartbeat.interval.ms", "500");
        props.putAll(TxnSupport.brokerProps());
        broker = BrookBroker.start("share", props);
        bootstrap = broker.bootstrap();
    }

    @AfterAll
    static void stop() {
        if (broker != null) broker.close();
    }

    static KafkaShareConsumer<byte[], byte[]> consumer(String group, boolean explicit, int maxPollRecords) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, explicit ? "explicit" : "implicit");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, maxPollRecords);
        return new KafkaShareConsumer<>(p);
    }

    /** One record per batch, so that acquisition (whole batches) can hand out a few at a time. */
    static void produce(String topic, List<String> values) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap)) {
            for (String v : values) p.send(new ProducerRecord<>(topic, v.getBytes(UTF_8))).get();
        }
    }

    static String value(ConsumerRecord<byte[], byte[]> r) {
        return new String(r.value(), UTF_8);
    }

    static short deliveries(ConsumerRecord<byte[], byte[]> r) {
        return r.deliveryCount().orElseThrow();
    }

    static List<String> values(String prefix, int n) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < n; i++) out.add(prefix + i);
        return out;
    }

    /** A new single-partition topic whose share-partition for {@code consumer}'s group has started. */
    static String primedTopic(String name, KafkaShareConsumer<byte[], byte[]> consumer, boolean explicit) throws Exception {
        String topic = Clients.uniqueTopic(name);
        Clients.createTopic(bootstrap, topic, 1);
        consumer.subscribe(List.of(topic));
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            produce(topic, List.of("marker"));
            ConsumerRecords<byte[], byte[]> got = consumer.poll(Duration.ofMillis(500));
            for (ConsumerRecord<byte[], byte[]> r : got) if (explicit) consumer.acknowledge(r, AcknowledgeType.ACCEPT);
            if (explicit) consumer.commitSync();
            if (!got.isEmpty()) return topic;
        }
        throw new AssertionError("the share group never received a record of " + topic);
    }

    /** Polls (bounded) until a record of a non-marker value arrives; acknowledges nothing. */
    static List<ConsumerRecord<byte[], byte[]>> pollRecords(KafkaShareConsumer<byte[], byte[]> c, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                if (value(r).equals("marker")) c.acknowledge(r, AcknowledgeType.ACCEPT);
                else out.add(r);
            }
            if (!out.isEmpty()) return out;
        }
        return List.of();
    }

    @Test
    void implicitAcknowledgementConsumesEveryRecordOnce() throws Exception {
        try (KafkaShareConsumer<byte[], byte[]> c = consumer("implicit", false, 500)) {
            String topic = primedTopic("share-implicit", c, false);
            List<String> sent = values("r", 50);
            produce(topic, sent);
            List<String> got = new ArrayList<>();
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (got.size() < sent.size() && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    if (!value(r).equals("marker")) got.add(value(r));
                    assertEquals(1, deliveries(r), "first delivery of " + value(r));
                }
            }
            assertEquals(sent, got);
            // Acknowledged records never come back, even past the lock duration.
            long quiet = System.nanoTime() + Duration.ofMillis(LOCK_MS + 1000).toNanos();
            while (System.nanoTime() < quiet) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) fail("delivered again: " + value(r));
            }
        }
    }

    @Test
    void releaseRedeliversWithRisingCountAndRejectArchives() throws Exception {
        try (KafkaShareConsumer<byte[], byte[]> c = consumer("explicit", true, 500)) {
            String topic = primedTopic("share-explicit", c, true);
            produce(topic, List.of("a"));
            List<ConsumerRecord<byte[], byte[]>> first = pollRecords(c, WAIT);
            assertEquals(1, first.size());
            assertEquals(1, deliveries(first.get(0)));
            c.acknowledge(first.get(0), AcknowledgeType.RELEASE);
            c.commitSync();
            List<ConsumerRecord<byte[], byte[]>> second = pollRecords(c, WAIT);
            assertEquals(1, second.size());
            assertEquals(first.get(0).offset(), second.get(0).offset());
            assertEquals(2, deliveries(second.get(0)), "a released record comes back with its count raised");
            c.acknowledge(second.get(0), AcknowledgeType.REJECT);
            c.commitSync();
            produce(topic, List.of("b"));
            List<ConsumerRecord<byte[], byte[]>> next = pollRecords(c, WAIT);
            assertEquals(List.of("b"), next.stream().map(ShareGroupsTest::value).toList(), "the rejected record is archived");
            c.acknowledge(next.get(0), AcknowledgeType.ACCEPT);
            c.commitSync();
        }
    }

    @Test
    void recordReleasedUpToTheDeliveryLimitIsArchived() throws Exception {
        try (KafkaShareConsumer<byte[], byte[]> c = consumer("limit", true, 500)) {
            String topic = primedTopic("share-limit", c, true);
            produce(topic, List.of("poison"));
            for (int i = 1; i <= DELIVERY_LIMIT; i++) {
                List<ConsumerRecord<byte[], byte[]>> got = pollRecords(c, WAIT);
                assertEquals(List.of("poison"), got.stream().map(ShareGroupsTest::value).toList());
                assertEquals(i, deliveries(got.get(0)));
                c.acknowledge(got.get(0), AcknowledgeType.RELEASE);
                c.commitSync();
            }
            produce(topic, List.of("after"));
            List<ConsumerRecord<byte[], byte[]>> next = pollRecords(c, WAIT);
            assertEquals(List.of("after"), next.stream().map(ShareGroupsTest::value).toList(),
                "released " + DELIVERY_LIMIT + " times, the record is archived");
            c.acknowledge(next.get(0), AcknowledgeType.ACCEPT);
            c.commitSync();
        }
    }

    @Test
    void twoMembersShareOnePartitionWithoutDoubleDelivery() throws Exception {
        String group = "two-members";
        try (KafkaShareConsumer<byte[], byte[]> a = consumer(group, false, 5);
             KafkaShareConsumer<byte[], byte[]> b = consumer(group, false, 5)) {
            String topic = primedTopic("share-two", a, false);
            b.subscribe(List.of(topic));
            List<String> sent = values("m", 100);
            Map<String, Set<String>> byMember = new ConcurrentHashMap<>();
            Map<String, String> owner = new ConcurrentHashMap<>();
            AtomicBoolean done = new AtomicBoolean();
            List<String> doubles = new ArrayList<>();
            List<KafkaShareConsumer<byte[], byte[]>> cs = List.of(a, b);
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                String name = i == 0 ? "a" : "b";
                KafkaShareConsumer<byte[], byte[]> c = cs.get(i);
                byMember.put(name, ConcurrentHashMap.newKeySet());
                Thread t = new Thread(() -> {
                    long deadline = System.nanoTime() + WAIT.toNanos();
                    while (!done.get() && System.nanoTime() < deadline) {
                        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                            String v = value(r);
                            if (v.equals("marker")) continue;
                            byMember.get(name).add(v);
                            // Some processing time per record, so that one member cannot drain the
                            // partition before the other is served.
                            try {
                                Thread.sleep(10);
                            } catch (InterruptedException e) {
                                return;
                            }
                            String prev = owner.putIfAbsent(v, name);
                            if (prev != null) synchronized (doubles) { doubles.add(v + " to " + prev + " and " + name); }
                        }
                    }
                });
                threads.add(t);
                t.start();
            }
            // Both members hold the partition before the records are written.
            try (org.apache.kafka.clients.admin.Admin admin = Clients.admin(bootstrap)) {
                GroupSupport.await("two assigned members", WAIT, () -> {
                    try {
                        var d = admin.describeShareGroups(List.of(group)).describedGroups().get(group).get();
                        return d.members().size() == 2
                            && d.members().stream().allMatch(m -> !m.assignment().topicPartitions().isEmpty());
                    } catch (Exception e) {
                        return false;
                    }
                }, () -> "share group " + group);
            }
            produce(topic, sent);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (owner.size() < sent.size() && System.nanoTime() < deadline) Thread.sleep(50);
            done.set(true);
            for (Thread t : threads) t.join(WAIT.toMillis());
            assertEquals(new HashSet<>(sent), owner.keySet(), "every record delivered");
            assertTrue(doubles.isEmpty(), "delivered to both members: " + doubles);
            assertFalse(byMember.get("a").isEmpty(), "member a got records");
            assertFalse(byMember.get("b").isEmpty(), "member b got records");
        }
    }

    @Test
    void lockTimeoutHandsAnUnacknowledgedRecordToAnotherMember() throws Exception {
        String group = "lock-timeout";
        try (KafkaShareConsumer<byte[], byte[]> a = consumer(group, true, 500);
             KafkaShareConsumer<byte[], byte[]> b = consumer(group, true, 500)) {
            String topic = primedTopic("share-lock", a, true);
            b.subscribe(List.of(topic));
            produce(topic, List.of("held"));
            List<ConsumerRecord<byte[], byte[]>> gotA = new ArrayList<>();
            List<ConsumerRecord<byte[], byte[]>> gotB = new ArrayList<>();
            long deadline = System.nanoTime() + WAIT.toNanos();
            // Whoever gets it first holds it without acknowledging; the other must get it after the lock.
            while (gotA.isEmpty() && gotB.isEmpty() && System.nanoTime() < deadline) {
                gotA.addAll(pollRecords(a, Duration.ofMillis(300)));
                if (gotA.isEmpty()) gotB.addAll(pollRecords(b, Duration.ofMillis(300)));
            }
            KafkaShareConsumer<byte[], byte[]> other = gotA.isEmpty() ? a : b;
            List<ConsumerRecord<byte[], byte[]>> held = gotA.isEmpty() ? gotB : gotA;
            assertEquals(1, held.size());
            long acquiredAt = System.nanoTime();
            List<ConsumerRecord<byte[], byte[]>> again = pollRecords(other, WAIT);
            long waitedMs = (System.nanoTime() - acquiredAt) / 1_000_000;
            assertEquals(1, again.size());
            assertEquals(held.get(0).offset(), again.get(0).offset());
            assertEquals(2, deliveries(again.get(0)));
            assertTrue(waitedMs >= LOCK_MS - 1000, "handed on after the lock duration, not before: " + waitedMs + " ms");
            other.acknowledge(again.get(0), AcknowledgeType.ACCEPT);
            other.commitSync();
        }
    }

    @Test
    void closeHandsHeldRecordsOn() throws Exception {
        String group = "close";
        KafkaShareConsumer<byte[], byte[]> a = consumer(group, true, 500);
        try (KafkaShareConsumer<byte[], byte[]> b = consumer(group, true, 500)) {
            String topic = primedTopic("share-close", a, true);
            produce(topic, List.of("x"));
            List<ConsumerRecord<byte[], byte[]>> held = pollRecords(a, WAIT);
            assertEquals(List.of("x"), held.stream().map(ShareGroupsTest::value).toList());
            b.subscribe(List.of(topic));
            a.close();
            long closedAt = System.nanoTime();
            List<ConsumerRecord<byte[], byte[]>> got = pollRecords(b, WAIT);
            long waitedMs = (System.nanoTime() - closedAt) / 1_000_000;
            assertEquals(List.of("x"), got.stream().map(ShareGroupsTest::value).toList());
            assertEquals(2, deliveries(got.get(0)));
            assertTrue(waitedMs < LOCK_MS, "released at close, not at the lock timeout: " + waitedMs + " ms");
            b.acknowledge(got.get(0), AcknowledgeType.ACCEPT);
            b.commitSync();
        } finally {
            a.close(Duration.ZERO);
        }
    }

    /**
     * {@code AcknowledgeType.RENEW} (KIP-1222, ShareFetch/ShareAcknowledge v2): a renewed record stays
     * acquired by its member under a new lock, so another member does not get it when the first lock
     * would have run out, and it comes back from the member's next poll to be accepted.
     */
    @Test
    void renewKeepsARecordAcquiredPastItsFirstLock() throws Exception {
        String group = "renew";
        int lockMs = 4000;
        setGroupConfigs(group, Map.of("share.record.lock.duration.ms", Integer.toString(lockMs)));
        try (KafkaShareConsumer<byte[], byte[]> a = consumer(group, true, 500);
             KafkaShareConsumer<byte[], byte[]> b = consumer(group, true, 500)) {
            String topic = primedTopic("share-renew", a, true);
            produce(topic, List.of("held"));
            List<ConsumerRecord<byte[], byte[]>> held = pollRecords(a, WAIT);
            long acquiredAt = System.nanoTime();
            assertEquals(List.of("held"), held.stream().map(ShareGroupsTest::value).toList());
            Thread.sleep(lockMs / 2);
            a.acknowledge(held.get(0), AcknowledgeType.RENEW);
            ConsumerRecord<byte[], byte[]> renewed = null;
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (renewed == null && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : a.poll(Duration.ofMillis(100))) {
                    if (r.offset() == held.get(0).offset()) renewed = r;
                }
            }
            assertTrue(renewed != null, "the renewed record came back from the member's poll");
            assertEquals(1, deliveries(renewed), "a renewal is not a redelivery");
            // Past the first lock (and before the renewed one ends), the other member gets nothing.
            b.subscribe(List.of(topic));
            long firstLockEnd = acquiredAt + (lockMs + lockMs / 4) * 1_000_000L;
            List<ConsumerRecord<byte[], byte[]>> stolen = pollRecords(b, Duration.ofNanos(Math.max(0, firstLockEnd - System.nanoTime())));
            assertEquals(List.of(), stolen.stream().map(ShareGroupsTest::value).toList(), "handed on despite the renewal");
            a.acknowledge(renewed, AcknowledgeType.ACCEPT);
            a.commitSync().forEach((tp, error) -> assertEquals(Optional.empty(), error, "accepting " + tp));
        }
    }

    /** Sets a group's configs and waits until DescribeConfigs shows them (they travel by the metadata log). */
    static void setGroupConfigs(String group, Map<String, String> configs) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, group);
        List<AlterConfigOp> ops = configs.entrySet().stream()
            .map(e -> new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET))
            .toList();
        try (Admin admin = Clients.admin(bootstrap)) {
            admin.incrementalAlterConfigs(Map.of(r, ops)).all().get();
            GroupSupport.await("group configs of " + group, WAIT, () -> {
                try {
                    var c = admin.describeConfigs(List.of(r)).all().get().get(r);
                    return configs.entrySet().stream().allMatch(e -> e.getValue().equals(c.get(e.getKey()).value()));
                } catch (Exception e) {
                    return false;
                }
            }, () -> configs.toString());
        }
    }

    /** Polls (bounded) until {@code n} records arrived, acknowledging them (implicit mode). */
    static List<String> pollValues(KafkaShareConsumer<byte[], byte[]> c, int n) {
        List<String> got = new ArrayList<>();
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (got.size() < n && System.nanoTime() < deadline) {
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) got.add(value(r));
        }
        return got;
    }

    @Test
    void groupsAutoOffsetResetPlacesANewSharePartitionOnly() throws Exception {
        String topic = Clients.uniqueTopic("share-reset");
        Clients.createTopic(bootstrap, topic, 1);
        produce(topic, values("old", 3));
        for (String reset : List.of("earliest", "by_duration:PT1H")) {
            String group = "reset-" + reset.replace(':', '-');
            setGroupConfigs(group, Map.of("share.auto.offset.reset", reset));
            try (KafkaShareConsumer<byte[], byte[]> c = consumer(group, false, 500)) {
                c.subscribe(List.of(topic));
                assertEquals(values("old", 3), pollValues(c, 3), reset + " starts before the records");
            }
        }
        // Read when a share-partition is initialized: set later, it does not move one already started.
        try (KafkaShareConsumer<byte[], byte[]> c = consumer("reset-late", false, 500)) {
            String later = primedTopic("share-reset-late", c, false);
            produce(later, values("before", 2));
            assertEquals(values("before", 2), pollValues(c, 2));
            setGroupConfigs("reset-late", Map.of("share.auto.offset.reset", "earliest"));
            produce(later, List.of("after"));
            assertEquals(List.of("after"), pollValues(c, 1), "the share-partition kept its place");
        }
    }

    @Test
    void readCommittedGroupSkipsAbortedRecordsAndStopsAtTheOpenTransaction() throws Exception {
        String topic = Clients.uniqueTopic("share-txn");
        Clients.createTopic(bootstrap, topic, 1);
        String group = "read-committed";
        setGroupConfigs(group, Map.of("share.isolation.level", "read_committed", "share.auto.offset.reset", "earliest"));
        try (KafkaProducer<byte[], byte[]> p = TxnSupport.producer(bootstrap, "share-txn", Map.of());
             KafkaShareConsumer<byte[], byte[]> c = consumer(group, false, 500)) {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, "aborted".getBytes(UTF_8))).get();
            p.abortTransaction();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, "committed".getBytes(UTF_8))).get();
            p.commitTransaction();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, "open".getBytes(UTF_8))).get();
            c.subscribe(List.of(topic));
            // The open transaction's record is below the high watermark but past the last stable offset.
            assertEquals(List.of("committed"), pollValues(c, 1));
            List<String> more = new ArrayList<>();
            for (int i = 0; i < 5; i++) for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) more.add(value(r));
            assertEquals(List.of(), more, "nothing of the open transaction before its commit");
            p.commitTransaction();
            assertEquals(List.of("open"), pollValues(c, 1));
        }
    }

    @Test
    void groupsLockDurationAndDeliveryLimitOverrideTheBrokers() throws Exception {
        String group = "group-limits";
        setGroupConfigs(group, Map.of("share.record.lock.duration.ms", "2000", "share.delivery.count.limit", "2"));
        try (KafkaShareConsumer<byte[], byte[]> c = consumer(group, true, 500)) {
            String topic = primedTopic("share-group-limits", c, true);
            assertEquals(java.util.Optional.of(2000), c.acquisitionLockTimeoutMs(), "the group's lock duration");
            produce(topic, List.of("poison"));
            for (int i = 1; i <= 2; i++) {
                List<ConsumerRecord<byte[], byte[]>> got = pollRecords(c, WAIT);
                assertEquals(List.of("poison"), got.stream().map(ShareGroupsTest::value).toList());
                assertEquals(i, deliveries(got.get(0)));
                c.acknowledge(got.get(0), AcknowledgeType.RELEASE);
                c.commitSync();
            }
            produce(topic, List.of("after"));
            List<ConsumerRecord<byte[], byte[]>> next = pollRecords(c, WAIT);
            assertEquals(List.of("after"), next.stream().map(ShareGroupsTest::value).toList(),
                "archived at the group's limit of 2, not the broker's " + DELIVERY_LIMIT);
            c.acknowledge(next.get(0), AcknowledgeType.ACCEPT);
            c.commitSync();
        }
    }

    /** The group's share-partition offsets as {@code Admin.listShareGroupOffsets} lists them (all partitions). */
    static Map<TopicPartition, SharePartitionOffsetInfo> shareOffsets(Admin admin, String group) throws Exception {
        return admin.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group).get();
    }

    static long startOffset(Admin admin, String group, TopicPartition tp) throws Exception {
        SharePartitionOffsetInfo info = shareOffsets(admin, group).get(tp);
        return info == null ? -1 : info.startOffset();
    }

    /**
     * Kafka 4.4's group coordinator initializes a share group's share-partitions at the heartbeat
     * (GroupMetadataManager.maybeCreateInitializeShareGroupStateRequest: InitializeShareGroupState at
     * start offset -1 and the group epoch) and assigns them only once initialized. So as soon as the
     * member holds its assignment, with no record fetched yet, DescribeShareGroupOffsets lists every
     * partition, at no start offset ("-" in kafka-share-groups), and still so after empty fetches:
     * the partition leader writes the start only with the first acknowledgement.
     */
    @Test
    void assignedSharePartitionsAreListedBeforeAnyRecordIsFetched() throws Exception {
        String topic = Clients.uniqueTopic("share-init");
        Clients.createTopic(bootstrap, topic, 2);
        String group = "init-at-heartbeat";
        try (Admin admin = Clients.admin(bootstrap);
             KafkaShareConsumer<byte[], byte[]> c = consumer(group, false, 500)) {
            c.subscribe(List.of(topic));
            GroupSupport.await("both partitions assigned", WAIT, () -> {
                assertTrue(c.poll(Duration.ofMillis(100)).isEmpty(), "the topic is empty");
                try {
                    return admin.describeShareGroups(List.of(group)).all().get().get(group).members().stream()
                        .mapToInt(m -> m.assignment().topicPartitions().size()).sum() == 2;
                } catch (Exception e) {
                    return false;
                }
            }, () -> "not assigned");
            Map<TopicPartition, SharePartitionOffsetInfo> listed = shareOffsets(admin, group);
            Map<TopicPartition, SharePartitionOffsetInfo> expected = new HashMap<>();
            expected.put(new TopicPartition(topic, 0), null);
            expected.put(new TopicPartition(topic, 1), null);
            assertEquals(expected, listed, "initialized, no start offset yet");
            for (int i = 0; i < 3; i++) assertTrue(c.poll(Duration.ofMillis(200)).isEmpty());
            String described = KafkaTool.tool("consumer.group.ShareGroupCommand", bootstrap, "--describe", "--offsets",
                "--group", group).out();
            for (int p = 0; p < 2; p++) {
                assertTrue(described.matches("(?s).*" + group + "\\s+" + topic + "\\s+" + p + "\\s+-\\s+-.*"), described);
            }
        }
    }

    /**
     * The share group offsets admin APIs (DescribeShareGroupOffsets, AlterShareGroupOffsets,
     * DeleteShareGroupOffsets) through Admin and {@code kafka-share-groups.sh}: an altered start offset
     * is where the next member starts, offsets are altered only in an empty group, deleted offsets and
     * a deleted group start again at the group's {@code share.auto.offset.reset}.
     */
    @Test
    void shareGroupOffsetsAreListedResetAndDeletedWithTheirGroup() throws Exception {
        String topic = Clients.uniqueTopic("share-offsets");
        Clients.createTopic(bootstrap, topic, 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        produce(topic, values("v", 5));
        String group = "offsets-admin";
        setGroupConfigs(group, Map.of("share.auto.offset.reset", "earliest"));
        try (Admin admin = Clients.admin(bootstrap)) {
            try (KafkaShareConsumer<byte[], byte[]> c = consumer(group, false, 500)) {
                c.subscribe(List.of(topic));
                assertEquals(values("v", 5), pollValues(c, 5));
                c.commitSync();
                ExecutionException e = assertThrows(ExecutionException.class,
                    () -> admin.alterShareGroupOffsets(group, Map.of(tp, 0L)).all().get());
                assertInstanceOf(GroupNotEmptyException.class, e.getCause(), "altered while a member is in the group");
            }
            // Every record acknowledged, as the stored state says it: Kafka 4.4 persists the
            // acknowledged batch before moving the start offset (SharePartition writes, then
            // maybeUpdateCachedStateAndOffsets), so its summary shows start 0 with the 5 records
            // delivered: DescribeShareGroupOffsets v1's lag 5 - 0 - 5 = 0.
            GroupSupport.await("every record acknowledged", WAIT, () -> {
                try {
                    SharePartitionOffsetInfo info = shareOffsets(admin, group).get(tp);
                    return info != null && info.startOffset() == 0 && info.lag().equals(Optional.of(0L));
                } catch (Exception e) {
                    return false;
                }
            }, () -> {
                try {
                    return "offsets " + shareOffsets(admin, group);
                } catch (Exception e) {
                    return "offsets not listed: " + e;
                }
            });
            KafkaTool.tool("consumer.group.ShareGroupCommand", bootstrap, "--reset-offsets", "--group", group,
                "--topic", topic, "--to-offset", "2", "--execute");
            assertEquals(2, startOffset(admin, group, tp));
            assertEquals(Optional.of(3L), shareOffsets(admin, group).get(tp).lag(), "a reset start has delivered nothing past it");
            String described = KafkaTool.tool("consumer.group.ShareGroupCommand", bootstrap, "--describe", "--offsets",
                "--group", group).out();
            assertTrue(described.matches("(?s).*" + group + "\\s+" + topic + "\\s+0\\s+2\\s.*"), described);
            try (KafkaShareConsumer<byte[], byte[]> c = consumer(group, false, 500)) {
                c.subscribe(List.of(topic));
                assertEquals(List.of("v2", "v3", "v4"), pollValues(c, 3), "from the reset offset");
                c.commitSync();
            }
            admin.deleteShareGroupOffsets(group, Set.of(topic)).all().get();
            assertFalse(shareOffsets(admin, group).containsKey(tp), "deleted offsets are not listed");
            try (KafkaShareConsumer<byte[], byte[]> c = consumer(group, false, 500)) {
                c.subscribe(List.of(topic));
                assertEquals(values("v", 5), pollValues(c, 5), "from share.auto.offset.reset after the delete");
                // Acknowledged: only a deleted state hands them out again.
                c.commitSync();
            }
            admin.deleteShareGroups(List.of(group)).all().get();
            try (KafkaShareConsumer<byte[], byte[]> c = consumer(group, false, 500)) {
                c.subscribe(List.of(topic));
                assertEquals(values("v", 5), pollValues(c, 5), "a re-created group starts at share.auto.offset.reset");
            }
        }
    }
}

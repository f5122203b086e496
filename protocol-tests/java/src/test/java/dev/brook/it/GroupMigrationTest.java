package dev.brook.it;

import static dev.brook.it.GroupSupport.await;
import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Online migration of a live group (Kafka's group.consumer.migration.policy=bidirectional): a classic group of two keeps
 * consuming while its members are replaced one by one by group.protocol=consumer members (the first one upgrades the group),
 * then back by classic members (the last consumer member leaving downgrades it). Every record is delivered, and a record is
 * delivered twice only if a commit covering it failed. The admin client reports the group's type at each step.
 */
@ExtendWith(BrokerLogOnFailure.class)
class GroupMigrationTest {
    static final int PARTITIONS = 4;
    static final int PER_STEP = 40;
    static final Duration WAIT = Duration.ofSeconds(60);
    static BrookBroker broker;
    static String bootstrap;

    @BeforeAll
    static void start() {
        assumeFalse(TestBrokers.isExternal(), "starts its own broker with fast-rebalance settings");
        broker = GroupSupport.startBroker("migration");
        bootstrap = broker.bootstrap();
    }

    @AfterAll
    static void stop() {
        if (broker != null) broker.close();
    }

    static Map<String, Object> classic() {
        return Map.of(
            ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic",
            ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300",
            ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
    }

    static Map<String, Object> consumer() {
        return Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
    }

    /** What every member saw: deliveries by (partition, offset), and how many deliveries a failed commit left uncommitted. */
    static final class Seen {
        final Map<String, AtomicInteger> deliveries = new ConcurrentHashMap<>();
        final AtomicInteger uncommitted = new AtomicInteger();

        int distinct() {
            return deliveries.size();
        }

        int duplicates() {
            return deliveries.values().stream().mapToInt(n -> n.get() - 1).sum();
        }
    }

    /** A member that commits synchronously after every poll that returned records, and on revocation. */
    static final class Member implements AutoCloseable {
        final String name;
        private final Thread thread;
        private volatile boolean stop;
        private volatile Throwable error;
        private volatile KafkaConsumer<byte[], byte[]> consumer;
        private volatile Set<TopicPartition> assignment = Set.of();

        Member(String name, String group, String topic, Map<String, Object> props, Seen seen) {
            this.name = name;
            this.thread = new Thread(() -> run(group, topic, props, seen), "member-" + name);
            thread.setDaemon(true);
            thread.start();
        }

        private void run(String group, String topic, Map<String, Object> props, Seen seen) {
            try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group, props)) {
                consumer = c;
                c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                        try {
                            c.commitSync();
                        } catch (KafkaException e) {
                            // The last poll's commit already covers what was delivered.
                        }
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {}
                });
                while (!stop) {
                    ConsumerRecords<byte[], byte[]> records;
                    try {
                        records = c.poll(Duration.ofMillis(100));
                    } catch (WakeupException e) {
                        break;
                    }
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        seen.deliveries.computeIfAbsent(r.partition() + "@" + r.offset(), k -> new AtomicInteger())
                            .incrementAndGet();
                    }
                    if (!records.isEmpty()) {
                        try {
                            c.commitSync();
                        } catch (KafkaException e) {
                            // A rebalance took the partitions first: these may be delivered again.
                            seen.uncommitted.addAndGet(records.count());
                        }
                    }
                    assignment = Set.copyOf(c.assignment());
                }
            } catch (Throwable t) {
                error = t;
            }
        }

        Set<TopicPartition> assignment() {
            if (error != null) throw new AssertionError("member " + name + " failed", error);
            return assignment;
        }

        @Override
        public void close() {
            stop = true;
            KafkaConsumer<byte[], byte[]> c = consumer;
            if (c != null) c.wakeup();
            try {
                thread.join(Clients.WAIT.toMillis());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (thread.isAlive()) throw new AssertionError("member " + name + " did not close in time");
            if (error != null) throw new AssertionError("member " + name + " failed", error);
        }

        @Override
        public String toString() {
            return name + assignment;
        }
    }

    static boolean covers(List<Member> members) {
        Set<TopicPartition> seen = new HashSet<>();
        int total = 0;
        for (Member m : members) {
            total += m.assignment().size();
            seen.addAll(m.assignment());
            if (m.assignment().isEmpty()) return false;
        }
        return total == PARTITIONS && seen.size() == PARTITIONS;
    }

    static GroupType type(Admin admin, String group) throws Exception {
        ConsumerGroupDescription d =
            admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get(30, TimeUnit.SECONDS);
        return d.type();
    }

    /** Waits until {@code members} split the partitions and the group has {@code type}; then produces a step's records and waits for them. */
    static void step(String what, Admin admin, KafkaProducer<byte[], byte[]> producer, String topic, String group,
                     List<Member> members, GroupType type, Seen seen, int[] produced) throws Exception {
        await(what + ": the members split the partitions", WAIT, () -> covers(members), members::toString);
        await(what + ": the group is " + type, WAIT, () -> {
            try {
                return type(admin, group) == type;
            } catch (Exception e) {
                return false;
            }
        }, () -> {
            try {
                return "type " + type(admin, group);
            } catch (Exception e) {
                return e.toString();
            }
        });
        for (int i = 0; i < PER_STEP; i++) {
            producer.send(new ProducerRecord<>(topic, i % PARTITIONS, null, (what + i).getBytes(UTF_8)));
        }
        producer.flush();
        produced[0] += PER_STEP;
        await(what + ": every record consumed", WAIT, () -> seen.distinct() == produced[0],
            () -> seen.distinct() + " of " + produced[0] + " delivered; " + members);
    }

    @Test
    void aLiveGroupMovesToTheConsumerProtocolAndBack() throws Exception {
        String topic = Clients.uniqueTopic("migrate");
        String group = topic + "-g";
        Clients.createTopic(bootstrap, topic, PARTITIONS);
        Seen seen = new Seen();
        int[] produced = {0};
        List<Member> open = new ArrayList<>();
        try (Admin admin = Clients.admin(bootstrap); KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap)) {
            Member m1 = new Member("classic-1", group, topic, classic(), seen);
            Member m2 = new Member("classic-2", group, topic, classic(), seen);
            open.addAll(List.of(m1, m2));
            step("classic group", admin, producer, topic, group, List.of(m1, m2), GroupType.CLASSIC, seen, produced);

            // Upgrade: a consumer-protocol member joins the classic group; then the classic ones leave one by one.
            Member c1 = new Member("consumer-1", group, topic, consumer(), seen);
            open.add(c1);
            step("upgraded", admin, producer, topic, group, List.of(m1, m2, c1), GroupType.CONSUMER, seen, produced);
            m1.close();
            open.remove(m1);
            step("classic-1 replaced", admin, producer, topic, group, List.of(m2, c1), GroupType.CONSUMER, seen, produced);
            Member c2 = new Member("consumer-2", group, topic, consumer(), seen);
            open.add(c2);
            m2.close();
            open.remove(m2);
            step("classic-2 replaced", admin, producer, topic, group, List.of(c1, c2), GroupType.CONSUMER, seen, produced);

            // Downgrade: classic members come back; the last consumer-protocol member's leave converts the group.
            Member m3 = new Member("classic-3", group, topic, classic(), seen);
            open.add(m3);
            c1.close();
            open.remove(c1);
            step("consumer-1 replaced", admin, producer, topic, group, List.of(c2, m3), GroupType.CONSUMER, seen, produced);
            Member m4 = new Member("classic-4", group, topic, classic(), seen);
            open.add(m4);
            step("classic-4 joined", admin, producer, topic, group, List.of(c2, m3, m4), GroupType.CONSUMER, seen, produced);
            c2.close();
            open.remove(c2);
            step("downgraded", admin, producer, topic, group, List.of(m3, m4), GroupType.CLASSIC, seen, produced);
        } finally {
            for (Member m : open) m.close();
        }
        assertEquals(produced[0], seen.distinct(), "every record delivered");
        assertTrue(seen.duplicates() <= seen.uncommitted.get(),
            seen.duplicates() + " duplicate deliveries, but only " + seen.uncommitted.get() + " records left uncommitted");
    }
}

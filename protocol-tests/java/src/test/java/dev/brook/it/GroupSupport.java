package dev.brook.it;

import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/** Helpers for the consumer group tests: a broker tuned for fast rebalances, group consumers, bounded waits. */
final class GroupSupport {
    /** A {@link Member} topic starting with this subscribes to the rest as a KIP-848 regular expression. */
    static final String REGEX_PREFIX = "regex:";

    private GroupSupport() {}

    /**
     * Broker settings for group tests: no initial rebalance delay, few offsets partitions, fast KIP-848 heartbeats (with
     * their lower bound lowered too: Kafka and Brook refuse an interval below group.consumer.min.heartbeat.interval.ms).
     */
    static Map<String, String> brokerProps() {
        return Map.of(
            "group.initial.rebalance.delay.ms", "0",
            "offsets.topic.num.partitions", "5",
            "group.consumer.heartbeat.interval.ms", "500",
            "group.consumer.min.heartbeat.interval.ms", "500");
    }

    static BrookBroker startBroker(String name) {
        return BrookBroker.start(name, brokerProps());
    }

    /** A consumer in {@code group}, manual commits, reading from the earliest offset. */
    static KafkaConsumer<byte[], byte[]> groupConsumer(String bootstrap, String group, Map<String, Object> extra) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    /** Waits (bounded) until {@code cond} holds; the message supplier describes the state on failure. */
    static void await(String what, Duration timeout, BooleanSupplier cond, Supplier<String> state) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) fail("timed out after " + timeout + " waiting for " + what + "; " + state.get());
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                fail("interrupted waiting for " + what);
            }
        }
    }

    /**
     * A group member polling on its own thread (a KafkaConsumer is single-threaded). It records its assignment and
     * counts partitions passed to onPartitionsRevoked, so a test can watch rebalances from outside.
     */
    static final class Member implements AutoCloseable {
        final String name;
        final AtomicInteger revoked = new AtomicInteger();
        final AtomicInteger lost = new AtomicInteger();
        final AtomicInteger records = new AtomicInteger();
        private volatile Set<TopicPartition> assignment = Set.of();
        private volatile boolean stop;
        private volatile Throwable error;
        private volatile KafkaConsumer<byte[], byte[]> consumer;
        private final Thread thread;

        Member(String name, String bootstrap, String group, String topic, Map<String, Object> extra) {
            this.name = name;
            this.thread = new Thread(() -> run(bootstrap, group, topic, extra), "member-" + name);
            thread.setDaemon(true);
            thread.start();
        }

        private void run(String bootstrap, String group, String topic, Map<String, Object> extra) {
            try (KafkaConsumer<byte[], byte[]> c = groupConsumer(bootstrap, group, extra)) {
                consumer = c;
                ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                        revoked.addAndGet(parts.size());
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {}

                    @Override
                    public void onPartitionsLost(Collection<TopicPartition> parts) {
                        lost.addAndGet(parts.size());
                    }
                };
                if (topic.startsWith(REGEX_PREFIX)) {
                    // A broker-side (KIP-848) regular expression subscription.
                    c.subscribe(new SubscriptionPattern(topic.substring(REGEX_PREFIX.length())), listener);
                } else {
                    c.subscribe(List.of(topic), listener);
                }
                while (!stop) {
                    try {
                        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) records.incrementAndGet();
                    } catch (WakeupException e) {
                        // close() wakes the poll up
                    }
                    assignment = Set.copyOf(c.assignment());
                }
            } catch (Throwable t) {
                error = t;
            }
        }

        Set<TopicPartition> assignment() {
            Throwable t = error;
            if (t != null) throw new AssertionError("member " + name + " failed", t);
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
            if (thread.isAlive()) fail("member " + name + " did not close in time");
            if (error != null) throw new AssertionError("member " + name + " failed", error);
        }

        @Override
        public String toString() {
            return name + assignment;
        }
    }

    /** True when the members' assignments are disjoint and together cover partitions 0..n-1 of the topic. */
    static boolean coversExactly(List<Member> members, String topic, int n) {
        Set<TopicPartition> seen = new HashSet<>();
        int total = 0;
        for (Member m : members) {
            Set<TopicPartition> a = m.assignment();
            total += a.size();
            seen.addAll(a);
        }
        if (total != n || seen.size() != n) return false;
        for (int p = 0; p < n; p++) if (!seen.contains(new TopicPartition(topic, p))) return false;
        return true;
    }

    static String describe(List<Member> members) {
        List<String> out = new ArrayList<>();
        for (Member m : members) out.add(m.name + "=" + m.assignment + " revoked=" + m.revoked.get());
        return String.join(", ", out);
    }
}

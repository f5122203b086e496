package dev.brook.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** Client factories and bounded wait helpers. Clients use default settings plus whatever a test passes. */
public final class Clients {
    /** The default bound for any wait in the suite. */
    public static final Duration WAIT = Duration.ofSeconds(30);

    private Clients() {}

    public static String uniqueTopic(String prefix) {
        return prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    /**
     * A KafkaProducer whose close() waits at most 10 s: the default close() waits for every pending record, which
     * with the default delivery.timeout.ms (120 s) would let a failing test hang for minutes.
     */
    public static final class BoundedProducer extends KafkaProducer<byte[], byte[]> {
        BoundedProducer(Properties p) {
            super(p);
        }

        @Override
        public void close() {
            close(Duration.ofSeconds(10));
        }
    }

    public static KafkaProducer<byte[], byte[]> producer(String bootstrap, Map<String, Object> overrides) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.putAll(overrides);
        return new BoundedProducer(p);
    }

    /** producer.flush(), failing the test if it has not returned within {@code timeout}. */
    public static void flush(Producer<?, ?> producer, Duration timeout) throws InterruptedException {
        CompletableFuture<Void> done = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                producer.flush();
                done.complete(null);
            } catch (Throwable e) {
                done.completeExceptionally(e);
            }
        }, "bounded-flush");
        t.setDaemon(true);
        t.start();
        try {
            done.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            fail("producer.flush() did not return within " + timeout);
        } catch (ExecutionException e) {
            fail("producer.flush() failed", e.getCause());
        }
    }

    public static KafkaProducer<byte[], byte[]> producer(String bootstrap) {
        return producer(bootstrap, Map.of());
    }

    /** A consumer without group.id: the tests use assign + seek only. */
    public static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, Map<String, Object> overrides) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.putAll(overrides);
        return new KafkaConsumer<>(p);
    }

    public static KafkaConsumer<byte[], byte[]> consumer(String bootstrap) {
        return consumer(bootstrap, Map.of());
    }

    public static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(p);
    }

    /** Creates a topic with replication factor 1 (a single broker), waiting for the result (bounded). */
    public static void createTopic(Admin admin, String topic, int partitions, Map<String, String> configs)
        throws Exception {
        NewTopic nt = new NewTopic(topic, partitions, (short) 1).configs(configs);
        admin.createTopics(List.of(nt)).all().get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** Creates a topic (replication factor 1) and waits (bounded) until every partition's leader serves it. */
    public static void createTopic(String bootstrap, String topic, int partitions) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            createTopic(admin, topic, partitions, Map.of());
        }
        awaitPartitionsServed(bootstrap, topic, partitions);
    }

    /**
     * Waits until the leader of each partition answers ListOffsets (the consumer retries NOT_LEADER_OR_FOLLOWER
     * and UNKNOWN_TOPIC_OR_PARTITION within the timeout). Kafka's brokers take over a new partition shortly after
     * CreateTopics returns; an idempotent producer that writes at once can see its first batch refused while
     * later ones are taken, and then retry sequence 0 into OUT_OF_ORDER_SEQUENCE_NUMBER until it times out.
     */
    public static void awaitPartitionsServed(String bootstrap, String topic, int partitions) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap)) {
            c.endOffsets(tps, WAIT);
        }
    }

    /**
     * Polls until exactly {@code expected} records have arrived (fails on timeout, and on more records than
     * expected), then checks that the consumer's positions are at the end of the assigned partitions.
     */
    public static List<ConsumerRecord<byte[], byte[]>> pollExactly(KafkaConsumer<byte[], byte[]> consumer,
                                                                   int expected, Duration timeout) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>(expected);
        long deadline = System.nanoTime() + timeout.toNanos();
        while (out.size() < expected) {
            if (System.nanoTime() > deadline) {
                fail("timed out after " + timeout + " with " + out.size() + " of " + expected + " records; positions "
                    + positions(consumer));
            }
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) out.add(r);
        }
        if (out.size() > expected) {
            fail("expected " + expected + " records, got " + out.size());
        }
        Map<TopicPartition, Long> ends = consumer.endOffsets(consumer.assignment(), WAIT);
        assertEquals(ends, positions(consumer), "after reading every record, positions should equal end offsets");
        return out;
    }

    /** Polls until at least {@code expected} records arrived (bounded), returning all of them. */
    public static List<ConsumerRecord<byte[], byte[]>> pollAtLeast(KafkaConsumer<byte[], byte[]> consumer,
                                                                   int expected, Duration timeout) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>(expected);
        long deadline = System.nanoTime() + timeout.toNanos();
        while (out.size() < expected) {
            if (System.nanoTime() > deadline) {
                fail("timed out after " + timeout + " with " + out.size() + " of at least " + expected
                    + " records; positions " + positions(consumer));
            }
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) out.add(r);
        }
        return out;
    }

    /** Reads each assigned partition from its current position up to the end offsets taken now (bounded). */
    public static List<ConsumerRecord<byte[], byte[]>> readToEnd(KafkaConsumer<byte[], byte[]> consumer,
                                                                 Duration timeout) {
        Map<TopicPartition, Long> ends = consumer.endOffsets(consumer.assignment(), timeout);
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!reached(consumer, ends)) {
            if (System.nanoTime() > deadline) {
                fail("timed out after " + timeout + " reading to end offsets " + ends + "; positions "
                    + positions(consumer) + "; read " + out.size());
            }
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) out.add(r);
        }
        return out;
    }

    private static boolean reached(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> ends) {
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            if (consumer.position(e.getKey(), WAIT) < e.getValue()) return false;
        }
        return true;
    }

    public static Map<TopicPartition, Long> positions(KafkaConsumer<byte[], byte[]> consumer) {
        Map<TopicPartition, Long> m = new HashMap<>();
        Collection<TopicPartition> assigned = consumer.assignment();
        for (TopicPartition tp : assigned) m.put(tp, consumer.position(tp, WAIT));
        return m;
    }
}

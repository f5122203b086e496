package com.example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import dev.brook.junit.Brook;
import dev.brook.junit.BrookCluster;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

/** One 3-node cluster for the class; each test uses its own topic. */
@BrookCluster(nodes = 3, config = {"min.insync.replicas=2", "replica.lag.time.max.ms=3000",
    "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500", "group.initial.rebalance.delay.ms=0"})
class OrdersTest {
    static final Duration WAIT = Duration.ofSeconds(30);

    static Brook brook;

    void createTopic(String topic, int partitions) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", brook.bootstrapServers()))) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 3))).all().get();
        }
        for (int p = 0; p < partitions; p++) brook.awaitIsrSize(topic, p, 3, WAIT);
    }

    KafkaProducer<String, String> producer(Map<String, Object> extra) {
        Properties p = new Properties();
        p.put("bootstrap.servers", brook.bootstrapServers());
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.putAll(extra);
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    KafkaConsumer<String, String> consumer(String group, String isolation) {
        Properties p = new Properties();
        p.put("bootstrap.servers", brook.bootstrapServers());
        p.put("group.id", group);
        p.put("auto.offset.reset", "earliest");
        p.put("isolation.level", isolation);
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    /** Polls until {@code n} records came (bounded by WAIT). */
    List<String> consume(KafkaConsumer<String, String> c, int n) {
        List<String> values = new ArrayList<>();
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (values.size() < n && System.nanoTime() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) values.add(r.value());
        }
        return values;
    }

    @Test
    void produceAndConsumeInAGroup() throws Exception {
        createTopic("orders", 3);
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            for (int i = 0; i < 30; i++) p.send(new ProducerRecord<>("orders", "k" + i, "order-" + i)).get();
        }
        try (KafkaConsumer<String, String> c = consumer("billing", "read_uncommitted")) {
            c.subscribe(List.of("orders"));
            assertEquals(30, consume(c, 30).size());
            brook.awaitStableGroup("billing", WAIT);
            c.commitSync();
        }
    }

    @Test
    void transactionCommitsAndAbortsAsAUnit() throws Exception {
        createTopic("ledger", 1);
        try (KafkaProducer<String, String> p = producer(Map.of("transactional.id", "ledger-writer"))) {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>("ledger", "aborted"));
            p.abortTransaction();
            p.beginTransaction();
            p.send(new ProducerRecord<>("ledger", "committed-1"));
            p.send(new ProducerRecord<>("ledger", "committed-2"));
            p.commitTransaction();
        }
        try (KafkaConsumer<String, String> c = consumer("auditors", "read_committed")) {
            c.subscribe(List.of("ledger"));
            assertEquals(List.of("committed-1", "committed-2"), consume(c, 2));
        }
    }

    @Test
    void leaderKillLosesNoAcknowledgedRecord() throws Exception {
        createTopic("payments", 1);
        int oldLeader = brook.leader("payments", 0);
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<String, String> p = producer(Map.of("delivery.timeout.ms", "60000"))) {
            for (int i = 0; i < 200; i++) {
                // The kill comes while the first hundred are still in flight.
                if (i == 100) brook.kill(oldLeader);
                acks.add(p.send(new ProducerRecord<>("payments", "payment-" + i)));
            }
            for (Future<RecordMetadata> a : acks) a.get();
        }
        assertNotEquals(oldLeader, brook.awaitLeader("payments", 0, WAIT));
        brook.awaitHighWatermark("payments", 0, 200, WAIT);
        try (KafkaConsumer<String, String> c = consumer("payments-check", "read_uncommitted")) {
            c.subscribe(List.of("payments"));
            List<String> got = consume(c, 200);
            List<String> want = new ArrayList<>();
            for (int i = 0; i < 200; i++) want.add("payment-" + i);
            assertEquals(want, got, "every acknowledged record once, in order");
        } finally {
            brook.start(oldLeader);
        }
        brook.awaitIsrSize("payments", 0, 3, WAIT);
    }

    @Test
    void faultRuleIsRetriedThrough() throws Exception {
        createTopic("audit", 1);
        int leader = brook.leader("audit", 0);
        // NOT_ENOUGH_REPLICAS (19) once: a retriable error the producer retries.
        long rule = brook.addFault(leader,
            "{\"action\":\"error\",\"api\":\"produce\",\"topic\":\"audit\",\"error_code\":19,\"times\":1}");
        try (KafkaProducer<String, String> p = producer(Map.of())) {
            assertEquals(0, p.send(new ProducerRecord<>("audit", "entry")).get().offset());
        }
        assertEquals(1L, ((Number) brook.faults(leader).get(0).get("fired")).longValue());
        brook.removeFault(leader, rule);
    }
}

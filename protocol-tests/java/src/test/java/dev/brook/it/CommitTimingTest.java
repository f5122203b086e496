package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** When offsets are committed decides what is re-delivered or skipped: at-least-once, at-most-once, DLQ, restarts. */
@ExtendWith(BrokerLogOnFailure.class)
class CommitTimingTest {
    static final Map<String, Object> FIVE_PER_POLL = Map.of(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5");

    static void produce(String bootstrap, String topic, int n) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of(ProducerConfig.LINGER_MS_CONFIG, "50"))) {
            for (int i = 0; i < n; i++) p.send(new ProducerRecord<>(topic, 0, null, ("v" + i).getBytes(UTF_8)));
            p.flush();
        }
    }

    /** Polls until a non-empty batch arrives (bounded). */
    static ConsumerRecords<byte[], byte[]> pollSome(KafkaConsumer<byte[], byte[]> c) {
        long deadline = System.nanoTime() + Clients.WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
            if (!rs.isEmpty()) return rs;
        }
        throw new AssertionError("no records within " + Clients.WAIT);
    }

    static BrookBroker start(String name) {
        assumeFalse(TestBrokers.isExternal(), "commit timing tests start their own broker");
        return GroupSupport.startBroker(name);
    }

    @Test
    void uncommittedRecordsAreRedeliveredAfterACrashNoneSkipped() throws Exception {
        try (BrookBroker broker = start("redeliver")) {
            String bootstrap = broker.bootstrap();
            String topic = Clients.uniqueTopic("redeliver");
            String group = topic + "-g";
            Clients.createTopic(bootstrap, topic, 1);
            produce(bootstrap, topic, 10);
            TopicPartition tp = new TopicPartition(topic, 0);
            List<Long> processed = new ArrayList<>();
            try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group, FIVE_PER_POLL)) {
                c.subscribe(List.of(topic));
                // First batch: process everything, then commit (at-least-once).
                List<ConsumerRecord<byte[], byte[]>> first = Clients.pollAtLeast(c, 5, Clients.WAIT);
                for (ConsumerRecord<byte[], byte[]> r : first) processed.add(r.offset());
                long next = first.get(first.size() - 1).offset() + 1;
                c.commitSync(Map.of(tp, new OffsetAndMetadata(next)), Clients.WAIT);
                // Second batch: process two records, then "crash" (close without committing).
                ConsumerRecords<byte[], byte[]> second = pollSome(c);
                int n = 0;
                for (ConsumerRecord<byte[], byte[]> r : second) {
                    if (n++ == 2) break;
                    processed.add(r.offset());
                }
            }
            long committed;
            try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group, Map.of())) {
                c.subscribe(List.of(topic));
                OffsetAndMetadata om = c.committed(Set.of(tp), Clients.WAIT).get(tp);
                assertNotNull(om);
                committed = om.offset();
                List<ConsumerRecord<byte[], byte[]>> again = Clients.pollAtLeast(c, (int) (10 - committed), Clients.WAIT);
                assertEquals(committed, again.get(0).offset(), "resumes exactly at the committed offset");
                for (ConsumerRecord<byte[], byte[]> r : again) processed.add(r.offset());
            }
            Set<Long> distinct = new HashSet<>(processed);
            for (long o = 0; o < 10; o++) assertTrue(distinct.contains(o), "offset " + o + " was never processed");
            assertEquals(2, processed.size() - distinct.size(), "exactly the two uncommitted records were processed twice");
        }
    }

    @Test
    void commitSyncWithoutArgumentsCommitsThePollPosition() throws Exception {
        try (BrookBroker broker = start("position")) {
            String bootstrap = broker.bootstrap();
            String topic = Clients.uniqueTopic("position");
            Clients.createTopic(bootstrap, topic, 1);
            produce(bootstrap, topic, 5);
            TopicPartition tp = new TopicPartition(topic, 0);
            try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, topic + "-g", FIVE_PER_POLL)) {
                c.subscribe(List.of(topic));
                ConsumerRecords<byte[], byte[]> rs = pollSome(c);
                assertEquals(5, rs.count(), "the five records arrive in one poll");
                ConsumerRecord<byte[], byte[]> firstRecord = rs.iterator().next();
                assertEquals(0, firstRecord.offset());
                // "Process" only the first record, then commitSync(): it commits the position after the whole poll.
                c.commitSync(Clients.WAIT);
                assertEquals(5, c.committed(Set.of(tp), Clients.WAIT).get(tp).offset(),
                    "commitSync() commits the position (5), not the processed record + 1 (1)");
            }
        }
    }

    @Test
    void autoCommitWithProcessingOnAnotherThreadCanSkipRecords() throws Exception {
        try (BrookBroker broker = start("autoskip")) {
            String bootstrap = broker.bootstrap();
            String topic = Clients.uniqueTopic("autoskip");
            String group = topic + "-g";
            Clients.createTopic(bootstrap, topic, 1);
            produce(bootstrap, topic, 5);
            TopicPartition tp = new TopicPartition(topic, 0);
            Map<String, Object> auto = new HashMap<>(FIVE_PER_POLL);
            auto.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "true");
            // The hand-off queue of a worker thread; the worker has not run yet when the consumer commits.
            Queue<ConsumerRecord<byte[], byte[]>> handedOff = new ArrayDeque<>();
            Set<Long> processed = new HashSet<>();
            try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group, auto)) {
                c.subscribe(List.of(topic));
                for (ConsumerRecord<byte[], byte[]> r : pollSome(c)) handedOff.add(r);
                // close() with auto-commit on commits the consumed position, whatever the worker did.
            }
            // The worker dies before processing: the handed-off records are lost.
            handedOff.clear();
            try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group, Map.of())) {
                c.subscribe(List.of(topic));
                assertEquals(5, c.committed(Set.of(tp), Clients.WAIT).get(tp).offset(), "auto-commit committed 5");
                long deadline = System.nanoTime() + Clients.WAIT.toNanos();
                while (c.assignment().isEmpty() && System.nanoTime() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) processed.add(r.offset());
                }
                assertEquals(Set.of(tp), c.assignment(), "the new member got the partition");
                assertEquals(5, c.position(tp, Clients.WAIT), "the new member starts at the committed offset");
            }
            assertTrue(processed.isEmpty(), "records 0..4 were skipped: never processed, never re-delivered");
        }
    }

    @Test
    void deadLetterTopicPattern() throws Exception {
        try (BrookBroker broker = start("dlt")) {
            String bootstrap = broker.bootstrap();
            String topic = Clients.uniqueTopic("orders");
            String dlt = topic + ".DLT";
            String group = topic + "-g";
            Clients.createTopic(bootstrap, topic, 1);
            Clients.createTopic(bootstrap, dlt, 1);
            int n = 10;
            long poison = 3;
            long flaky = 6;
            produce(bootstrap, topic, n);
            TopicPartition tp = new TopicPartition(topic, 0);
            List<Long> processed = new ArrayList<>();
            Map<Long, Integer> attempts = new HashMap<>();
            try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group, Map.of());
                 KafkaProducer<byte[], byte[]> dltProducer = Clients.producer(bootstrap,
                     Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
                c.subscribe(List.of(topic));
                List<ConsumerRecord<byte[], byte[]>> batch = Clients.pollAtLeast(c, n, Clients.WAIT);
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    for (int attempt = 1; ; attempt++) {
                        attempts.merge(r.offset(), 1, Integer::sum);
                        try {
                            if (r.offset() == poison) throw new IllegalArgumentException("cannot parse order");
                            if (r.offset() == flaky && attempt == 1) throw new IllegalStateException("timeout");
                            processed.add(r.offset());
                            break;
                        } catch (IllegalStateException transientError) {
                            if (attempt >= 3) throw transientError; // retried on the spot
                        } catch (IllegalArgumentException permanent) {
                            ProducerRecord<byte[], byte[]> out = new ProducerRecord<>(dlt, r.key(), r.value());
                            out.headers().add("dlt.original.topic", r.topic().getBytes(UTF_8));
                            out.headers().add("dlt.original.partition", Integer.toString(r.partition()).getBytes(UTF_8));
                            out.headers().add("dlt.original.offset", Long.toString(r.offset()).getBytes(UTF_8));
                            out.headers().add("dlt.error", permanent.toString().getBytes(UTF_8));
                            dltProducer.send(out).get(30, TimeUnit.SECONDS); // durable before we move on
                            break;
                        }
                    }
                }
                long last = batch.get(batch.size() - 1).offset();
                c.commitSync(Map.of(tp, new OffsetAndMetadata(last + 1)), Clients.WAIT);
                assertEquals(n, c.committed(Set.of(tp), Clients.WAIT).get(tp).offset(), "committed = last + 1");
            }
            assertEquals(2, attempts.get(flaky), "the transient failure was retried once");
            List<Long> expected = new ArrayList<>();
            for (long o = 0; o < n; o++) if (o != poison) expected.add(o);
            assertEquals(expected, processed, "every other record processed once, in order");
            try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap)) {
                TopicPartition dtp = new TopicPartition(dlt, 0);
                c.assign(List.of(dtp));
                c.seekToBeginning(List.of(dtp));
                List<ConsumerRecord<byte[], byte[]>> dead = Clients.pollExactly(c, 1, Clients.WAIT);
                Map<String, String> h = new HashMap<>();
                for (Header x : dead.get(0).headers()) h.put(x.key(), new String(x.value(), UTF_8));
                assertEquals(topic, h.get("dlt.original.topic"));
                assertEquals("0", h.get("dlt.original.partition"));
                assertEquals(Long.toString(poison), h.get("dlt.original.offset"));
                assertTrue(h.get("dlt.error").contains("cannot parse order"), h.toString());
                assertEquals("v" + poison, new String(dead.get(0).value(), UTF_8));
            }
        }
    }

    private void restartScenario(boolean kill) throws Exception {
        try (BrookBroker broker = start(kill ? "offsets-kill" : "offsets-term")) {
            String bootstrap = broker.bootstrap();
            String topic = Clients.uniqueTopic("durable");
            String group = topic + "-g";
            Clients.createTopic(bootstrap, topic, 2);
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap)) {
                for (int i = 0; i < 20; i++) p.send(new ProducerRecord<>(topic, i % 2, null, ("v" + i).getBytes(UTF_8)));
                p.flush();
            }
            TopicPartition p0 = new TopicPartition(topic, 0);
            TopicPartition p1 = new TopicPartition(topic, 1);
            try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group, Map.of())) {
                c.subscribe(List.of(topic));
                Clients.pollAtLeast(c, 20, Clients.WAIT);
                c.commitSync(Map.of(p0, new OffsetAndMetadata(4, "meta-0"), p1, new OffsetAndMetadata(7)), Clients.WAIT);
            }
            if (kill) {
                broker.kill();
                broker.startAgain();
            } else {
                broker.restart();
            }
            try (Admin admin = Clients.admin(bootstrap)) {
                Map<TopicPartition, OffsetAndMetadata> got = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
                assertEquals(4, got.get(p0).offset());
                assertEquals("meta-0", got.get(p0).metadata());
                assertEquals(7, got.get(p1).offset());
            }
            try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group, Map.of())) {
                c.subscribe(List.of(topic));
                List<ConsumerRecord<byte[], byte[]>> rest = Clients.pollAtLeast(c, (10 - 4) + (10 - 7), Clients.WAIT);
                long min0 = rest.stream().filter(r -> r.partition() == 0).mapToLong(ConsumerRecord::offset).min().orElse(-1);
                long min1 = rest.stream().filter(r -> r.partition() == 1).mapToLong(ConsumerRecord::offset).min().orElse(-1);
                assertEquals(4, min0, "partition 0 resumes at its committed offset");
                assertEquals(7, min1, "partition 1 resumes at its committed offset");
                assertEquals(9, rest.size(), "nothing before the committed offsets is re-read");
            }
        }
    }

    @Test
    void committedOffsetsSurviveSigterm() throws Exception {
        restartScenario(false);
    }

    @Test
    void committedOffsetsSurviveSigkill() throws Exception {
        restartScenario(true);
    }
}

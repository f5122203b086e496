package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
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
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.junit.jupiter.api.Tag;
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
    @Tag(Lab.TAG)
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
            List<Long> beforeCrash = List.copyOf(processed);
            long committed;
            List<Long> afterRestart = new ArrayList<>();
            try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group, Map.of())) {
                c.subscribe(List.of(topic));
                OffsetAndMetadata om = c.committed(Set.of(tp), Clients.WAIT).get(tp);
                assertNotNull(om);
                committed = om.offset();
                List<ConsumerRecord<byte[], byte[]>> again = Clients.pollAtLeast(c, (int) (10 - committed), Clients.WAIT);
                assertEquals(committed, again.get(0).offset(), "resumes exactly at the committed offset");
                for (ConsumerRecord<byte[], byte[]> r : again) afterRestart.add(r.offset());
            }
            processed.addAll(afterRestart);
            Set<Long> distinct = new HashSet<>(processed);
            for (long o = 0; o < 10; o++) assertTrue(distinct.contains(o), "offset " + o + " was never processed");
            assertEquals(2, processed.size() - distinct.size(), "exactly the two uncommitted records were processed twice");
            Lab.start()
                .say("producer: 10 records, offsets 0..9")
                .say("consumer 1 (enable.auto.commit=false, max.poll.records=5) processed " + beforeCrash)
                .say("it committed offset 5 after the first batch, then stopped without committing (the crash)")
                .say("committed offset of the group: " + committed)
                .say("consumer 2 of the same group starts at " + afterRestart.get(0) + " and processes " + afterRestart)
                .say("processed twice: " + (processed.size() - distinct.size()) + " records; skipped: none")
                .finish();
        }
    }

    @Test
    @Tag(Lab.TAG)
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
                long committed = c.committed(Set.of(tp), Clients.WAIT).get(tp).offset();
                assertEquals(5, committed, "commitSync() commits the position (5), not the processed record + 1 (1)");
                Lab.start()
                    .say("producer: 5 records, offsets 0..4")
                    .say("consumer (max.poll.records=5): poll() returned " + rs.count() + " records; "
                        + "it processed offset " + firstRecord.offset() + " only, then called commitSync()")
                    .say("committed offset of the group: " + committed + " (the position after the poll, not "
                        + (firstRecord.offset() + 1) + ")")
                    .say("a crash now would skip offsets 1..4: the group resumes at " + committed)
                    .finish();
            }
        }
    }

    @Test
    @Tag(Lab.TAG)
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
            int lost = handedOff.size();
            // The worker dies before processing: the handed-off records are lost.
            handedOff.clear();
            long committed;
            long resumedAt;
            try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group, Map.of())) {
                c.subscribe(List.of(topic));
                committed = c.committed(Set.of(tp), Clients.WAIT).get(tp).offset();
                assertEquals(5, committed, "auto-commit committed 5");
                long deadline = System.nanoTime() + Clients.WAIT.toNanos();
                while (c.assignment().isEmpty() && System.nanoTime() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) processed.add(r.offset());
                }
                assertEquals(Set.of(tp), c.assignment(), "the new member got the partition");
                resumedAt = c.position(tp, Clients.WAIT);
                assertEquals(5, resumedAt, "the new member starts at the committed offset");
            }
            assertTrue(processed.isEmpty(), "records 0..4 were skipped: never processed, never re-delivered");
            Lab.start()
                .say("producer: 5 records, offsets 0..4")
                .say("consumer 1 (enable.auto.commit=true): poll() returned " + lost + " records, handed to a worker "
                    + "thread; the consumer closes, the worker dies before processing any")
                .say("committed offset of the group: " + committed + " (auto-commit saved the poll position)")
                .say("consumer 2 of the same group starts at " + resumedAt + ": offsets 0..4 are never processed")
                .finish();
        }
    }

    /**
     * Auto-commit's re-delivery window: the commit of a poll's records happens in a later poll() (Kafka's
     * ConsumerCoordinator#maybeAutoCommitOffsetsAsync, called from poll), so a consumer that dies after processing
     * records and before its next poll has them re-delivered. The consumer runs in a process of its own and is
     * killed with SIGKILL (an in-process consumer's close() would commit).
     */
    @Test
    @Tag(Lab.TAG)
    void autoCommitCrashAfterProcessingRedeliversSinceTheLastAutoCommit() throws Exception {
        try (BrookBroker broker = start("autoredeliver")) {
            String bootstrap = broker.bootstrap();
            String topic = Clients.uniqueTopic("autoredeliver");
            String group = topic + "-g";
            Clients.createTopic(bootstrap, topic, 1);
            TopicPartition tp = new TopicPartition(topic, 0);
            produceOneBatch(bootstrap, topic, 0, 5);
            List<String> said = new ArrayList<>();
            try (ChildJvm child = ChildJvm.start(AutoCommitConsumerProcess.class, bootstrap, topic, group, "5", "10")) {
                said.addAll(child.linesUntil("committed 5"));
                produceOneBatch(bootstrap, topic, 5, 5);
                said.addAll(child.linesUntil("stopped"));
                child.kill();
            }
            List<Long> processed = new ArrayList<>();
            for (String line : said) {
                if (line.startsWith("processed ")) processed.add(Long.parseLong(line.substring("processed ".length())));
            }
            assertEquals(List.of(0L, 1L, 2L, 3L, 4L, 5L, 6L, 7L, 8L, 9L), processed, "consumer 1 processed all ten");
            long committed;
            List<Long> again = new ArrayList<>();
            try (KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group, Map.of())) {
                c.subscribe(List.of(topic));
                committed = c.committed(Set.of(tp), Clients.WAIT).get(tp).offset();
                // Joins once the killed member's session (6 s) has expired.
                for (ConsumerRecord<byte[], byte[]> r : Clients.pollAtLeast(c, 5, Duration.ofSeconds(60))) {
                    again.add(r.offset());
                }
            }
            assertEquals(5, committed, "the last auto-commit saved 5: the poll that returned 5..9 committed the "
                + "position before it, and no poll followed");
            assertEquals(List.of(5L, 6L, 7L, 8L, 9L), again, "offsets 5..9 are delivered again");
            Lab.start()
                .say("producer: 5 records, offsets 0..4")
                .say("consumer 1 (enable.auto.commit=true, auto.commit.interval.ms=1000), a process of its own: "
                    + "processed " + processed.subList(0, 5))
                .say("a later poll() auto-committed offset 5")
                .say("producer: 5 records, offsets 5..9")
                .say("consumer 1 processed " + processed.subList(5, 10) + " and is killed (SIGKILL) before its next "
                    + "poll()")
                .say("committed offset of the group: " + committed)
                .say("consumer 2 of the same group receives " + again + " again: " + again.size()
                    + " records processed twice")
                .finish();
        }
    }

    /** Sends {@code n} records (values v{from}..) to partition 0 as one batch: linger keeps them together. */
    static void produceOneBatch(String bootstrap, String topic, int from, int n) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of(ProducerConfig.LINGER_MS_CONFIG, "60000"))) {
            for (int i = from; i < from + n; i++) p.send(new ProducerRecord<>(topic, 0, null, ("v" + i).getBytes(UTF_8)));
            Clients.flush(p, Clients.WAIT);
        }
    }

    /** A value deserializer for orders: a value that does not start with "order:" cannot be read (a poison pill). */
    public static final class OrderDeserializer implements Deserializer<String> {
        @Override
        public String deserialize(String topic, byte[] data) {
            String s = new String(data, UTF_8);
            if (!s.startsWith("order:")) throw new SerializationException("not an order: " + s);
            return s;
        }
    }

    /**
     * A poison pill: a record the value deserializer cannot read. poll() returns the records before it, then throws
     * RecordDeserializationException at its offset, and again on every poll(): the position does not move past it
     * (Kafka's CompletedFetch#fetchRecords keeps the failed record and retries it). The consumer copies its raw bytes
     * to the dead-letter topic with headers naming where it came from, seeks past it, and goes on.
     */
    @Test
    @Tag(Lab.TAG)
    void poisonPillBlocksThePartitionUntilParkedInTheDeadLetterTopic() throws Exception {
        try (BrookBroker broker = start("poison")) {
            String bootstrap = broker.bootstrap();
            String topic = Clients.uniqueTopic("orders");
            String dlt = topic + ".DLT";
            Clients.createTopic(bootstrap, topic, 1);
            Clients.createTopic(bootstrap, dlt, 1);
            List<String> values = List.of("order:0", "order:1", "{corrupt", "order:3", "order:4");
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap)) {
                for (String v : values) p.send(new ProducerRecord<>(topic, 0, null, v.getBytes(UTF_8)));
                Clients.flush(p, Clients.WAIT);
            }
            TopicPartition tp = new TopicPartition(topic, 0);
            Properties props = new Properties();
            props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(ConsumerConfig.GROUP_ID_CONFIG, topic + "-g");
            props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, OrderDeserializer.class.getName());
            List<String> processed = new ArrayList<>();
            List<Long> failedAt = new ArrayList<>();
            long committed;
            try (KafkaConsumer<byte[], String> c = new KafkaConsumer<>(props);
                 KafkaProducer<byte[], byte[]> dltProducer = Clients.producer(bootstrap,
                     Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
                c.subscribe(List.of(topic));
                long deadline = System.nanoTime() + Clients.WAIT.toNanos();
                for (int polls = 0; processed.size() < 4 && polls < 1000 && System.nanoTime() < deadline; polls++) {
                    try {
                        for (ConsumerRecord<byte[], String> r : c.poll(Duration.ofMillis(200))) {
                            processed.add(r.offset() + "=" + r.value());
                        }
                    } catch (RecordDeserializationException e) {
                        failedAt.add(e.offset());
                        // The first time, poll again as a consumer without a DLQ would: the same record fails again.
                        if (failedAt.size() < 2) continue;
                        ProducerRecord<byte[], byte[]> out = new ProducerRecord<>(dlt, bytes(e.keyBuffer()),
                            bytes(e.valueBuffer()));
                        out.headers().add("dlt.original.topic", e.topicPartition().topic().getBytes(UTF_8));
                        out.headers().add("dlt.original.partition",
                            Integer.toString(e.topicPartition().partition()).getBytes(UTF_8));
                        out.headers().add("dlt.original.offset", Long.toString(e.offset()).getBytes(UTF_8));
                        out.headers().add("dlt.exception", e.getCause().getMessage().getBytes(UTF_8));
                        dltProducer.send(out).get(30, TimeUnit.SECONDS); // durable before moving past it
                        c.seek(e.topicPartition(), e.offset() + 1);
                    }
                }
                c.commitSync(Map.of(tp, new OffsetAndMetadata(c.position(tp, Clients.WAIT))), Clients.WAIT);
                committed = c.committed(Set.of(tp), Clients.WAIT).get(tp).offset();
            }
            assertEquals(List.of(2L, 2L), failedAt, "poll() fails at the poison pill, and again until it is skipped");
            assertEquals(List.of("0=order:0", "1=order:1", "3=order:3", "4=order:4"), processed);
            assertEquals(5, committed);
            List<ConsumerRecord<byte[], byte[]>> dead;
            Map<String, String> h = new HashMap<>();
            try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap)) {
                TopicPartition dtp = new TopicPartition(dlt, 0);
                c.assign(List.of(dtp));
                c.seekToBeginning(List.of(dtp));
                dead = Clients.pollExactly(c, 1, Clients.WAIT);
                for (Header x : dead.get(0).headers()) h.put(x.key(), new String(x.value(), UTF_8));
            }
            assertEquals("{corrupt", new String(dead.get(0).value(), UTF_8), "the poison pill's bytes, unchanged");
            assertEquals(topic, h.get("dlt.original.topic"));
            assertEquals("2", h.get("dlt.original.offset"));
            Lab.start().name(topic, "$TOPIC")
                .say("producer: " + values + " to $TOPIC, offsets 0..4")
                .say("consumer (value.deserializer accepts only \"order:...\"): processed " + processed.subList(0, 2))
                .say("poll() threw RecordDeserializationException at offset " + failedAt.get(0)
                    + "; the next poll() threw it again at offset " + failedAt.get(1))
                .say("the raw record goes to $TOPIC.DLT, then seek(" + (failedAt.get(1) + 1) + ")")
                .say("processed " + processed.subList(2, 4) + "; commitSync(Map) committed " + committed)
                .say("$TOPIC.DLT offset " + dead.get(0).offset() + ": value " + new String(dead.get(0).value(), UTF_8)
                    + ", dlt.original.topic=" + h.get("dlt.original.topic") + " dlt.original.partition="
                    + h.get("dlt.original.partition") + " dlt.original.offset=" + h.get("dlt.original.offset")
                    + " dlt.exception=" + h.get("dlt.exception"))
                .finish();
        }
    }

    private static byte[] bytes(ByteBuffer b) {
        if (b == null) return null;
        byte[] out = new byte[b.remaining()];
        b.duplicate().get(out);
        return out;
    }

    @Test
    @Tag(Lab.TAG)
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
                Lab.start().name(topic, "$TOPIC")
                    .say("producer: 10 records v0..v9; processing v3 fails for good (cannot parse), v6 fails once "
                        + "(timeout)")
                    .say("attempts per offset: 3 -> " + attempts.get(poison) + ", 6 -> " + attempts.get(flaky)
                        + ", others 1")
                    .say("processed: " + processed)
                    .say("$TOPIC.DLT holds " + dead.size() + " record: " + new String(dead.get(0).value(), UTF_8)
                        + " with dlt.original.partition=" + h.get("dlt.original.partition")
                        + " dlt.original.offset=" + h.get("dlt.original.offset"))
                    .say("committed offset of the group: " + n + " (last processed + 1, after every record's fate "
                        + "was decided)")
                    .finish();
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

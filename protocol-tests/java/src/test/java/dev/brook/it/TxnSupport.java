package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;

/** Helpers for the transaction tests: transactional producers, isolation levels, and the consume-transform-produce loop. */
final class TxnSupport {
    static final String READ_COMMITTED = "read_committed";
    static final String READ_UNCOMMITTED = "read_uncommitted";

    private TxnSupport() {}

    /**
     * Broker settings for the transaction tests: the group settings (fast rebalances), few transaction log partitions
     * so the coordinator's topic is quick to create, and the timed-out-transaction sweep every 500 ms (Kafka's default
     * is 10 s) so a test can watch the coordinator abort a transaction.
     */
    static Map<String, String> brokerProps() {
        Map<String, String> p = new HashMap<>(GroupSupport.brokerProps());
        p.put("transaction.state.log.num.partitions", "5");
        p.put("transaction.abort.timed.out.transaction.cleanup.interval.ms", "500");
        return p;
    }

    /** A transactional producer (init is left to the test); every blocking call bounded by 30 s. */
    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String transactionalId, Map<String, Object> extra) {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, (int) Clients.WAIT.toMillis());
        p.putAll(extra);
        return Clients.producer(bootstrap, p);
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String transactionalId) {
        return producer(bootstrap, transactionalId, Map.of());
    }

    /** An assign-only consumer at the given isolation level. */
    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String isolation) {
        return Clients.consumer(bootstrap, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation));
    }

    static ProducerRecord<byte[], byte[]> record(String topic, int partition, String value) {
        return new ProducerRecord<>(topic, partition, null, value.getBytes(UTF_8));
    }

    static String value(ConsumerRecord<byte[], byte[]> r) {
        return new String(r.value(), UTF_8);
    }

    static List<TopicPartition> partitions(String topic, int n) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < n; p++) tps.add(new TopicPartition(topic, p));
        return tps;
    }

    /**
     * Everything visible at {@code isolation} in the partitions, from the beginning to the end offsets at that level,
     * as "partition:offset=value" strings in partition then offset order.
     */
    static List<String> readAll(String bootstrap, String isolation, List<TopicPartition> tps) {
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, isolation)) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, TreeMap<Long, String>> seen = new HashMap<>();
            for (ConsumerRecord<byte[], byte[]> r : Clients.readToEnd(c, Clients.WAIT)) {
                seen.computeIfAbsent(new TopicPartition(r.topic(), r.partition()), k -> new TreeMap<>())
                    .put(r.offset(), value(r));
            }
            List<String> out = new ArrayList<>();
            for (TopicPartition tp : tps) {
                seen.getOrDefault(tp, new TreeMap<>()).forEach((o, v) -> out.add(tp.partition() + ":" + o + "=" + v));
            }
            return out;
        }
    }

    /** End offsets seen by a consumer at {@code isolation}: the last stable offset at read_committed, else the high watermark. */
    static Map<Integer, Long> endOffsets(String bootstrap, String isolation, List<TopicPartition> tps) {
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, isolation)) {
            Map<Integer, Long> out = new TreeMap<>();
            c.endOffsets(tps, Clients.WAIT).forEach((tp, o) -> out.put(tp.partition(), o));
            return out;
        }
    }

    /** Sends with an idempotent (not transactional) producer and waits for every acknowledgement. */
    static void producePlain(String bootstrap, String topic, int partitions, int n) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap)) {
            for (int i = 0; i < n; i++) p.send(record(topic, i % partitions, "in-" + i));
            Clients.flush(p, Clients.WAIT);
        }
    }

    /** Polls until {@code cond} holds or the timeout passes (then fails with {@code state}). */
    static void await(String what, Duration timeout, Supplier<Boolean> cond, Supplier<String> state) {
        GroupSupport.await(what, timeout, cond::get, state);
    }

    /**
     * Consume-transform-produce with one transactional producer and one group consumer at read_committed: each
     * transaction copies what one poll returned (as "out-" + value) and commits the consumer's positions with
     * sendOffsetsToTransaction. Every {@code abortEvery}-th transaction is aborted instead, and the consumer is moved
     * back to the group's committed offsets (so the records are copied again by a later transaction). After each
     * transaction, the group's committed offsets (OffsetFetch with require_stable, as a read_committed consumer asks)
     * must equal the positions just committed, or be unchanged after an abort.
     *
     * <p>A {@link KafkaException} from the producer or consumer (for example while a node is down) aborts the
     * transaction when the producer can still abort, and starts a new producer and consumer when it cannot.
     * {@code between} runs after each completed transaction (the cluster test kills nodes from it).
     *
     * @return the number of transactions committed
     */
    static int copyExactlyOnce(Supplier<String> bootstrap, String input, int partitions, String output, String group,
                               int total, int abortEvery, Duration timeout, Runnable between) {
        List<TopicPartition> inputs = partitions(input, partitions);
        Map<TopicPartition, Long> committed = new HashMap<>();
        for (TopicPartition tp : inputs) committed.put(tp, 0L);
        long deadline = System.nanoTime() + timeout.toNanos();
        int txns = 0;
        int commits = 0;
        int generation = 0;
        while (sum(committed) < total) {
            if (System.nanoTime() > deadline) fail("copy did not finish in " + timeout + "; committed " + committed);
            generation++;
            try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap.get(), group + "-copier");
                 KafkaConsumer<byte[], byte[]> consumer = GroupSupport.groupConsumer(bootstrap.get(), group, Map.of(
                     ConsumerConfig.ISOLATION_LEVEL_CONFIG, READ_COMMITTED,
                     ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 25))) {
                producer.initTransactions();
                consumer.assign(inputs);
                // After a failure the outcome of the last commit was unknown; initTransactions has completed it
                // either way, so the group's offsets are now the truth.
                committed.putAll(groupCommitted(consumer, inputs));
                seekToCommitted(consumer, inputs);
                while (sum(committed) < total) {
                    if (System.nanoTime() > deadline) fail("copy did not finish in " + timeout + "; committed " + committed);
                    ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(200));
                    if (batch.isEmpty()) continue;
                    txns++;
                    boolean abort = abortEvery > 0 && txns % abortEvery == 0;
                    producer.beginTransaction();
                    for (ConsumerRecord<byte[], byte[]> r : batch) {
                        producer.send(record(output, r.partition(), "out-" + value(r)));
                    }
                    Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
                    for (TopicPartition tp : inputs) positions.put(tp, new OffsetAndMetadata(consumer.position(tp, Clients.WAIT)));
                    producer.sendOffsetsToTransaction(positions, consumer.groupMetadata());
                    if (abort) {
                        producer.abortTransaction();
                        seekToCommitted(consumer, inputs);
                    } else {
                        producer.commitTransaction();
                        commits++;
                        positions.forEach((tp, om) -> committed.put(tp, om.offset()));
                    }
                    assertEquals(committed, groupCommitted(consumer, inputs),
                        "the group's committed offsets after transaction " + txns + (abort ? " (aborted)" : " (committed)"));
                    between.run();
                }
            } catch (KafkaException e) {
                // A node died under the loop; the committed map is only updated after a commit returned, and a
                // new producer with the same transactional.id aborts whatever the old one left open.
                if (generation > 20) fail("gave up after 20 producer generations; committed " + committed, e);
            }
        }
        return commits;
    }

    private static void seekToCommitted(KafkaConsumer<byte[], byte[]> consumer, List<TopicPartition> tps) {
        groupCommitted(consumer, tps).forEach(consumer::seek);
    }

    /** The group's committed offsets (0 where none). */
    static Map<TopicPartition, Long> groupCommitted(KafkaConsumer<byte[], byte[]> consumer, List<TopicPartition> tps) {
        Map<TopicPartition, Long> out = new LinkedHashMap<>();
        Map<TopicPartition, OffsetAndMetadata> c = consumer.committed(new java.util.HashSet<>(tps), Clients.WAIT);
        for (TopicPartition tp : tps) {
            OffsetAndMetadata om = c.get(tp);
            out.put(tp, om == null ? 0L : om.offset());
        }
        return out;
    }

    private static long sum(Map<TopicPartition, Long> m) {
        return m.values().stream().mapToLong(Long::longValue).sum();
    }

    /**
     * Checks the output of {@link #copyExactlyOnce}: at read_committed, every input value appears exactly once as
     * "out-" + value, in the same partition and in input order.
     */
    static void assertCopiedExactlyOnce(String bootstrap, String input, String output, int partitions) {
        List<TopicPartition> in = partitions(input, partitions);
        List<TopicPartition> out = partitions(output, partitions);
        Map<Integer, List<String>> expected = byPartition(readAll(bootstrap, READ_COMMITTED, in), "out-");
        Map<Integer, List<String>> actual = byPartition(readAll(bootstrap, READ_COMMITTED, out), "");
        assertEquals(expected, actual, "every input record exactly once in the output, per partition in order");
    }

    private static Map<Integer, List<String>> byPartition(List<String> entries, String prefix) {
        Map<Integer, List<String>> m = new TreeMap<>();
        for (String e : entries) {
            int colon = e.indexOf(':');
            int eq = e.indexOf('=');
            m.computeIfAbsent(Integer.parseInt(e.substring(0, colon)), k -> new ArrayList<>()).add(prefix + e.substring(eq + 1));
        }
        return m;
    }

    static long offset(KafkaProducer<byte[], byte[]> p, String topic, int partition, String value) throws Exception {
        RecordMetadata md = p.send(record(topic, partition, value)).get(30, TimeUnit.SECONDS);
        return md.offset();
    }

    /**
     * The reliability lab on a topic of three partitions: a transaction of three records (two on partition 0, one on
     * partition 1) commits, one of two records on partition 0 aborts. Each transaction ends with one control record per
     * partition it wrote, so the aborted records sit at 3 and 4 after the commit marker at 2, and the abort marker
     * takes 5.
     */
    static void lab(String bootstrap, String t) throws Exception {
        lab(bootstrap, t, line -> {});
    }

    /** {@link #lab(String, String)}, telling {@code report} what happened, in lines that are the same on every run. */
    static void lab(String bootstrap, String t, Consumer<String> report) throws Exception {
        List<TopicPartition> tps = partitions(t, 3);
        List<Long> offsets = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> p = TxnSupport.producer(bootstrap, t + "-producer")) {
            p.initTransactions();
            p.beginTransaction();
            offsets.add(offset(p, t, 0, "mid-1"));
            offsets.add(offset(p, t, 0, "mid-2"));
            offsets.add(offset(p, t, 1, "mid-3"));
            p.commitTransaction();
            p.beginTransaction();
            offsets.add(offset(p, t, 0, "mid-4"));
            offsets.add(offset(p, t, 0, "mid-5"));
            p.abortTransaction();
        }
        assertEquals(List.of(0L, 1L, 0L, 3L, 4L), offsets, "acknowledged offsets (the commit marker is at 0:2)");
        List<String> committed = readAll(bootstrap, READ_COMMITTED, tps);
        assertEquals(List.of("0:0=mid-1", "0:1=mid-2", "1:0=mid-3"), committed,
            "read_committed: the three committed records, none of the aborted two");
        List<String> uncommitted = readAll(bootstrap, READ_UNCOMMITTED, tps);
        assertEquals(List.of("0:0=mid-1", "0:1=mid-2", "0:3=mid-4", "0:4=mid-5", "1:0=mid-3"), uncommitted,
            "read_uncommitted: all five, markers at 0:2, 0:5 and 1:1 skipped");
        Map<Integer, Long> ends = Map.of(0, 6L, 1, 2L, 2, 0L);
        Map<Integer, Long> lso = endOffsets(bootstrap, READ_COMMITTED, tps);
        assertEquals(ends, lso, "LSO with no open transaction = high watermark");
        assertEquals(ends, endOffsets(bootstrap, READ_UNCOMMITTED, tps), "high watermark, markers included");
        report.accept("transaction 1: mid-1, mid-2 to partition 0 and mid-3 to partition 1, at offsets "
            + offsets.subList(0, 3) + "; commitTransaction()");
        report.accept("transaction 2: mid-4, mid-5 to partition 0, at offsets " + offsets.subList(3, 5)
            + "; abortTransaction()");
        report.accept("read_committed consumer (partition:offset=value): " + committed);
        report.accept("read_uncommitted consumer: " + uncommitted);
        report.accept("end offsets by partition, transaction markers included: " + new TreeMap<>(lso));
    }

    /**
     * A second producer with the same transactional.id fences the first (a topic of one partition): its
     * InitProducerId aborts the first one's open transaction and bumps the epoch, so the first producer's commit fails
     * with ProducerFencedException.
     */
    static void zombie(String bootstrap, String t) throws Exception {
        List<TopicPartition> tps = partitions(t, 1);
        String id = t + "-producer";
        try (KafkaProducer<byte[], byte[]> zombie = TxnSupport.producer(bootstrap, id);
             KafkaProducer<byte[], byte[]> successor = TxnSupport.producer(bootstrap, id)) {
            zombie.initTransactions();
            zombie.beginTransaction();
            assertEquals(0L, offset(zombie, t, 0, "zombie"));
            successor.initTransactions();
            assertThrows(ProducerFencedException.class, zombie::commitTransaction, "the zombie's commit");
            successor.beginTransaction();
            offset(successor, t, 0, "successor");
            successor.commitTransaction();
        }
        List<String> committed = readAll(bootstrap, READ_COMMITTED, tps);
        assertEquals(1, committed.size(), "only the successor's record at read_committed: " + committed);
        assertTrue(committed.get(0).endsWith("=successor"), committed.toString());
        List<String> all = readAll(bootstrap, READ_UNCOMMITTED, tps);
        assertEquals("0:0=zombie", all.get(0), "the zombie's record stays in the log, aborted: " + all);
    }
}

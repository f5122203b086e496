package dev.brook.it;

import static dev.brook.it.TxnSupport.READ_COMMITTED;
import static dev.brook.it.TxnSupport.READ_UNCOMMITTED;
import static dev.brook.it.TxnSupport.endOffsets;
import static dev.brook.it.TxnSupport.partitions;
import static dev.brook.it.TxnSupport.readAll;
import static dev.brook.it.TxnSupport.record;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Transactions with the Java client on one broker: the articles' lab, consume-transform-produce with
 * sendOffsetsToTransaction, fencing, the last stable offset, the coordinator's timeout abort, and the Admin calls
 * behind kafka-transactions.sh. Run against Kafka 4.4 by scripts/differential (through kafka-as-brook.sh).
 */
@ExtendWith(BrokerLogOnFailure.class)
class TransactionsTest {
    static BrookBroker broker;
    static String bootstrap;

    @BeforeAll
    static void start() {
        assumeFalse(TestBrokers.isExternal(), "the transaction tests start their own broker with short transaction timers");
        broker = BrookBroker.start("txn", TxnSupport.brokerProps());
        bootstrap = broker.bootstrap();
    }

    @AfterAll
    static void stop() {
        if (broker != null) broker.close();
    }

    static String topic(String prefix, int partitions) throws Exception {
        String t = Clients.uniqueTopic(prefix);
        Clients.createTopic(bootstrap, t, partitions);
        return t;
    }

    /** The reliability lab ({@link TxnSupport#lab}). */
    @Test
    @Tag(Lab.TAG)
    void labCommittedVisibleAbortedInvisible() throws Exception {
        String t = topic("txn-lab", 3);
        Lab lab = Lab.start().name(t, "$TOPIC");
        TxnSupport.lab(bootstrap, t, lab::say);
        lab.finish();
    }

    /**
     * Consume-transform-produce: 600 records over three partitions copied by transactions of at most 25 records that
     * commit the input offsets with sendOffsetsToTransaction; every third transaction aborts and is redone.
     */
    @Test
    void consumeTransformProduceExactlyOnce() throws Exception {
        String in = topic("txn-in", 3);
        String out = topic("txn-out", 3);
        TxnSupport.producePlain(bootstrap, in, 3, 600);
        int commits = TxnSupport.copyExactlyOnce(() -> bootstrap, in, 3, out, in + "-g", 600, 3, Duration.ofSeconds(120),
            () -> {});
        assertTrue(commits >= 600 / 25 / 3, "at least one commit per 25 records per partition, got " + commits);
        TxnSupport.assertCopiedExactlyOnce(bootstrap, in, out, 3);
    }

    /** A zombie fenced ({@link TxnSupport#zombie}). */
    @Test
    void zombieIsFenced() throws Exception {
        TxnSupport.zombie(bootstrap, topic("txn-zombie", 1));
    }

    /**
     * An open transaction holds read_committed consumers at its first offset (the last stable offset), also records
     * written after it by other producers; read_uncommitted reads past it. Its commit releases everything.
     */
    @Test
    void openTransactionHoldsReadCommittedAtLso() throws Exception {
        String t = topic("txn-lso", 1);
        List<TopicPartition> tps = partitions(t, 1);
        TopicPartition tp = tps.get(0);
        try (KafkaProducer<byte[], byte[]> p = TxnSupport.producer(bootstrap, t + "-producer");
             KafkaConsumer<byte[], byte[]> rc = TxnSupport.consumer(bootstrap, READ_COMMITTED)) {
            p.initTransactions();
            p.beginTransaction();
            TxnSupport.offset(p, t, 0, "a");
            TxnSupport.offset(p, t, 0, "b");
            p.commitTransaction();                       // 0, 1, marker 2
            p.beginTransaction();
            assertEquals(3L, TxnSupport.offset(p, t, 0, "open-1"));
            assertEquals(4L, TxnSupport.offset(p, t, 0, "open-2"));
            TxnSupport.producePlain(bootstrap, t, 1, 1);  // offset 5, after the open transaction
            assertEquals(Map.of(0, 3L), endOffsets(bootstrap, READ_COMMITTED, tps), "LSO = first offset of the open transaction");
            assertEquals(Map.of(0, 6L), endOffsets(bootstrap, READ_UNCOMMITTED, tps), "high watermark");

            rc.assign(tps);
            rc.seekToBeginning(tps);
            List<String> seen = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : Clients.pollExactly(rc, 2, Clients.WAIT)) seen.add(TxnSupport.value(r));
            assertEquals(List.of("a", "b"), seen);
            assertEquals(3L, rc.position(tp), "read_committed stops at the LSO");
            // Nothing past the LSO for a while (a negative check, so it can only be a bounded wait).
            long until = System.nanoTime() + Duration.ofSeconds(2).toNanos();
            while (System.nanoTime() < until) {
                assertTrue(rc.poll(Duration.ofMillis(200)).isEmpty(), "a read_committed poll returned records past the LSO");
            }
            assertEquals(3L, rc.position(tp));
            assertEquals(List.of("0:0=a", "0:1=b", "0:3=open-1", "0:4=open-2", "0:5=in-0"),
                readAll(bootstrap, READ_UNCOMMITTED, tps), "read_uncommitted reads past the LSO");

            p.commitTransaction();                       // marker 6
            seen.clear();
            for (ConsumerRecord<byte[], byte[]> r : Clients.pollExactly(rc, 3, Clients.WAIT)) seen.add(TxnSupport.value(r));
            assertEquals(List.of("open-1", "open-2", "in-0"), seen, "the commit releases the transaction and what followed it");
            assertEquals(Map.of(0, 7L), endOffsets(bootstrap, READ_COMMITTED, tps));
        }
    }

    /**
     * A transaction open longer than its transaction.timeout.ms is aborted by the coordinator's periodic sweep
     * (transaction.abort.timed.out.transaction.cleanup.interval.ms, 500 ms here): an abort marker follows the records,
     * and the producer's late commit is refused.
     */
    @Test
    void coordinatorAbortsTimedOutTransaction() throws Exception {
        String t = topic("txn-timeout", 1);
        List<TopicPartition> tps = partitions(t, 1);
        String id = t + "-producer";
        try (KafkaProducer<byte[], byte[]> p = TxnSupport.producer(bootstrap, id,
                 Map.of(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 2000));
             Admin admin = Clients.admin(bootstrap)) {
            p.initTransactions();
            p.beginTransaction();
            TxnSupport.offset(p, t, 0, "late-1");
            TxnSupport.offset(p, t, 0, "late-2");
            TxnSupport.await("the coordinator to abort the timed-out transaction", Clients.WAIT,
                () -> endOffsets(bootstrap, READ_COMMITTED, tps).get(0) == 3L,
                () -> "end offsets at read_committed " + endOffsets(bootstrap, READ_COMMITTED, tps));
            TxnSupport.await("the transaction to be complete (aborted)", Clients.WAIT,
                () -> describe(admin, id).state() == TransactionState.COMPLETE_ABORT, () -> describe(admin, id).toString());
            // Kafka 4.4 answers the stale EndTxn with INVALID_TXN_STATE (checked against Kafka by scripts/differential).
            assertThrows(InvalidTxnStateException.class, p::commitTransaction, "commit after the coordinator aborted");
        }
        assertEquals(List.of(), readAll(bootstrap, READ_COMMITTED, tps));
        assertEquals(List.of("0:0=late-1", "0:1=late-2"), readAll(bootstrap, READ_UNCOMMITTED, tps));
        assertEquals(Map.of(0, 3L), endOffsets(bootstrap, READ_UNCOMMITTED, tps), "the abort marker at 2");
    }

    static TransactionDescription describe(Admin admin, String id) {
        try {
            return admin.describeTransactions(List.of(id)).description(id).get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new AssertionError("describeTransactions " + id, e);
        }
    }

    /**
     * What kafka-transactions.sh does: list and describe a live transaction, describe the producers of a partition it
     * wrote, and abort it on that partition with the producer's id and epoch and a coordinator epoch of 0 where the
     * partition knows none, as the tool does (a WriteTxnMarkers sent by the Admin client to the partition leader),
     * which releases read_committed there.
     */
    @Test
    void adminListDescribeAndAbort() throws Exception {
        String t = topic("txn-admin", 2);
        List<TopicPartition> tps = partitions(t, 2);
        String id = t + "-producer";
        try (KafkaProducer<byte[], byte[]> p = TxnSupport.producer(bootstrap, id);
             Admin admin = Clients.admin(bootstrap)) {
            p.initTransactions();
            p.beginTransaction();
            TxnSupport.offset(p, t, 0, "x-0");
            TxnSupport.offset(p, t, 0, "x-1");
            TxnSupport.offset(p, t, 1, "y-0");

            Collection<TransactionListing> listed = admin.listTransactions().all().get(30, TimeUnit.SECONDS);
            List<TransactionListing> mine = listed.stream().filter(l -> l.transactionalId().equals(id)).collect(Collectors.toList());
            assertEquals(1, mine.size(), "listTransactions: " + listed);
            assertEquals(TransactionState.ONGOING, mine.get(0).state());
            long producerId = mine.get(0).producerId();

            TransactionDescription d = describe(admin, id);
            assertEquals(TransactionState.ONGOING, d.state());
            assertEquals(producerId, d.producerId());
            assertEquals(Set.copyOf(tps), d.topicPartitions());
            assertEquals(60_000, d.transactionTimeoutMs(), "the producer's default transaction.timeout.ms");
            assertTrue(d.transactionStartTimeMs().isPresent());
            assertEquals(Integer.parseInt(broker.readyFields().get("node.id")), d.coordinatorId());

            TopicPartition p0 = tps.get(0);
            List<ProducerState> producers = admin.describeProducers(List.of(p0)).partitionResult(p0)
                .get(30, TimeUnit.SECONDS).activeProducers();
            assertEquals(1, producers.size(), "describeProducers: " + producers);
            ProducerState ps = producers.get(0);
            assertEquals(producerId, ps.producerId());
            assertEquals(d.producerEpoch(), ps.producerEpoch());
            assertEquals(1, ps.lastSequence(), "two records on partition 0: sequences 0 and 1");
            assertEquals(0L, ps.currentTransactionStartOffset().orElse(-1), "the open transaction starts at 0");
            // The coordinator epoch is that of the last marker this producer got on the partition: none yet (-1).
            assertFalse(ps.coordinatorEpoch().isPresent(), "no marker yet for this producer on 0: " + ps);
            assertEquals(Map.of(0, 0L, 1, 0L), endOffsets(bootstrap, READ_COMMITTED, tps));

            admin.abortTransaction(new AbortTransactionSpec(p0, producerId, (short) ps.producerEpoch(), ps.coordinatorEpoch().orElse(0)))
                .all().get(30, TimeUnit.SECONDS);
            assertEquals(Map.of(0, 3L, 1, 0L), endOffsets(bootstrap, READ_COMMITTED, tps),
                "the abort marker at 0:2 releases partition 0 only");
            ProducerState after = admin.describeProducers(List.of(p0)).partitionResult(p0).get(30, TimeUnit.SECONDS)
                .activeProducers().get(0);
            assertFalse(after.currentTransactionStartOffset().isPresent(), "no open transaction on 0: " + after);
            p.abortTransaction();
        }
        assertEquals(List.of(), readAll(bootstrap, READ_COMMITTED, tps));
        assertEquals(Map.of(0, 4L, 1, 2L), endOffsets(bootstrap, READ_UNCOMMITTED, tps),
            "the producer's own abort adds a marker on each partition");
    }
}

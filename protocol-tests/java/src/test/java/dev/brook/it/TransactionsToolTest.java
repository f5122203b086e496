package dev.brook.it;

import static dev.brook.it.TxnSupport.READ_COMMITTED;
import static dev.brook.it.TxnSupport.endOffsets;
import static dev.brook.it.TxnSupport.partitions;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Kafka 4.4's own {@code kafka-transactions.sh} against a broker: the tool is
 * {@code org.apache.kafka.tools.TransactionsCommand} from {@code kafka-tools} 4.4.0, run here as a child process
 * with the test classpath, exactly as the script runs it. Each subcommand's exit status and printed table are
 * checked against what the test's own producer did: list, describe, describe-producers, find-hanging and abort
 * (by start offset, as an operator aborts a hanging transaction). Run against Kafka 4.4 by scripts/differential.
 */
@ExtendWith(BrokerLogOnFailure.class)
class TransactionsToolTest {

    static BrookBroker broker;
    static String bootstrap;

    @BeforeAll
    static void start() {
        assumeFalse(TestBrokers.isExternal(), "the transaction tests start their own broker with short transaction timers");
        broker = BrookBroker.start("txn-tool", TxnSupport.brokerProps());
        bootstrap = broker.bootstrap();
    }

    @AfterAll
    static void stop() {
        if (broker != null) broker.close();
    }

    /** What one run of the tool printed, and its exit status. */
    /** Runs {@code kafka-transactions.sh --bootstrap-server <broker> args...}; asserts exit status 0. */
    static Run tool(String... args) throws Exception {
        KafkaTool.Run r = KafkaTool.tool("TransactionsCommand", bootstrap, args);
        return new Run(r.exit(), r.out(), r.err());
    }

    record Run(int exit, String out, String err) {
        /** The rows of the tab-separated table the tool prints, each as column name to value. */
        List<Map<String, String>> table() {
            String[] lines = out.strip().split("\n");
            String[] head = lines[0].strip().split("\t");
            List<Map<String, String>> rows = new ArrayList<>();
            for (int i = 1; i < lines.length; i++) {
                String[] cells = lines[i].strip().split("\t");
                assertEquals(head.length, cells.length, "row " + i + " of\n" + out);
                Map<String, String> row = new LinkedHashMap<>();
                for (int c = 0; c < head.length; c++) row.put(head[c].strip(), cells[c].strip());
                rows.add(row);
            }
            return rows;
        }
    }

    static Map<String, String> only(List<Map<String, String>> rows, String column, String value) {
        List<Map<String, String>> mine = rows.stream().filter(r -> value.equals(r.get(column))).toList();
        assertEquals(1, mine.size(), column + "=" + value + " in " + rows);
        return mine.get(0);
    }

    /**
     * An open transaction over two partitions, seen through every read-only subcommand, then aborted on partition 0
     * by the tool's {@code abort --start-offset}: the marker it writes releases read_committed on that partition only.
     */
    @Test
    void listDescribeFindHangingAndAbortAnOpenTransaction() throws Exception {
        String t = Clients.uniqueTopic("txn-tool");
        Clients.createTopic(bootstrap, t, 2);
        List<TopicPartition> tps = partitions(t, 2);
        String id = t + "-producer";
        String node = broker.readyFields().get("node.id");
        try (KafkaProducer<byte[], byte[]> p = TxnSupport.producer(bootstrap, id)) {
            p.initTransactions();
            p.beginTransaction();
            TxnSupport.offset(p, t, 0, "x-0");
            TxnSupport.offset(p, t, 0, "x-1");
            TxnSupport.offset(p, t, 1, "y-0");

            Map<String, String> listed = only(tool("list").table(), "TransactionalId", id);
            assertEquals("Ongoing", listed.get("TransactionState"), listed.toString());
            assertEquals(node, listed.get("Coordinator"), listed.toString());
            String producerId = listed.get("ProducerId");

            Map<String, String> described = only(tool("describe", "--transactional-id", id).table(),
                "TransactionalId", id);
            assertEquals(node, described.get("CoordinatorId"), described.toString());
            assertEquals(producerId, described.get("ProducerId"), described.toString());
            assertEquals("Ongoing", described.get("TransactionState"), described.toString());
            assertEquals("60000", described.get("TransactionTimeoutMs"), "the producer's default timeout");
            assertEquals(List.of(t + "-0", t + "-1"),
                List.of(described.get("TopicPartitions").split(",")).stream().map(String::strip).sorted().toList(),
                described.toString());

            Map<String, String> producer = only(
                tool("describe-producers", "--topic", t, "--partition", "0").table(), "ProducerId", producerId);
            assertEquals(described.get("ProducerEpoch"), producer.get("ProducerEpoch"), producer.toString());
            assertEquals("1", producer.get("LastSequence"), "two records on partition 0: " + producer);
            assertEquals("0", producer.get("CurrentTransactionStartOffset"), producer.toString());

            // Open for far less than the tool's threshold (the largest transaction.max.timeout.ms, 15 minutes by
            // default), and known to its coordinator: not hanging.
            Run hanging = tool("find-hanging", "--broker-id", node);
            assertTrue(hanging.table().isEmpty(), "find-hanging:\n" + hanging.out());

            assertEquals(Map.of(0, 0L, 1, 0L), endOffsets(bootstrap, READ_COMMITTED, tps));
            tool("abort", "--topic", t, "--partition", "0", "--start-offset", "0");
            assertEquals(Map.of(0, 3L, 1, 0L), endOffsets(bootstrap, READ_COMMITTED, tps),
                "the tool's abort marker at 0:2 releases partition 0 only");
            Map<String, String> after = only(
                tool("describe-producers", "--topic", t, "--partition", "0").table(), "ProducerId", producerId);
            assertEquals("None", after.get("CurrentTransactionStartOffset"), after.toString());
            p.abortTransaction();
        }
    }
}

package dev.brook.it;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.common.utils.Utils;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Transactions on a 3-node Brook cluster (topics RF=3, min.insync.replicas=2; {@code __transaction_state} and
 * {@code __consumer_offsets} replicated the same way): the reliability lab, a zombie fenced, and consume-transform-
 * produce while a partition leader and then the transaction coordinator are killed with SIGKILL mid-stream.
 */
@ExtendWith(BrookCluster.LogOnFailure.class)
class TransactionsClusterTest {
    static final String TXN_TOPIC = "__transaction_state";
    static final String OFFSETS_TOPIC = "__consumer_offsets";
    static final int TXN_PARTITIONS = 5;
    static final int OFFSETS_PARTITIONS = 5;
    static final Duration WAIT = Duration.ofSeconds(60);

    private final Closer closeables = new Closer();

    @BeforeEach
    void forgetEarlierClusters() {
        BrookCluster.resetStarted();
    }

    @AfterEach
    void closeAll() {
        closeables.closeAll();
    }

    private BrookCluster cluster(String name) {
        Map<String, String> props = new LinkedHashMap<>(TxnSupport.brokerProps());
        props.put("transaction.state.log.num.partitions", String.valueOf(TXN_PARTITIONS));
        props.put("offsets.topic.num.partitions", String.valueOf(OFFSETS_PARTITIONS));
        return closeables.add(BrookCluster.start(name, 3, props));
    }

    private static String topic(BrookCluster c, String prefix, int partitions) throws Exception {
        String t = Clients.uniqueTopic(prefix);
        c.createTopic(t, partitions, 3, Map.of());
        return t;
    }

    @Test
    void labOnThreeNodes() throws Exception {
        BrookCluster c = cluster("txn-lab");
        TxnSupport.lab(c.bootstrap(), topic(c, "txn-lab", 3));
    }

    @Test
    void zombieFencedOnThreeNodes() throws Exception {
        BrookCluster c = cluster("txn-zombie");
        TxnSupport.zombie(c.bootstrap(), topic(c, "txn-zombie", 1));
    }

    /**
     * 600 records copied as in {@link TransactionsTest#consumeTransformProduceExactlyOnce}, with two kills: after the
     * 2nd completed transaction the leader of output partition 0 is killed (started again after the 4th, and the test
     * waits for its ISRs to be full), and after the 6th the transaction coordinator of the copier's transactional.id
     * (the leader of its {@code __transaction_state} partition; started again after the 8th). Every input record must
     * still be in the output exactly once at read_committed, and the group's offsets move only with commits.
     */
    @Test
    void consumeTransformProduceSurvivesLeaderAndCoordinatorKills() throws Exception {
        BrookCluster c = cluster("txn-ctp");
        String in = topic(c, "txn-in", 3);
        String out = topic(c, "txn-out", 3);
        String group = in + "-g";
        String transactionalId = group + "-copier";  // the id copyExactlyOnce gives its producer
        int txnPartition = Utils.abs(transactionalId.hashCode()) % TXN_PARTITIONS;
        int offsetsPartition = Utils.abs(group.hashCode()) % OFFSETS_PARTITIONS;
        TxnSupport.producePlain(c.bootstrap(), in, 3, 600);

        AtomicInteger done = new AtomicInteger();
        List<String> kills = new ArrayList<>();
        int[] down = {-1};
        Runnable nemesis = () -> {
            int n = done.incrementAndGet();
            try {
                if (n == 2 || n == 6) {
                    int victim = n == 2 ? c.leaderOf(out, 0) : c.leaderOf(TXN_TOPIC, txnPartition);
                    assertTrue(victim > 0, "a leader to kill after transaction " + n);
                    kills.add((n == 2 ? "leader of " + out + "-0" : "transaction coordinator") + " = node " + victim);
                    c.kill(victim);
                    down[0] = victim;
                } else if ((n == 4 || n == 8) && down[0] > 0) {
                    c.startNode(down[0]);
                    down[0] = -1;
                    awaitFullIsrs(c, out, in, txnPartition, offsetsPartition);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted", e);
            }
        };
        TxnSupport.copyExactlyOnce(c::bootstrap, in, 3, out, group, 600, 3, Duration.ofSeconds(150), nemesis);
        assertTrue(kills.size() == 2, "both kills happened: " + kills);
        if (down[0] > 0) c.startNode(down[0]);
        TxnSupport.assertCopiedExactlyOnce(c.bootstrap(), in, out, 3);
    }

    /** Waits until every partition the copy uses has all three replicas in its ISR again. */
    private static void awaitFullIsrs(BrookCluster c, String out, String in, int txnPartition, int offsetsPartition)
        throws InterruptedException {
        Set<Integer> all = Set.of(1, 2, 3);
        for (int p = 0; p < 3; p++) {
            c.awaitIsr(out, p, all, WAIT);
            c.awaitIsr(in, p, all, WAIT);
        }
        c.awaitIsr(TXN_TOPIC, txnPartition, all, WAIT);
        c.awaitIsr(OFFSETS_TOPIC, offsetsPartition, all, WAIT);
    }
}

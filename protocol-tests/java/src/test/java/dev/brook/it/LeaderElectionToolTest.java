package dev.brook.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.Node;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Kafka 4.4's own {@code kafka-leader-election.sh} ({@code org.apache.kafka.tools.LeaderElectionCommand} from
 * kafka-tools 4.4.0, run as a child process as {@link OpsToolsTest} runs its tools) against a 3-node Brook cluster
 * with {@code auto.leader.rebalance.enable=false}, so that only the tool moves leadership back: a preferred election
 * after the preferred replica restarted, then the tool's answers when no election is needed, for both election
 * types (ElectLeaders, decided by the active controller).
 */
@ExtendWith(BrookCluster.LogOnFailure.class)
class LeaderElectionToolTest {
    static final Duration WAIT = Duration.ofSeconds(45);

    static BrookCluster cluster;

    @BeforeAll
    static void start() {
        cluster = BrookCluster.start("leader-election", 3, Map.of("auto.leader.rebalance.enable", "false"));
    }

    @AfterAll
    static void stop() {
        if (cluster != null) cluster.close();
    }

    @Test
    void preferredElectionMovesLeadershipBackAndThenIsNotNeeded() throws Exception {
        String topic = Clients.uniqueTopic("leader-election");
        cluster.createTopic(topic, 1, 3, Map.of());
        List<Node> replicas = cluster.describe(topic, 0).replicas();
        int preferred = replicas.get(0).id();
        assertEquals(preferred, cluster.leaderOf(topic, 0), "a new partition is led by its preferred replica");

        // The preferred replica stops (leadership moves away) and comes back into the ISR.
        cluster.stop(preferred);
        BrookCluster.await(WAIT, "a leader other than " + preferred,
            () -> { int l = cluster.leaderOf(topic, 0); return l > 0 && l != preferred; },
            () -> String.valueOf(cluster.describe(topic, 0)));
        cluster.startNode(preferred);
        cluster.awaitIsr(topic, 0, Set.of(1, 2, 3), WAIT);
        assertNotEquals(preferred, cluster.leaderOf(topic, 0), "leadership does not come back by itself");

        String tp = topic + "-0";
        String out = KafkaTool.tool("LeaderElectionCommand", cluster.bootstrap(),
            "--election-type", "preferred", "--topic", topic, "--partition", "0").out();
        assertTrue(out.contains("Successfully completed leader election (PREFERRED) for partitions " + tp), out);
        assertEquals(preferred, cluster.leaderOf(topic, 0));

        out = KafkaTool.tool("LeaderElectionCommand", cluster.bootstrap(),
            "--election-type", "preferred", "--topic", topic, "--partition", "0").out();
        assertTrue(out.contains("Valid replica already elected for partitions " + tp), out);
        // Asked for every partition, the controller leaves out those that need no election.
        out = KafkaTool.tool("LeaderElectionCommand", cluster.bootstrap(),
            "--election-type", "preferred", "--all-topic-partitions").out();
        assertEquals("", out.strip(), "nothing was elected and nothing failed");
        out = KafkaTool.tool("LeaderElectionCommand", cluster.bootstrap(),
            "--election-type", "unclean", "--topic", topic, "--partition", "0").out();
        assertTrue(out.contains("Valid replica already elected for partitions " + tp), out);
    }

    @Test
    void anUnknownPartitionIsAnError() throws Exception {
        KafkaTool.Run r = KafkaTool.run("LeaderElectionCommand", cluster.bootstrap(),
            "--election-type", "preferred", "--topic", "no-such-topic", "--partition", "0");
        assertEquals(1, r.exit(), r.out() + r.err());
        assertTrue((r.out() + r.err()).contains("UnknownTopicOrPartitionException"), r.out() + r.err());
    }
}

package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static dev.brook.it.KafkaTool.run;
import static dev.brook.it.KafkaTool.tool;

import dev.brook.it.KafkaTool.Run;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A dynamic controller quorum (KIP-853) changed with Kafka 4.4's own {@code kafka-metadata-quorum.sh}
 * ({@code org.apache.kafka.tools.MetadataQuorumCommand}): a 4th node started with {@code
 * controller.quorum.bootstrap.servers} joins as an observer; {@code add-controller} is refused while {@code
 * kraft.version} is 0 (static voters), and after {@code kafka-features upgrade --feature kraft.version=1} makes it a
 * voter; acks=all produce and consume still work, the cluster survives the active controller's kill, and {@code
 * remove-controller} makes the node an observer again.
 */
@ExtendWith(BrookCluster.LogOnFailure.class)
class QuorumReconfigTest {
    /** Every node names the cluster (the joining node has no voters to derive the id from). */
    static final String CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk";
    static final int JOINER = 4;
    static final Duration CHANGE_WAIT = Duration.ofSeconds(30);

    /** {@code describe --replication}: NodeId → Status (Leader, Follower, Observer). */
    static Map<Integer, String> replicationStatus(String bootstrap) throws Exception {
        String[] lines = tool("MetadataQuorumCommand", bootstrap, "describe", "--replication").out().strip().split("\n");
        List<String> head = Arrays.asList(lines[0].strip().split("\\s+"));
        int status = head.indexOf("Status");
        Map<Integer, String> rows = new TreeMap<>();
        for (int i = 1; i < lines.length; i++) {
            String[] cells = lines[i].strip().split("\\s+");
            rows.put(Integer.parseInt(cells[0]), cells[status]);
        }
        return rows;
    }

    static void awaitStatus(String bootstrap, int node, String want) throws Exception {
        long deadline = System.nanoTime() + CHANGE_WAIT.toNanos();
        Map<Integer, String> rows = Map.of();
        while (System.nanoTime() < deadline) {
            rows = replicationStatus(bootstrap);
            if (want.equals(rows.get(node))) return;
            Thread.sleep(200);
        }
        throw new AssertionError("node " + node + " is not " + want + " within " + CHANGE_WAIT + ": " + rows);
    }

    static Path writeProperties(Path file, Map<String, String> props) throws Exception {
        Properties p = new Properties();
        p.putAll(props);
        try (var out = Files.newOutputStream(file)) {
            p.store(out, "node " + JOINER);
        }
        return file;
    }

    static String directoryId(Path dataDir) throws Exception {
        Properties p = new Properties();
        try (var in = Files.newInputStream(dataDir.resolve("meta.properties"))) {
            p.load(in);
        }
        return p.getProperty("directory.id");
    }

    /** Produces {@code n} records with acks=all and reads them back from the start of partition 0. */
    static void produceAndConsume(String bootstrap, String topic, int n) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, 0, null, ("v" + i).getBytes(UTF_8))).get(60, TimeUnit.SECONDS);
            }
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap, Map.of())) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (got.size() < n && System.nanoTime() < deadline) {
                c.poll(Duration.ofMillis(200)).forEach(got::add);
            }
        }
        assertTrue(got.size() >= n, "read " + got.size() + " of at least " + n);
    }

    @Test
    void aJoiningControllerIsAddedAndRemovedWithKafkasTool() throws Exception {
        try (BrookCluster cluster = BrookCluster.start("quorum-reconfig", 3, Map.of("cluster.id", CLUSTER_ID))) {
            String bootstrap = cluster.bootstrap();
            BrookCluster.NodeProc joiner = cluster.addJoiningNode(JOINER);
            Path config = writeProperties(cluster.dir().resolve("node-" + JOINER + ".properties"), joiner.properties());
            awaitStatus(bootstrap, JOINER, "Observer");

            // Static voters: kraft.version 0, and Kafka refuses voter changes.
            Run refused = run("MetadataQuorumCommand", bootstrap, "--command-config", config.toString(), "add-controller");
            assertNotEquals(0, refused.exit(), refused.out());
            assertTrue(refused.err().contains("kraft.version feature is 0"), refused.err());

            tool("FeatureCommand", bootstrap, "upgrade", "--feature", "kraft.version=1");
            String dirId = directoryId(cluster.dataDir(JOINER));
            Run added = tool("MetadataQuorumCommand", bootstrap, "--command-config", config.toString(), "add-controller");
            assertEquals("Added controller " + JOINER + " with directory id " + dirId
                + " and endpoints: CONTROLLER://127.0.0.1:" + joiner.controllerPort, added.out().strip());
            Map<Integer, String> rows = replicationStatus(bootstrap);
            assertEquals(List.of(1, 2, 3, 4), new ArrayList<>(rows.keySet()), rows.toString());
            assertTrue(rows.values().stream().allMatch(s -> s.equals("Leader") || s.equals("Follower")), rows.toString());
            String voters = OpsToolsTest.status(bootstrap).get("CurrentVoters");
            assertTrue(voters.contains("\"id\": 4,") && voters.contains("127.0.0.1:" + joiner.controllerPort), voters);

            // Adding it again: DUPLICATE_VOTER.
            Run again = run("MetadataQuorumCommand", bootstrap, "--command-config", config.toString(), "add-controller");
            assertNotEquals(0, again.exit());
            assertTrue(again.err().contains("already part of the set of voters"), again.err());

            String topic = Clients.uniqueTopic("quorum-reconfig");
            cluster.createTopic(topic, 1, 3, Map.of());
            produceAndConsume(bootstrap, topic, 5);

            // The active controller's kill is survived by the 4-voter quorum.
            int active = cluster.controllerSeenBy(1 == JOINER ? 2 : 1);
            assertTrue(active > 0, "an active controller");
            cluster.kill(active);
            int survivor = active == 1 ? 2 : 1;
            BrookCluster.await(CHANGE_WAIT, "a new active controller",
                () -> { int c = cluster.controllerSeenBy(survivor); return c > 0 && c != active; },
                () -> "controller seen by " + survivor + ": " + cluster.controllerSeenBy(survivor));
            produceAndConsume(cluster.bootstrap(survivor), topic, 10);
            cluster.startNode(active);

            // remove-controller of the leader itself: it steps down, a voter takes over, and it
            // comes back as an observer.
            String at = cluster.bootstrap(survivor);
            int leader = Integer.parseInt(OpsToolsTest.status(at).get("LeaderId"));
            tool("MetadataQuorumCommand", at, "remove-controller", "--controller-id", String.valueOf(leader),
                "--controller-directory-id", leader == JOINER ? dirId : "AAAAAAAAAAAAAAAAAAAAAA");
            BrookCluster.await(CHANGE_WAIT, "a new leader among the voters", () -> {
                try {
                    Map<String, String> st = OpsToolsTest.status(at);
                    return !st.get("LeaderId").equals(String.valueOf(leader))
                        && !st.get("CurrentVoters").contains("\"id\": " + leader + ",");
                } catch (Exception | AssertionError e) {
                    return false;
                }
            }, () -> "status from " + at);
            awaitStatus(at, leader, "Observer");
            produceAndConsume(at, topic, 10);
            // remove-controller of a follower: node 4 votes no more and stays an observer.
            if (leader != JOINER) {
                tool("MetadataQuorumCommand", at, "remove-controller",
                    "--controller-id", String.valueOf(JOINER), "--controller-directory-id", dirId);
            }
            awaitStatus(at, JOINER, "Observer");
            Run missing = run("MetadataQuorumCommand", at, "remove-controller",
                "--controller-id", String.valueOf(JOINER), "--controller-directory-id", dirId);
            assertNotEquals(0, missing.exit());
            assertTrue(missing.err().contains("Cannot remove voter"), missing.err());
            produceAndConsume(at, topic, 15);
        }
    }
}

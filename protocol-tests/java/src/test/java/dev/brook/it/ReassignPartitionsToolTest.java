package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.errors.InvalidReplicaAssignmentException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * Kafka 4.4's own {@code kafka-reassign-partitions.sh} ({@code org.apache.kafka.tools.reassign.ReassignPartitionsCommand})
 * and {@code kafka-topics.sh --create --replica-assignment} ({@code TopicCommand}), both from kafka-tools 4.4.0 and run
 * as child processes as {@link OpsToolsTest} runs its tools, against a 4-node Brook cluster: a partition created on
 * brokers 1,2,3 moves to 2,3,4 with {@code --execute --throttle}, {@code --verify} reports it completed and clears the
 * throttles; manual assignments are validated as Kafka does, and a validate-only creation creates nothing.
 */
@ExtendWith(BrookCluster.LogOnFailure.class)
class ReassignPartitionsToolTest {
    static final Duration WAIT = Duration.ofSeconds(60);
    static final int RECORDS = 20;

    static BrookCluster cluster;

    @BeforeAll
    static void start() {
        cluster = BrookCluster.start("reassign-tool", 4, Map.of("auto.leader.rebalance.enable", "false"));
    }

    @AfterAll
    static void stop() {
        if (cluster != null) cluster.close();
    }

    static List<Integer> replicas(String topic) {
        return cluster.describe(topic, 0).replicas().stream().map(Node::id).toList();
    }

    @Test
    void executeThenVerifyMovesThePartition(@TempDir Path dir) throws Exception {
        String topic = Clients.uniqueTopic("reassign-tool");
        String created = KafkaTool.tool("TopicCommand", cluster.bootstrap(),
            "--create", "--topic", topic, "--replica-assignment", "1:2:3").out();
        assertTrue(created.contains("Created topic " + topic + "."), created);
        cluster.awaitIsr(topic, 0, Set.of(1, 2, 3), WAIT);
        assertEquals(List.of(1, 2, 3), replicas(topic));
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(cluster.bootstrap(),
                Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
            for (int i = 0; i < RECORDS; i++) {
                p.send(new ProducerRecord<>(topic, 0, null, ("v" + i).getBytes(UTF_8))).get(30, TimeUnit.SECONDS);
            }
        }

        Path plan = dir.resolve("plan.json");
        Files.writeString(plan, "{\"version\":1,\"partitions\":[{\"topic\":\"" + topic
            + "\",\"partition\":0,\"replicas\":[2,3,4],\"log_dirs\":[\"any\",\"any\",\"any\"]}]}");
        String tp = topic + "-0";
        String out = KafkaTool.tool("reassign.ReassignPartitionsCommand", cluster.bootstrap(),
            "--execute", "--reassignment-json-file", plan.toString(), "--throttle", "50000000").out();
        assertTrue(out.contains("Current partition replica assignment"), out);
        assertTrue(out.contains("\"replicas\":[1,2,3]"), out);
        assertTrue(out.contains("Warning: You must run --verify periodically"), out);
        assertTrue(out.contains("The inter-broker throttle limit was set to 50000000 B/s"), out);
        assertTrue(out.contains("Successfully started partition reassignment for " + tp), out);

        String[] last = {""};
        BrookCluster.await(WAIT, "--verify reports the reassignment completed", () -> {
            try {
                last[0] = KafkaTool.tool("reassign.ReassignPartitionsCommand", cluster.bootstrap(),
                    "--verify", "--reassignment-json-file", plan.toString()).out();
            } catch (Exception e) {
                throw new AssertionError(e);
            }
            return last[0].contains("Reassignment of partition " + tp + " is completed.");
        }, () -> last[0]);
        // The tool clears the brokers DescribeCluster lists (the live ones) plus the targets: on a loaded machine
        // node 1 may be fenced for a moment, so only the targets are certain.
        assertTrue(last[0].matches("(?s).*Clearing broker-level throttles on brokers (1,)?2,3,4\\R.*"), last[0]);
        assertTrue(last[0].contains("Clearing topic-level throttles on topic " + topic), last[0]);
        assertEquals(List.of(2, 3, 4), replicas(topic));
        cluster.awaitIsr(topic, 0, Set.of(2, 3, 4), WAIT);
        BrookCluster.await(WAIT, "node 1 deleted its replica", () -> !Files.exists(cluster.partitionDir(1, topic, 0)),
            () -> cluster.partitionDir(1, topic, 0).toString());
    }

    @Test
    void manualAssignmentsAreValidated() throws Exception {
        String topic = Clients.uniqueTopic("assigned-tool");
        KafkaTool.Run r = KafkaTool.run("TopicCommand", cluster.bootstrap(),
            "--create", "--topic", topic, "--replica-assignment", "1:9");
        assertEquals(1, r.exit(), r.out() + r.err());
        assertTrue((r.out() + r.err()).contains("InvalidReplicaAssignmentException"), r.out() + r.err());

        // validate-only: answered as if created, nothing created; then created for real.
        NewTopic assigned = new NewTopic(topic, Map.of(0, List.of(4, 1), 1, List.of(2, 3)));
        cluster.admin().createTopics(List.of(assigned), new CreateTopicsOptions().validateOnly(true))
            .all().get(30, TimeUnit.SECONDS);
        assertFalse(cluster.admin().listTopics().names().get(30, TimeUnit.SECONDS).contains(topic));
        NewTopic twice = new NewTopic(topic, Map.of(0, List.of(1, 1)));
        ExecutionException e = assertThrows(ExecutionException.class, () -> cluster.admin()
            .createTopics(List.of(twice), new CreateTopicsOptions().validateOnly(true)).all().get(30, TimeUnit.SECONDS));
        assertInstanceOf(InvalidReplicaAssignmentException.class, e.getCause());
        cluster.admin().createTopics(List.of(assigned)).all().get(30, TimeUnit.SECONDS);
        BrookCluster.await(WAIT, "partition 1 on 2,3", () -> {
            try {
                return cluster.describe(topic, 1).replicas().stream().map(Node::id).toList().equals(List.of(2, 3));
            } catch (RuntimeException ex) {
                return false;
            }
        }, () -> topic);
        assertEquals(List.of(4, 1), replicas(topic));
    }
}

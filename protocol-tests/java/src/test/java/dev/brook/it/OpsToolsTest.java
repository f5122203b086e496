package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static dev.brook.it.KafkaTool.run;
import static dev.brook.it.KafkaTool.tool;

import com.fasterxml.jackson.databind.JsonNode;
import dev.brook.it.KafkaTool.Run;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Kafka 4.4's own operations tools against a 3-node Brook cluster, run as child processes with the test classpath
 * exactly as {@code kafka-metadata-quorum.sh} and {@code kafka-log-dirs.sh} run them
 * ({@code org.apache.kafka.tools.MetadataQuorumCommand} and {@code LogDirsCommand} from kafka-tools 4.4.0):
 * {@code describe --status} and {@code --replication} from every node's address (DescribeQuorum, answered with the
 * Raft leader's view wherever it is asked), and {@code --describe} of the log directories (DescribeLogDirs on each
 * broker): each node lists exactly the partitions it replicates, with the same size on every replica.
 */
@ExtendWith(BrookCluster.LogOnFailure.class)
class OpsToolsTest {
    static final int PARTITIONS = 3;
    static final int RECORDS_PER_PARTITION = 10;

    static BrookCluster cluster;
    static String topic;

    @BeforeAll
    static void start() throws Exception {
        cluster = BrookCluster.start("ops-tools", 3);
        topic = Clients.uniqueTopic("ops-tools");
        // RF 2 over 3 nodes: each node hosts a different subset of the partitions.
        cluster.createTopic(topic, PARTITIONS, 2, Map.of());
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(cluster.bootstrap(),
                Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
            for (int i = 0; i < PARTITIONS * RECORDS_PER_PARTITION; i++) {
                p.send(new ProducerRecord<>(topic, i % PARTITIONS, null, ("v" + i).getBytes(UTF_8)))
                    .get(30, TimeUnit.SECONDS);
            }
        }
    }

    @AfterAll
    static void stop() {
        if (cluster != null) cluster.close();
    }

    /** The {@code Key: value} lines of {@code describe --status}. */
    static Map<String, String> status(String bootstrap) throws Exception {
        Map<String, String> fields = new LinkedHashMap<>();
        for (String line : tool("MetadataQuorumCommand", bootstrap, "describe", "--status").out().split("\n")) {
            int colon = line.indexOf(':');
            if (colon > 0) fields.put(line.substring(0, colon).strip(), line.substring(colon + 1).strip());
        }
        return fields;
    }

    @Test
    void describeStatusGivesTheSameLeaderFromEveryNode() throws Exception {
        Map<Integer, Map<String, String>> byNode = new TreeMap<>();
        for (int id : cluster.ids()) byNode.put(id, status(cluster.bootstrap(id)));
        Map<String, String> first = byNode.values().iterator().next();
        int leader = Integer.parseInt(first.get("LeaderId"));
        assertTrue(cluster.ids().contains(leader), first.toString());
        assertTrue(Integer.parseInt(first.get("LeaderEpoch")) >= 1, first.toString());
        assertTrue(Long.parseLong(first.get("HighWatermark")) > 0, first.toString());
        String voters = first.get("CurrentVoters");
        for (int id : cluster.ids()) {
            assertTrue(voters.contains("\"id\": " + id + ","), voters);
        }
        assertTrue(voters.contains("CONTROLLER://127.0.0.1:"), "each voter's controller endpoint: " + voters);
        assertEquals("[]", first.get("CurrentObservers"), first.toString());
        for (Map.Entry<Integer, Map<String, String>> e : byNode.entrySet()) {
            assertEquals(first.get("LeaderId"), e.getValue().get("LeaderId"), "asked node " + e.getKey());
            assertEquals(first.get("LeaderEpoch"), e.getValue().get("LeaderEpoch"), "asked node " + e.getKey());
        }
    }

    @Test
    void describeReplicationListsTheLeaderAndBothFollowers() throws Exception {
        int leader = Integer.parseInt(status(cluster.bootstrap()).get("LeaderId"));
        String[] lines = tool("MetadataQuorumCommand", cluster.bootstrap(), "describe", "--replication")
            .out().strip().split("\n");
        List<String> head = Arrays.asList(lines[0].strip().split("\\s+"));
        assertEquals(List.of("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
            "LastCaughtUpTimestamp", "Status"), head);
        Map<Integer, Map<String, String>> rows = new TreeMap<>();
        for (int i = 1; i < lines.length; i++) {
            String[] cells = lines[i].strip().split("\\s+");
            assertEquals(head.size(), cells.length, lines[i]);
            Map<String, String> row = new HashMap<>();
            for (int c = 0; c < cells.length; c++) row.put(head.get(c), cells[c]);
            rows.put(Integer.parseInt(row.get("NodeId")), row);
        }
        assertEquals(cluster.ids(), rows.keySet(), "one row per voter: " + rows);
        assertEquals("Leader", rows.get(leader).get("Status"), rows.toString());
        for (Map.Entry<Integer, Map<String, String>> e : rows.entrySet()) {
            Map<String, String> row = e.getValue();
            if (e.getKey() != leader) assertEquals("Follower", row.get("Status"), rows.toString());
            assertTrue(Long.parseLong(row.get("LogEndOffset")) > 0, rows.toString());
            assertTrue(Long.parseLong(row.get("Lag")) >= 0, rows.toString());
            assertNotEquals("-1", row.get("LastFetchTimestamp"), "the leader has heard from every voter: " + rows);
        }
    }

    /** A single node has no metadata quorum: the tool fails at once with the broker's reason, without retrying. */
    @Test
    void describeStatusOnASingleNodeFailsWithTheReason() throws Exception {
        try (BrookBroker single = BrookBroker.start("ops-tools-single")) {
            Run r = run("MetadataQuorumCommand", single.bootstrap(), "describe", "--status");
            assertNotEquals(0, r.exit(), r.out() + r.err());
            String printed = r.out() + r.err();
            assertTrue(printed.contains("InvalidRequestException"), printed);
            assertTrue(printed.contains("without a metadata quorum"), printed);
        }
    }

    @Test
    void logDirsListEachBrokersReplicasWithTheirSizes() throws Exception {
        String out = tool("LogDirsCommand", cluster.bootstrap(), "--describe", "--topic-list", topic).out();
        assertTrue(out.contains("Received log directory information from brokers 1,2,3"), out);
        String json = Arrays.stream(out.split("\n")).filter(l -> l.startsWith("{")).findFirst()
            .orElseThrow(() -> new AssertionError("no JSON line in\n" + out));
        JsonNode brokers = new ObjectMapper().readTree(json).get("brokers");
        // What each broker says it hosts: partition name -> size.
        Map<Integer, Map<String, Long>> hosted = new TreeMap<>();
        for (JsonNode b : brokers) {
            Map<String, Long> sizes = new TreeMap<>();
            JsonNode dirs = b.get("logDirs");
            assertEquals(1, dirs.size(), "one log dir per broker: " + b);
            assertTrue(dirs.get(0).get("error").isNull(), b.toString());
            for (JsonNode p : dirs.get(0).get("partitions")) {
                assertEquals(0, p.get("offsetLag").asLong(), p.toString());
                assertEquals(false, p.get("isFuture").asBoolean(), p.toString());
                sizes.put(p.get("partition").asText(), p.get("size").asLong());
            }
            hosted.put(b.get("broker").asInt(), sizes);
        }
        assertEquals(cluster.ids(), hosted.keySet(), json);
        for (int p = 0; p < PARTITIONS; p++) {
            String name = topic + "-" + p;
            Set<Integer> replicas = cluster.describe(topic, p).replicas().stream().map(Node::id)
                .collect(Collectors.toCollection(TreeSet::new));
            Set<Integer> listing = hosted.entrySet().stream().filter(e -> e.getValue().containsKey(name))
                .map(Map.Entry::getKey).collect(Collectors.toCollection(TreeSet::new));
            assertEquals(replicas, listing, name + " is listed by exactly its replicas: " + json);
            Set<Long> sizes = listing.stream().map(id -> hosted.get(id).get(name)).collect(Collectors.toSet());
            assertEquals(1, sizes.size(), name + " has the same size on every replica: " + json);
            if (sizes.iterator().next() <= 0) fail(name + " is empty: " + json);
        }
    }
}

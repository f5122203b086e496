package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static dev.brook.it.KafkaTool.tool;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.utils.Utils;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Kafka 4.4's own client-side command-line tools, run by {@link KafkaTool} as their {@code kafka-*.sh} scripts run
 * them (main classes of {@code kafka-tools} 4.4.0 in a child JVM on the test classpath), each checked by what it
 * prints: {@code kafka-console-producer.sh} and {@code kafka-console-consumer.sh} ({@code ConsoleProducer},
 * {@code consumer.ConsoleConsumer}), {@code kafka-consumer-groups.sh} ({@code consumer.group.ConsumerGroupCommand}:
 * list, describe, reset-offsets, delete), {@code kafka-get-offsets.sh} ({@code GetOffsetShell}),
 * {@code kafka-producer-perf-test.sh} and {@code kafka-consumer-perf-test.sh} ({@code ProducerPerformance},
 * {@code ConsumerPerformance}) and {@code kafka-dump-log.sh} ({@code DumpLogSegments}) on every replica's segment
 * file, found through DescribeLogDirs.
 *
 * <p>Against a 3-node Brook cluster (topics with replication factor 3), or, with {@code -Dbootstrap.servers}, against
 * that broker (scripts/differential's one-node Kafka 4.4, replication factor 1): nothing here depends on which.
 */
@ExtendWith(BrookCluster.LogOnFailure.class)
class CliToolsTest {
    static final Duration WAIT = Clients.WAIT;

    static BrookCluster cluster;
    static String bootstrap;
    static int replicationFactor;

    @BeforeAll
    static void start() throws Exception {
        if (TestBrokers.isExternal()) {
            bootstrap = TestBrokers.externalBootstrap();
        } else {
            cluster = BrookCluster.start("cli-tools", 3, Map.of("group.initial.rebalance.delay.ms", "0"));
            bootstrap = cluster.bootstrap();
        }
        try (Admin admin = Clients.admin(bootstrap)) {
            int brokers = admin.describeCluster().nodes().get(WAIT.toMillis(), TimeUnit.MILLISECONDS).size();
            replicationFactor = Math.min(3, brokers);
        }
    }

    @AfterAll
    static void stop() {
        if (cluster != null) cluster.close();
    }

    static void createTopic(String topic, int partitions) throws Exception {
        try (Admin admin = Clients.admin(bootstrap)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) replicationFactor)))
                .all().get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
        }
        Clients.awaitPartitionsServed(bootstrap, topic, partitions);
    }

    /** Sends {@code values.get(p)} to partition p, one acknowledged record at a time (each its own batch). */
    static void produce(String topic, Map<Integer, List<String>> values) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
            for (Map.Entry<Integer, List<String>> e : values.entrySet()) {
                for (String v : e.getValue()) {
                    p.send(new ProducerRecord<>(topic, e.getKey(), null, v.getBytes(UTF_8)))
                        .get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
                }
            }
        }
    }

    static List<String> values(String prefix, int n) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < n; i++) out.add(prefix + i);
        return out;
    }

    static List<String> lines(String s) {
        return Arrays.stream(s.split("\n")).map(String::strip).filter(l -> !l.isEmpty()).toList();
    }

    /**
     * The rows of the first column-aligned table in {@code out} whose header line starts with {@code firstColumn}
     * (kafka-consumer-groups.sh pads each column to its widest cell, so a cell is the text under its header, and an
     * empty cell stays empty), up to the next blank line.
     */
    static List<Map<String, String>> table(String out, String firstColumn) {
        String[] ls = out.split("\n");
        int h = 0;
        while (h < ls.length && !ls[h].startsWith(firstColumn + " ")) h++;
        assertTrue(h < ls.length, "no table with a " + firstColumn + " column in\n" + out);
        String header = ls[h];
        List<String> names = Arrays.asList(header.strip().split("\\s+"));
        int[] starts = new int[names.size()];
        for (int i = 0, from = 0; i < names.size(); i++) {
            starts[i] = header.indexOf(names.get(i), from);
            from = starts[i] + names.get(i).length();
        }
        List<Map<String, String>> rows = new ArrayList<>();
        for (int r = h + 1; r < ls.length && !ls[r].isBlank(); r++) {
            String line = ls[r];
            Map<String, String> row = new LinkedHashMap<>();
            for (int i = 0; i < names.size(); i++) {
                int a = Math.min(starts[i], line.length());
                int b = i + 1 < names.size() ? Math.min(starts[i + 1], line.length()) : line.length();
                if (a > 0 && a < line.length() && line.charAt(a - 1) != ' ') {
                    throw new AssertionError("column " + names.get(i) + " is not aligned in row\n" + line + "\nof\n"
                        + out);
                }
                row.put(names.get(i), line.substring(a, b).strip());
            }
            rows.add(row);
        }
        return rows;
    }

    // ---------------------------------------------------------------------------------------------------------
    // kafka-console-producer.sh, kafka-console-consumer.sh
    // ---------------------------------------------------------------------------------------------------------

    /**
     * Twelve {@code key:value} lines on the console producer's standard input land each on the partition the default
     * partitioner picks for its key (murmur2), in input order; the console consumer from the beginning prints exactly
     * those records, with partition, offset, key and value, and counts them.
     */
    @Test
    void consoleConsumerPrintsWhatTheConsoleProducerRead() throws Exception {
        int partitions = 3;
        int n = 12;
        String t = Clients.uniqueTopic("cli-console");
        createTopic(t, partitions);
        StringBuilder input = new StringBuilder();
        // partition -> "offset key value", in the order the producer read them
        Map<Integer, List<String>> expected = new TreeMap<>();
        for (int i = 0; i < n; i++) {
            String key = "key-" + i;
            input.append(key).append(":value-").append(i).append('\n');
            int p = Utils.toPositive(Utils.murmur2(key.getBytes(UTF_8))) % partitions;
            List<String> onP = expected.computeIfAbsent(p, x -> new ArrayList<>());
            onP.add(onP.size() + " " + key + " value-" + i);
        }
        assertTrue(expected.size() > 1, "the keys spread over partitions: " + expected);

        // --reader-property and --formatter-property: 4.4's names for the deprecated --property of each tool.
        tool("ConsoleProducer", bootstrap, input.toString().getBytes(UTF_8), "--topic", t,
            "--reader-property", "parse.key=true", "--reader-property", "key.separator=:");

        KafkaTool.Run r = tool("consumer.ConsoleConsumer", bootstrap, "--topic", t, "--from-beginning",
            "--max-messages", String.valueOf(n), "--timeout-ms", String.valueOf(WAIT.toMillis()),
            "--formatter-property", "print.key=true", "--formatter-property", "print.partition=true",
            "--formatter-property", "print.offset=true");
        Pattern line = Pattern.compile("Partition:(\\d+)\tOffset:(\\d+)\t(\\S+)\t(\\S+)");
        Map<Integer, List<String>> printed = new TreeMap<>();
        List<String> out = lines(r.out());
        for (String l : out) {
            Matcher m = line.matcher(l);
            assertTrue(m.matches(), "a record line: " + l);
            printed.computeIfAbsent(Integer.parseInt(m.group(1)), x -> new ArrayList<>())
                .add(m.group(2) + " " + m.group(3) + " " + m.group(4));
        }
        assertEquals(n, out.size(), r.out());
        assertEquals(expected, printed);
        assertTrue(r.err().contains("Processed a total of " + n + " messages"), r.err());
    }

    // ---------------------------------------------------------------------------------------------------------
    // kafka-consumer-groups.sh
    // ---------------------------------------------------------------------------------------------------------

    static KafkaTool.Run groups(String... args) throws Exception {
        return tool("consumer.group.ConsumerGroupCommand", bootstrap, args);
    }

    /** {@code --describe --group g}: partition -> "CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID". */
    static Map<Integer, String> describeOffsets(String group, String topic) throws Exception {
        Map<Integer, String> got = new TreeMap<>();
        for (Map<String, String> row : table(groups("--describe", "--group", group).out(), "GROUP")) {
            assertEquals(group, row.get("GROUP"), row.toString());
            assertEquals(topic, row.get("TOPIC"), row.toString());
            got.put(Integer.parseInt(row.get("PARTITION")), row.get("CURRENT-OFFSET") + " " + row.get("LOG-END-OFFSET")
                + " " + row.get("LAG") + " " + row.get("CONSUMER-ID"));
        }
        return got;
    }

    static Set<String> listedGroups() throws Exception {
        return Set.copyOf(lines(groups("--list").out()));
    }

    /**
     * A group whose offsets the console consumer committed (5 of 5 on partition 0, 3 of 5 on partition 1 once two
     * more records arrive), empty once the consumer left: listed, described with its offsets and lags, its state
     * Empty; a dry-run reset to latest prints the new offsets and commits nothing, a reset to earliest commits 0 on
     * both; deleted, it is no longer listed.
     */
    @Test
    void consumerGroupsListDescribeResetAndDelete() throws Exception {
        String t = Clients.uniqueTopic("cli-groups");
        String g = t + "-group";
        createTopic(t, 2);
        produce(t, Map.of(0, values("a", 5), 1, values("b", 3)));
        KafkaTool.Run consumed = tool("consumer.ConsoleConsumer", bootstrap, "--topic", t, "--group", g,
            "--from-beginning", "--max-messages", "8", "--timeout-ms", String.valueOf(WAIT.toMillis()));
        assertEquals(8, lines(consumed.out()).size(), consumed.out());
        produce(t, Map.of(1, values("c", 2)));

        assertTrue(listedGroups().contains(g), "--list");
        assertEquals(Map.of(0, "5 5 0 -", 1, "3 5 2 -"), describeOffsets(g, t));
        List<Map<String, String>> states = table(groups("--list", "--state").out(), "GROUP").stream()
            .filter(row -> g.equals(row.get("GROUP"))).toList();
        assertEquals(List.of(Map.of("GROUP", g, "STATE", "Empty")), states);

        Map<Integer, String> dryRun = new TreeMap<>();
        for (Map<String, String> row : table(groups("--reset-offsets", "--group", g, "--topic", t, "--to-latest",
                "--dry-run").out(), "GROUP")) {
            dryRun.put(Integer.parseInt(row.get("PARTITION")), row.get("NEW-OFFSET"));
        }
        assertEquals(Map.of(0, "5", 1, "5"), dryRun);
        assertEquals(Map.of(0, "5 5 0 -", 1, "3 5 2 -"), describeOffsets(g, t), "a dry run commits nothing");

        Map<Integer, String> reset = new TreeMap<>();
        for (Map<String, String> row : table(groups("--reset-offsets", "--group", g, "--topic", t, "--to-earliest",
                "--execute").out(), "GROUP")) {
            assertEquals(g, row.get("GROUP"), row.toString());
            reset.put(Integer.parseInt(row.get("PARTITION")), row.get("NEW-OFFSET"));
        }
        assertEquals(Map.of(0, "0", 1, "0"), reset);
        assertEquals(Map.of(0, "0 5 5 -", 1, "0 5 5 -"), describeOffsets(g, t));

        String deleted = groups("--delete", "--group", g).out();
        assertTrue(deleted.contains("Deletion of requested consumer groups ('" + g + "') was successful."), deleted);
        assertFalse(listedGroups().contains(g), "--list after --delete");
    }

    /** A consumer in {@code group} subscribed to {@code topic}, once it has been assigned all its partitions. */
    static KafkaConsumer<byte[], byte[]> activeMember(String group, String topic, int partitions) {
        KafkaConsumer<byte[], byte[]> c = GroupSupport.groupConsumer(bootstrap, group,
            Map.of(ConsumerConfig.CLIENT_ID_CONFIG, group + "-client"));
        c.subscribe(List.of(topic));
        GroupSupport.await("the member is assigned all of " + topic, WAIT, () -> {
            c.poll(Duration.ofMillis(100));
            return c.assignment().size() == partitions;
        }, () -> "assignment " + c.assignment());
        return c;
    }

    /**
     * A group with a live member: described with the member's id and client id on each partition it owns and its
     * committed offsets; as in Kafka, resetting its offsets is refused while it is Stable (the offsets stay), and so
     * is deleting it (GroupNotEmptyException; it stays listed).
     */
    @Test
    void aGroupWithAMemberIsDescribedAndCannotBeResetOrDeleted() throws Exception {
        String t = Clients.uniqueTopic("cli-active");
        String g = t + "-group";
        createTopic(t, 2);
        produce(t, Map.of(0, values("a", 4), 1, values("b", 2)));
        try (KafkaConsumer<byte[], byte[]> c = activeMember(g, t, 2)) {
            Map<TopicPartition, OffsetAndMetadata> commit = Map.of(
                new TopicPartition(t, 0), new OffsetAndMetadata(3), new TopicPartition(t, 1), new OffsetAndMetadata(1));
            c.commitSync(commit, WAIT);
            String member = c.groupMetadata().memberId();

            List<Map<String, String>> rows = table(groups("--describe", "--group", g).out(), "GROUP");
            assertEquals(2, rows.size(), rows.toString());
            Map<Integer, String> offsets = new TreeMap<>();
            for (Map<String, String> row : rows) {
                assertEquals(member, row.get("CONSUMER-ID"), row.toString());
                assertEquals(g + "-client", row.get("CLIENT-ID"), row.toString());
                offsets.put(Integer.parseInt(row.get("PARTITION")),
                    row.get("CURRENT-OFFSET") + " " + row.get("LOG-END-OFFSET") + " " + row.get("LAG"));
            }
            assertEquals(Map.of(0, "3 4 1", 1, "1 2 1"), offsets);

            String refused = groups("--reset-offsets", "--group", g, "--topic", t, "--to-earliest", "--execute").out();
            assertTrue(refused.contains("Assignments can only be reset if the group '" + g
                + "' is inactive, but the current state is Stable."), refused);
            assertTrue(table(refused, "GROUP").isEmpty(), "no offsets reset:\n" + refused);
            try (Admin admin = Clients.admin(bootstrap)) {
                assertEquals(commit, admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata()
                    .get(WAIT.toMillis(), TimeUnit.MILLISECONDS).entrySet().stream()
                    .collect(Collectors.toMap(Map.Entry::getKey, e -> new OffsetAndMetadata(e.getValue().offset()))));
            }

            String notDeleted = groups("--delete", "--group", g).out();
            assertTrue(notDeleted.contains("Group '" + g + "' could not be deleted due to: "
                + "org.apache.kafka.common.errors.GroupNotEmptyException"), notDeleted);
            assertTrue(listedGroups().contains(g), "still listed");
        }
    }

    /**
     * The HOST column of a group's member is the address the member connected from, as Kafka records it at
     * JoinGroup ({@code /127.0.0.1}).
     */
    @Test
    void describeShowsTheHostOfEachMember() throws Exception {
        String t = Clients.uniqueTopic("cli-host");
        String g = t + "-group";
        createTopic(t, 1);
        try (KafkaConsumer<byte[], byte[]> c = activeMember(g, t, 1)) {
            List<Map<String, String>> rows = table(groups("--describe", "--group", g).out(), "GROUP");
            assertEquals(1, rows.size(), rows.toString());
            assertEquals(c.groupMetadata().memberId(), rows.get(0).get("CONSUMER-ID"), rows.toString());
            assertEquals("/127.0.0.1", rows.get(0).get("HOST"), rows.toString());
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // kafka-get-offsets.sh
    // ---------------------------------------------------------------------------------------------------------

    /** The {@code topic:partition:offset} lines of GetOffsetShell, as partition -> offset. */
    static Map<Integer, Long> getOffsets(String topic, String... args) throws Exception {
        List<String> all = new ArrayList<>(List.of("--topic", topic));
        all.addAll(List.of(args));
        Map<Integer, Long> got = new TreeMap<>();
        for (String l : lines(tool("GetOffsetShell", bootstrap, all.toArray(new String[0])).out())) {
            String[] cells = l.split(":");
            assertEquals(3, cells.length, "topic:partition:offset, not " + l);
            assertEquals(topic, cells[0], l);
            got.put(Integer.parseInt(cells[1]), Long.parseLong(cells[2]));
        }
        return got;
    }

    /**
     * Latest offsets (the default and {@code --time -1}), the first offset at or after a timestamp, and earliest
     * offsets ({@code --time -2}) after DeleteRecords moved one partition's log start; {@code --partitions} narrows
     * the answer.
     */
    @Test
    void getOffsetShellPrintsLatestEarliestAndByTimestamp() throws Exception {
        String t = Clients.uniqueTopic("cli-offsets");
        createTopic(t, 3);
        long base = System.currentTimeMillis() - 60_000;
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
            for (int i = 0; i < 4; i++) {
                p.send(new ProducerRecord<>(t, 0, base + 1000L * i, null, ("a" + i).getBytes(UTF_8)))
                    .get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
            }
            for (int i = 0; i < 7; i++) {
                p.send(new ProducerRecord<>(t, 2, null, ("c" + i).getBytes(UTF_8)))
                    .get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
            }
        }
        assertEquals(Map.of(0, 4L, 1, 0L, 2, 7L), getOffsets(t));
        assertEquals(Map.of(0, 4L, 1, 0L, 2, 7L), getOffsets(t, "--time", "-1"));
        assertEquals(Map.of(0, 2L), getOffsets(t, "--partitions", "0", "--time", String.valueOf(base + 1500)),
            "the first record at or after the timestamp is offset 2");

        try (Admin admin = Clients.admin(bootstrap)) {
            admin.deleteRecords(Map.of(new TopicPartition(t, 2), RecordsToDelete.beforeOffset(3)))
                .all().get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
        }
        assertEquals(Map.of(0, 0L, 1, 0L, 2, 3L), getOffsets(t, "--time", "-2"));
        assertEquals(Map.of(0, 0L, 2, 3L), getOffsets(t, "--partitions", "0,2", "--time", "-2"));
    }

    // ---------------------------------------------------------------------------------------------------------
    // kafka-producer-perf-test.sh, kafka-consumer-perf-test.sh
    // ---------------------------------------------------------------------------------------------------------

    static final Pattern PERF_SUMMARY = Pattern.compile("(\\d+) records sent, [\\d.]+ records/sec \\([\\d.]+ MB/sec\\), "
        + "[\\d.]+ ms avg latency, [\\d.]+ ms max latency, \\d+ ms 50th, \\d+ ms 95th, \\d+ ms 99th, \\d+ ms 99\\.9th\\.");

    /**
     * ProducerPerformance sends 20,000 records of 100 bytes with acks=all and reports all 20,000 in its summary; the
     * topic's end offsets add up to 20,000; ConsumerPerformance then reports consuming 20,000 records, 1.9073 MB.
     */
    @Test
    void producerAndConsumerPerformanceCountEveryRecord() throws Exception {
        int n = 20_000;
        String t = Clients.uniqueTopic("cli-perf");
        createTopic(t, 3);
        KafkaTool.Run produced = tool("ProducerPerformance", bootstrap, "--topic", t, "--num-records",
            String.valueOf(n), "--record-size", "100", "--throughput", "-1", "--command-property", "acks=all");
        List<String> summaries = lines(produced.out()).stream().filter(l -> PERF_SUMMARY.matcher(l).matches())
            .toList();
        assertEquals(1, summaries.size(), "one summary line in\n" + produced.out());
        Matcher m = PERF_SUMMARY.matcher(summaries.get(0));
        assertTrue(m.matches());
        assertEquals(n, Integer.parseInt(m.group(1)), summaries.get(0));

        Map<Integer, Long> ends = getOffsets(t);
        assertEquals(Set.of(0, 1, 2), ends.keySet(), ends.toString());
        assertEquals(n, ends.values().stream().mapToLong(Long::longValue).sum(), ends.toString());

        KafkaTool.Run consumed = tool("ConsumerPerformance", bootstrap, "--topic", t, "--num-records",
            String.valueOf(n), "--timeout", String.valueOf(WAIT.toMillis()));
        List<String> csv = lines(consumed.out());
        assertEquals(2, csv.size(), "a header and one row:\n" + consumed.out());
        List<String> head = Arrays.stream(csv.get(0).split(",")).map(String::strip).toList();
        List<String> row = Arrays.stream(csv.get(1).split(",")).map(String::strip).toList();
        assertEquals(head.size(), row.size(), consumed.out());
        assertEquals(String.valueOf(n), row.get(head.indexOf("data.consumed.in.nMsg")), consumed.out());
        assertEquals("1.9073", row.get(head.indexOf("data.consumed.in.MB")), "20,000 x 100 bytes: " + consumed.out());
    }

    // ---------------------------------------------------------------------------------------------------------
    // kafka-dump-log.sh
    // ---------------------------------------------------------------------------------------------------------

    /** Each replica's first segment file of {@code topic}-0 (broker id -> path), from DescribeLogDirs. */
    static Map<Integer, Path> segmentFiles(Admin admin, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        List<Integer> ids = admin.describeCluster().nodes().get(WAIT.toMillis(), TimeUnit.MILLISECONDS).stream()
            .map(Node::id).toList();
        Map<Integer, Path> files = new TreeMap<>();
        Map<Integer, Map<String, LogDirDescription>> dirs =
            admin.describeLogDirs(ids).allDescriptions().get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
        dirs.forEach((id, byDir) -> byDir.forEach((dir, d) -> {
            if (d.replicaInfos().containsKey(tp)) {
                files.put(id, Paths.get(dir, topic + "-0", "00000000000000000000.log"));
            }
        }));
        return files;
    }

    /** Each replica's size of {@code topic}-0 as DescribeLogDirs reports it (broker id -> bytes). */
    static Map<Integer, Long> replicaSizes(Admin admin, String topic) {
        TopicPartition tp = new TopicPartition(topic, 0);
        try {
            List<Integer> ids = admin.describeCluster().nodes().get(WAIT.toMillis(), TimeUnit.MILLISECONDS).stream()
                .map(Node::id).toList();
            Map<Integer, Long> sizes = new TreeMap<>();
            admin.describeLogDirs(ids).allDescriptions().get(WAIT.toMillis(), TimeUnit.MILLISECONDS)
                .forEach((id, byDir) -> byDir.values().forEach(d -> {
                    ReplicaInfo r = d.replicaInfos().get(tp);
                    if (r != null) sizes.put(id, r.size());
                }));
            return sizes;
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /**
     * Five records sent one at a time (five uncompressed batches) and five more in lz4 batches, on one partition;
     * once every replica holds the same bytes, {@code DumpLogSegments --print-data-log} of each replica's segment
     * file lists every record at its offset with its key and payload, every batch valid with the codec it was sent
     * with, no invalid bytes and no offset gaps, and the same batches on every replica.
     */
    @Test
    void dumpLogReadsEveryReplicasSegment() throws Exception {
        String t = Clients.uniqueTopic("cli-dump");
        createTopic(t, 1);
        List<String> expectRecords = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
            for (int i = 0; i < 5; i++) {
                p.send(new ProducerRecord<>(t, 0, ("k" + i).getBytes(UTF_8), ("plain-" + i).getBytes(UTF_8)))
                    .get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
                expectRecords.add(i + " k" + i + " plain-" + i);
            }
        }
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of(ProducerConfig.ACKS_CONFIG, "all",
                ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4", ProducerConfig.LINGER_MS_CONFIG, "1000"))) {
            for (int i = 5; i < 10; i++) {
                p.send(new ProducerRecord<>(t, 0, ("k" + i).getBytes(UTF_8), ("lz4-" + i).getBytes(UTF_8)));
                expectRecords.add(i + " k" + i + " lz4-" + i);
            }
            Clients.flush(p, WAIT);
        }

        Map<Integer, Path> files;
        try (Admin admin = Clients.admin(bootstrap)) {
            BrookCluster.await(WAIT, "every replica of " + t + "-0 holds the same bytes", () -> {
                Map<Integer, Long> s = replicaSizes(admin, t);
                return s.size() == replicationFactor && s.values().stream().distinct().count() == 1
                    && s.values().iterator().next() > 0;
            }, () -> replicaSizes(admin, t).toString());
            files = segmentFiles(admin, t);
        }
        assertEquals(replicationFactor, files.size(), files.toString());

        Pattern record = Pattern.compile("\\| offset: (\\d+) .* key: (\\S+) payload: (\\S+)");
        Pattern batch = Pattern.compile("baseOffset: (\\d+) lastOffset: (\\d+) count: (\\d+) .* compresscodec: (\\S+) "
            + "crc: \\d+ isvalid: (\\S+)");
        Map<Integer, List<String>> batchesByReplica = new TreeMap<>();
        for (Map.Entry<Integer, Path> f : files.entrySet()) {
            assertTrue(Files.isRegularFile(f.getValue()), "node " + f.getKey() + ": " + f.getValue());
            String out = tool("DumpLogSegments", null, "--files", f.getValue().toString(), "--print-data-log").out();
            List<String> ls = lines(out);
            assertEquals("Dumping " + f.getValue(), ls.get(0), out);
            assertEquals("Log starting offset: 0", ls.get(1), out);
            List<String> records = new ArrayList<>();
            List<String> batches = new ArrayList<>();
            for (String l : ls.subList(2, ls.size())) {
                Matcher r = record.matcher(l);
                Matcher b = batch.matcher(l);
                if (r.matches()) {
                    records.add(r.group(1) + " " + r.group(2) + " " + r.group(3));
                } else if (b.matches()) {
                    assertEquals("true", b.group(5), "a valid batch: " + l);
                    long base = Long.parseLong(b.group(1));
                    assertEquals(Long.parseLong(b.group(2)) - base + 1, Long.parseLong(b.group(3)), l);
                    assertEquals(base < 5 ? "none" : "lz4", b.group(4), l);
                    if (base < 5) assertEquals(b.group(1), b.group(2), "one record per uncompressed batch: " + l);
                    batches.add(l);
                } else {
                    throw new AssertionError("node " + f.getKey() + ": neither a batch nor a record: " + l + "\n" + out);
                }
            }
            assertEquals(expectRecords, records, "node " + f.getKey() + ":\n" + out);
            assertTrue(batches.size() >= 6, "five uncompressed batches and at least one lz4 batch:\n" + out);
            batchesByReplica.put(f.getKey(), batches);
        }
        List<String> first = batchesByReplica.values().iterator().next();
        batchesByReplica.forEach((id, b) -> assertEquals(first, b, "node " + id + "'s batches"));
    }
}

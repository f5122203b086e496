package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Durable share-group state (KIP-932's share coordinator on {@code __share_group_state}) with Kafka 4.4's
 * {@code KafkaShareConsumer}: a member acknowledges some records and releases others, the broker is killed
 * (SIGKILL) and started again, and a new member of the group gets exactly the released records, each with its
 * delivery count one higher; the acknowledged ones never come again. Without durable state the restarted broker
 * would start the share-partition again at the log end and deliver nothing.
 *
 * <p>One node, so that it runs on Kafka 4.4 behind {@code kafka-as-brook.sh} too ({@code scripts/differential});
 * the 3-node cases (the partition leader, then the share coordinator's node killed) are the raw-wire test
 * {@code share_state_survives_the_leader_and_the_share_coordinator} in {@code protocol-tests/tests/share_wire.rs}.
 */
@ExtendWith(BrokerLogOnFailure.class)
class ShareStateRestartTest {
    static final Duration WAIT = Duration.ofSeconds(60);

    @Test
    void acknowledgedStayDoneAndReleasedComeBackCountedAfterAKill() throws Exception {
        assumeFalse(TestBrokers.isExternal(), "kill -9 needs a broker started by the harness");
        Map<String, String> props = brokerProps(3);
        try (BrookBroker broker = BrookBroker.start("share-state", props)) {
            ShareGroupsTest.bootstrap = broker.bootstrap();
            String group = "durable";
            String topic;
            try (KafkaShareConsumer<byte[], byte[]> c = ShareGroupsTest.consumer(group, true, 500)) {
                topic = ShareGroupsTest.primedTopic("share-durable", c, true);
                List<String> sent = ShareGroupsTest.values("d", 10);
                produceOneBatch(broker.bootstrap(), topic, sent);
                List<ConsumerRecord<byte[], byte[]>> got = ShareGroupsTest.pollRecords(c, WAIT);
                assertEquals(sent, got.stream().map(ShareGroupsTest::value).toList());
                for (ConsumerRecord<byte[], byte[]> r : got) {
                    assertEquals(1, ShareGroupsTest.deliveries(r));
                    boolean accept = ShareGroupsTest.value(r).compareTo("d5") < 0;
                    c.acknowledge(r, accept ? AcknowledgeType.ACCEPT : AcknowledgeType.RELEASE);
                }
                c.commitSync();
                c.close(Duration.ofSeconds(5));
            }
            broker.kill();
            broker.startAgain();
            try (KafkaShareConsumer<byte[], byte[]> c = ShareGroupsTest.consumer(group, true, 500)) {
                c.subscribe(List.of(topic));
                List<ConsumerRecord<byte[], byte[]>> again = ShareGroupsTest.pollRecords(c, WAIT);
                assertEquals(ShareGroupsTest.values("d", 10).subList(5, 10),
                    again.stream().map(ShareGroupsTest::value).toList(), "only the released records, in order");
                for (ConsumerRecord<byte[], byte[]> r : again) {
                    assertEquals(2, ShareGroupsTest.deliveries(r), "delivered before the kill: " + ShareGroupsTest.value(r));
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                c.commitSync();
            }
        }
    }

    /**
     * Kafka 4.4's {@code kafka-dump-log.sh --share-group-state-decoder} ({@code DumpLogSegments}) reads the
     * {@code __share_group_state} segment the broker wrote for a share group whose member accepted every record:
     * every record decodes as Kafka's ShareSnapshot (type 0) or ShareUpdate (type 1) with Kafka 4.4's fields
     * (a snapshot's state epoch, create and write timestamps), the first for the share-partition is a snapshot, and
     * the records hold the last consumed offset Acknowledged (or a start offset past it). A segment in another layout
     * fails the decoder (it throws, or prints fields that do not match).
     */
    @Test
    void kafkasDumpLogDecodesTheShareGroupStateLog() throws Exception {
        assumeFalse(TestBrokers.isExternal(), "reads the files of a broker started by the harness");
        Map<String, String> props = brokerProps(1);
        String group = "dumped";
        long lastOffset;
        String topic;
        try (BrookBroker broker = BrookBroker.start("share-dump", props)) {
            ShareGroupsTest.bootstrap = broker.bootstrap();
            try (KafkaShareConsumer<byte[], byte[]> c = ShareGroupsTest.consumer(group, true, 500)) {
                topic = ShareGroupsTest.primedTopic("share-dump", c, true);
                produceOneBatch(broker.bootstrap(), topic, ShareGroupsTest.values("v", 4));
                List<ConsumerRecord<byte[], byte[]>> got = ShareGroupsTest.pollRecords(c, WAIT);
                assertEquals(4, got.size());
                lastOffset = got.get(3).offset();
                for (ConsumerRecord<byte[], byte[]> r : got) c.acknowledge(r, AcknowledgeType.ACCEPT);
                c.commitSync();
                c.close(Duration.ofSeconds(5));
            }
            broker.stop();
            Path dir = broker.dir().resolve("data").resolve("__share_group_state-0");
            List<Path> segments;
            try (Stream<Path> files = Files.list(dir)) {
                segments = files.filter(f -> f.toString().endsWith(".log")).sorted().toList();
            }
            assertTrue(!segments.isEmpty(), "no segment in " + dir);
            List<String> records = new ArrayList<>();
            for (Path f : segments) {
                String out = KafkaTool.tool("DumpLogSegments", null, "--files", f.toString(),
                    "--share-group-state-decoder").out();
                for (String l : CliToolsTest.lines(out)) {
                    if (l.startsWith("| offset: ")) records.add(l);
                }
            }
            assertTrue(records.size() >= 2, "a snapshot and an update at least: " + records);
            // DumpLogSegments prints a record's type and version as strings, its fields in the JSON's order.
            Pattern rec = Pattern.compile("\\| offset: \\d+ .*key: \\{\"type\":\"(\\d)\",\"data\":\\{\"groupId\":\""
                + group + "\",\"topicId\":\"[^\"]+\",\"partition\":0\\}\\} payload: (.*)");
            Pattern snapshot = Pattern.compile("\\{\"version\":\"0\",\"data\":\\{\"snapshotEpoch\":\\d+,\"stateEpoch\":\\d+,"
                + "\"leaderEpoch\":-?\\d+,\"startOffset\":(-?\\d+),(?:\"deliveryCompleteCount\":\\d+,)?"
                + "\"createTimestamp\":[1-9]\\d*,\"writeTimestamp\":[1-9]\\d*,\"stateBatches\":(\\[.*\\])\\}\\}");
            Pattern update = Pattern.compile("\\{\"version\":\"0\",\"data\":\\{\"snapshotEpoch\":\\d+,"
                + "\"leaderEpoch\":-?\\d+,\"startOffset\":(-?\\d+),(?:\"deliveryCompleteCount\":\\d+,)?"
                + "\"stateBatches\":(\\[.*\\])\\}\\}");
            Pattern acked = Pattern.compile("\\{\"firstOffset\":\\d+,\"lastOffset\":(\\d+),\"deliveryState\":2,");
            String first = null;
            boolean lastDone = false;
            for (String l : records) {
                Matcher m = rec.matcher(l);
                assertTrue(m.matches(), "a decoded share state record: " + l);
                if (first == null) first = m.group(1);
                Matcher v = (m.group(1).equals("0") ? snapshot : update).matcher(m.group(2));
                assertTrue(v.matches(), "a Share" + (m.group(1).equals("0") ? "Snapshot" : "Update") + "Value: " + l);
                // Done once the start offset passed the last record, or a batch holds it Acknowledged.
                Matcher a = acked.matcher(v.group(2));
                while (a.find()) lastDone |= Long.parseLong(a.group(1)) >= lastOffset;
                lastDone |= Long.parseLong(v.group(1)) > lastOffset;
            }
            assertTrue(lastDone, "the state records acknowledge offset " + lastOffset + ": " + records);
            assertEquals("0", first, "the first record of a share-partition is a snapshot");
            assertGroupRecordsDecode(broker.dir().resolve("data"), group, topic);
        }
    }

    /**
     * Kafka 4.4's {@code kafka-dump-log.sh --offsets-decoder} reads the share group's records in
     * {@code __consumer_offsets}: its epoch (ShareGroupMetadata, type 11) and its initialized share-partitions
     * (ShareGroupStatePartitionMetadata, type 15), which keep a restarted coordinator from initializing them again.
     */
    static void assertGroupRecordsDecode(Path data, String group, String topic) throws Exception {
        List<Path> segments;
        try (Stream<Path> dirs = Files.list(data)) {
            segments = dirs.filter(d -> d.getFileName().toString().startsWith("__consumer_offsets-"))
                .flatMap(d -> {
                    try (Stream<Path> files = Files.list(d)) {
                        return files.filter(f -> f.toString().endsWith(".log")).toList().stream();
                    } catch (java.io.IOException e) {
                        throw new java.io.UncheckedIOException(e);
                    }
                })
                .sorted().toList();
        }
        List<String> records = new ArrayList<>();
        for (Path f : segments) {
            String out = KafkaTool.tool("DumpLogSegments", null, "--files", f.toString(), "--offsets-decoder").out();
            for (String l : CliToolsTest.lines(out)) {
                if (l.startsWith("| offset: ") && l.contains("\"groupId\":\"" + group + "\"")) records.add(l);
            }
        }
        Pattern epoch = Pattern.compile(".*key: \\{\"type\":\"11\",\"data\":\\{\"groupId\":\"" + group
            + "\"\\}\\} payload: \\{\"version\":\"0\",\"data\":\\{\"epoch\":[1-9]\\d*,\"metadataHash\":-?\\d+\\}\\}.*");
        Pattern initialized = Pattern.compile(".*key: \\{\"type\":\"15\",\"data\":\\{\"groupId\":\"" + group
            + "\"\\}\\} payload: \\{\"version\":\"0\",\"data\":\\{\"initializingTopics\":\\[\\],"
            + "\"initializedTopics\":\\[\\{\"topicId\":\"[^\"]+\",\"topicName\":\"" + topic
            + "\",\"partitions\":\\[0\\]\\}\\],\"deletingTopics\":\\[\\]\\}\\}.*");
        assertTrue(records.stream().anyMatch(l -> epoch.matcher(l).matches()), "a ShareGroupMetadata record: " + records);
        assertTrue(records.stream().anyMatch(l -> initialized.matcher(l).matches()),
            "a ShareGroupStatePartitionMetadata record with the topic initialized: " + records);
    }

    /** One node's settings, with {@code stateTopicPartitions} partitions of {@code __share_group_state}. */
    static Map<String, String> brokerProps(int stateTopicPartitions) {
        Map<String, String> props = new HashMap<>(TxnSupport.brokerProps());
        props.put("share.coordinator.state.topic.num.partitions", Integer.toString(stateTopicPartitions));
        props.put("share.coordinator.state.topic.replication.factor", "1");
        props.put("share.coordinator.state.topic.min.isr", "1");
        return props;
    }

    /**
     * The values as one record batch: a share fetch acquires whole batches, so one poll returns them all, and the
     * explicit acknowledgements of the test are all made after it (a released record polled again before the kill
     * would be counted twice).
     */
    static void produceOneBatch(String bootstrap, String topic, List<String> values) throws Exception {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.LINGER_MS_CONFIG, 1000);
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap, p)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (String v : values) sent.add(producer.send(new ProducerRecord<>(topic, v.getBytes(UTF_8))));
            producer.flush();
            for (Future<RecordMetadata> f : sent) f.get();
        }
    }
}

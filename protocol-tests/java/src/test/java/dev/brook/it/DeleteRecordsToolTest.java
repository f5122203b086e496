package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * Kafka 4.4's own {@code kafka-delete-records.sh} against a broker: the tool is
 * {@code org.apache.kafka.tools.DeleteRecordsCommand} from {@code kafka-tools} 4.4.0, run as a child process with
 * the test classpath, as {@link TransactionsToolTest} runs its tool. Its exit status and the low watermark it prints
 * per partition are checked, then what clients see afterwards: {@code Admin.listOffsets} at earliest and latest, and
 * a consumer with {@code auto.offset.reset=earliest} that starts at the new log start. Uses only
 * {@link TestBrokers#bootstrap()}, so it runs against Kafka 4.4 too.
 */
@ExtendWith(BrokerLogOnFailure.class)
class DeleteRecordsToolTest {
    static final int RECORDS_P0 = 10;
    static final int RECORDS_P1 = 6;

    @TempDir
    Path tmp;

    /** What one run of the tool printed, and its exit status. */
    record Run(int exit, String out, String err) {
        /** The {@code partition: <tp>\t<what>: <value>} lines the tool prints, as partition to "what: value". */
        Map<String, String> results() {
            Map<String, String> byPartition = new HashMap<>();
            for (String line : out.split("\n")) {
                if (!line.startsWith("partition: ")) continue;
                String[] cells = line.substring("partition: ".length()).split("\t", 2);
                assertEquals(2, cells.length, "line " + line);
                byPartition.put(cells[0].strip(), cells[1].strip());
            }
            return byPartition;
        }
    }

    /** Runs {@code kafka-delete-records.sh --bootstrap-server <bootstrap> --offset-json-file <json>}. */
    Run tool(String bootstrap, String json) throws Exception {
        Path file = Files.createTempFile(tmp, "offsets", ".json");
        Files.writeString(file, json);
        KafkaTool.Run r = KafkaTool.tool("DeleteRecordsCommand", bootstrap, "--offset-json-file", file.toString());
        return new Run(r.exit(), r.out(), r.err());
    }

    static String offsetJson(String topic, long offset0, long offset1) {
        return "{\"version\":1,\"partitions\":["
            + "{\"topic\":\"" + topic + "\",\"partition\":0,\"offset\":" + offset0 + "},"
            + "{\"topic\":\"" + topic + "\",\"partition\":1,\"offset\":" + offset1 + "}]}";
    }

    static Map<Integer, Long> offsets(Admin admin, List<TopicPartition> tps, OffsetSpec spec) throws Exception {
        Map<TopicPartition, OffsetSpec> ask = tps.stream().collect(Collectors.toMap(tp -> tp, tp -> spec));
        Map<TopicPartition, ListOffsetsResultInfo> got =
            admin.listOffsets(ask).all().get(Clients.WAIT.toMillis(), TimeUnit.MILLISECONDS);
        Map<Integer, Long> byPartition = new HashMap<>();
        got.forEach((tp, info) -> byPartition.put(tp.partition(), info.offset()));
        return byPartition;
    }

    /**
     * Offset 4 on partition 0 and -1 (the high watermark) on partition 1: the tool prints each low watermark, the
     * earliest offsets move there while the latest stay, a consumer from earliest starts at 4; an offset past the
     * high watermark is refused with OFFSET_OUT_OF_RANGE and a lower one moves nothing.
     */
    @Test
    void deleteRecordsToolMovesTheLogStart() throws Exception {
        String bootstrap = TestBrokers.bootstrap();
        String t = Clients.uniqueTopic("delete-records-tool");
        Clients.createTopic(bootstrap, t, 2);
        List<TopicPartition> tps = List.of(new TopicPartition(t, 0), new TopicPartition(t, 1));
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap)) {
            for (int i = 0; i < RECORDS_P0; i++) {
                p.send(new ProducerRecord<>(t, 0, null, ("a" + i).getBytes(UTF_8)))
                    .get(Clients.WAIT.toMillis(), TimeUnit.MILLISECONDS);
            }
            for (int i = 0; i < RECORDS_P1; i++) {
                p.send(new ProducerRecord<>(t, 1, null, ("b" + i).getBytes(UTF_8)))
                    .get(Clients.WAIT.toMillis(), TimeUnit.MILLISECONDS);
            }
        }

        Map<String, String> printed = tool(bootstrap, offsetJson(t, 4, -1)).results();
        assertEquals(Map.of(t + "-0", "low_watermark: 4", t + "-1", "low_watermark: " + RECORDS_P1), printed);

        try (Admin admin = Clients.admin(bootstrap)) {
            assertEquals(Map.of(0, 4L, 1, (long) RECORDS_P1), offsets(admin, tps, OffsetSpec.earliest()));
            assertEquals(Map.of(0, (long) RECORDS_P0, 1, (long) RECORDS_P1), offsets(admin, tps, OffsetSpec.latest()));
        }

        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap,
            Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest"))) {
            c.assign(List.of(tps.get(0)));
            List<ConsumerRecord<byte[], byte[]>> got = Clients.pollExactly(c, RECORDS_P0 - 4, Clients.WAIT);
            assertEquals(4L, got.get(0).offset(), "a consumer from earliest starts at the new log start");
            assertEquals("a4", new String(got.get(0).value(), UTF_8));
        }

        Map<String, String> refused = tool(bootstrap, offsetJson(t, RECORDS_P0 + 5, 2)).results();
        assertTrue(refused.get(t + "-0").startsWith("error:") && refused.get(t + "-0").contains("OffsetOutOfRange"),
            "an offset past the high watermark: " + refused);
        assertEquals("low_watermark: " + RECORDS_P1, refused.get(t + "-1"), "the log start never moves back");
        try (Admin admin = Clients.admin(bootstrap)) {
            assertEquals(Map.of(0, 4L, 1, (long) RECORDS_P1), offsets(admin, tps, OffsetSpec.earliest()));
        }
    }
}

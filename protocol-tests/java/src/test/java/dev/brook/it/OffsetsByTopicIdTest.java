package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.GroupProtocol;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * OffsetCommit v10 and OffsetFetch v10 (topics named by id): kafka-clients 4.4 picks them whenever every topic it
 * commits has an id, which every topic of a KRaft cluster has. The consumer commits, reads its commits back, and a
 * second consumer of the group resumes where the first committed. The KIP-848 consumer takes this path; the classic
 * one names topics (v9 at most). On Brook, the broker's request counters show the version the consumer really spoke;
 * run against Kafka 4.4
 * ({@code -Dbrook.bin=scripts/kafka-as-brook.sh}), which has no such endpoint, the same exchanges must hold.
 */
@ExtendWith(BrokerLogOnFailure.class)
class OffsetsByTopicIdTest {
    static final int PARTITIONS = 2;
    static final int PER_PARTITION = 5;
    static final short TOPIC_ID_VERSION = 10;

    /** The value of {@code brook_requests_total} for one API and version, 0 before any such request. */
    static long requests(String admin, String api, short version) throws Exception {
        HttpRequest req = HttpRequest.newBuilder(URI.create("http://" + admin + "/metrics"))
            .timeout(Duration.ofSeconds(10)).build();
        String body = HttpClient.newHttpClient().send(req, HttpResponse.BodyHandlers.ofString()).body();
        String labels = "request=\"" + api + "\",version=\"" + version + "\"";
        for (String line : body.split("\n")) {
            if (line.startsWith("brook_requests_total{") && line.contains(labels)) {
                return (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
            }
        }
        return 0;
    }

    static KafkaConsumer<byte[], byte[]> groupConsumer(String bootstrap, String group, GroupProtocol protocol) {
        return Clients.consumer(bootstrap, Map.of(
            ConsumerConfig.GROUP_ID_CONFIG, group,
            ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol.name().toLowerCase(),
            ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false",
            ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest"));
    }

    @Test
    void theConsumerCommitsAndFetchesOffsetsByTopicId() throws Exception {
        GroupProtocol protocol = GroupProtocol.CONSUMER;
        try (BrookBroker broker = BrookBroker.start("offsets-by-id", Map.of("admin.listener", "127.0.0.1:0"))) {
            String bootstrap = broker.bootstrap();
            String admin = broker.readyFields().get("admin"); // null on Kafka
            String topic = Clients.uniqueTopic("by-id");
            String group = Clients.uniqueTopic("by-id-group");
            Clients.createTopic(bootstrap, topic, PARTITIONS);
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap)) {
                for (int part = 0; part < PARTITIONS; part++) {
                    for (int i = 0; i < PER_PARTITION; i++) {
                        p.send(new ProducerRecord<>(topic, part, null, ("r" + i).getBytes(UTF_8)));
                    }
                }
                Clients.flush(p, Clients.WAIT);
            }
            // The KIP-848 consumer builds its requests `forTopicIdsOrNames` (v10 when every topic has an id); the
            // classic one `forTopicNames` (v9 at most), which the other group tests cover.
            short version = TOPIC_ID_VERSION;
            long commitsBefore = admin == null ? 0 : requests(admin, "OffsetCommit", version);
            long fetchesBefore = admin == null ? 0 : requests(admin, "OffsetFetch", version);
            // The first consumer reads two records of each partition and commits the position after them.
            Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
            for (int part = 0; part < PARTITIONS; part++) {
                commit.put(new TopicPartition(topic, part), new OffsetAndMetadata(2 + part, "m" + part));
            }
            try (KafkaConsumer<byte[], byte[]> c = groupConsumer(bootstrap, group, protocol)) {
                c.subscribe(Set.of(topic));
                Clients.pollAtLeast(c, PARTITIONS * PER_PARTITION, Clients.WAIT);
                c.commitSync(commit, Clients.WAIT);
                assertEquals(commit, c.committed(commit.keySet(), Clients.WAIT), "committed() reads the commits back");
            }

            // A second member of the group starts at the committed offsets (OffsetFetch when it is assigned).
            try (KafkaConsumer<byte[], byte[]> c = groupConsumer(bootstrap, group, protocol)) {
                c.subscribe(Set.of(topic));
                int expected = PARTITIONS * PER_PARTITION - 2 - 3;
                var records = Clients.pollAtLeast(c, expected, Clients.WAIT);
                assertEquals(expected, records.size(), "the second consumer reads from the committed offsets");
                for (var r : records) {
                    long from = commit.get(new TopicPartition(topic, r.partition())).offset();
                    assertTrue(r.offset() >= from, "record " + r + " is before the committed offset " + from);
                }
            }

            if (admin != null) {
                assertTrue(requests(admin, "OffsetCommit", version) > commitsBefore,
                    "the 4.4 KIP-848 consumer committed with OffsetCommit v" + version);
                assertTrue(requests(admin, "OffsetFetch", version) > fetchesBefore,
                    "the 4.4 KIP-848 consumer fetched with OffsetFetch v" + version);
            }
        }
    }
}

package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Produce with acks=all, stop the broker with SIGTERM, start it again on the same port, read everything back. */
@ExtendWith(BrokerLogOnFailure.class)
class RestartTest {
    static final int N = 10_000;
    static final int PARTITIONS = 2;

    @Test
    void cleanRestartKeepsEveryAcknowledgedRecord() throws Exception {
        assumeFalse(TestBrokers.isExternal(), "restarts need a Brook broker started by the harness");
        try (BrookBroker broker = BrookBroker.start("restart")) {
            String bootstrap = broker.bootstrap();
            String topic = Clients.uniqueTopic("restart");
            Uuid idBefore;
            try (Admin admin = Clients.admin(bootstrap)) {
                Clients.createTopic(admin, topic, PARTITIONS, Map.of("retention.ms", "987654321"));
                idBefore = admin.describeTopics(List.of(topic)).allTopicNames()
                    .get(30, TimeUnit.SECONDS).get(topic).topicId();
            }

            try (KafkaProducer<byte[], byte[]> producer =
                     Clients.producer(bootstrap, Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
                List<Future<RecordMetadata>> fs = new ArrayList<>();
                for (int i = 0; i < N; i++) {
                    fs.add(producer.send(new ProducerRecord<>(topic, i % PARTITIONS, 1_000_000L + i,
                        ("k" + i).getBytes(UTF_8), ("v" + i).getBytes(UTF_8))));
                }
                Clients.flush(producer, Clients.WAIT);
                for (int i = 0; i < N; i++) {
                    assertEquals(i / PARTITIONS, fs.get(i).get(30, TimeUnit.SECONDS).offset(), "offset of record " + i);
                }
            }

            // A consumer that stays open across the restart: it has read partition 0 to the end before it.
            TopicPartition p0 = new TopicPartition(topic, 0);
            KafkaConsumer<byte[], byte[]> survivor = Clients.consumer(bootstrap);
            try {
                survivor.assign(List.of(p0));
                survivor.seekToBeginning(List.of(p0));
                List<ConsumerRecord<byte[], byte[]>> before =
                    Clients.pollExactly(survivor, N / PARTITIONS, Clients.WAIT);
                Optional<Integer> epochBefore = before.get(before.size() - 1).leaderEpoch();

                broker.restart();  // SIGTERM, bounded wait for exit, start on the same port and log.dirs

                try (Admin admin = Clients.admin(bootstrap)) {
                    TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames()
                        .get(30, TimeUnit.SECONDS).get(topic);
                    assertEquals(PARTITIONS, d.partitions().size(), "partition count survives restart");
                    assertEquals(idBefore, d.topicId(), "topic id survives restart");
                    ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                    ConfigEntry retention = admin.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS)
                        .get(res).get("retention.ms");
                    assertEquals("987654321", retention == null ? null : retention.value(),
                        "topic config override survives restart");
                }

                List<TopicPartition> tps = new ArrayList<>();
                for (int p = 0; p < PARTITIONS; p++) tps.add(new TopicPartition(topic, p));
                try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap)) {
                    consumer.assign(tps);
                    consumer.seekToBeginning(tps);
                    List<ConsumerRecord<byte[], byte[]>> got = Clients.pollExactly(consumer, N, Clients.WAIT);
                    int[] next = new int[PARTITIONS];
                    for (ConsumerRecord<byte[], byte[]> r : got) {
                        int p = r.partition();
                        int i = next[p] * PARTITIONS + p;
                        assertEquals(next[p], r.offset(), "offset in partition " + p);
                        assertEquals("k" + i, new String(r.key(), UTF_8));
                        assertEquals("v" + i, new String(r.value(), UTF_8));
                        assertEquals(1_000_000L + i, r.timestamp());
                        next[p]++;
                    }
                    for (int p = 0; p < PARTITIONS; p++) assertEquals(N / PARTITIONS, next[p], "partition " + p);
                }

                // The broker keeps serving writes after the restart: offsets continue where they were.
                try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap)) {
                    long off = producer.send(new ProducerRecord<>(topic, 0, null, "after".getBytes(UTF_8)))
                        .get(30, TimeUnit.SECONDS).offset();
                    assertEquals(N / PARTITIONS, off, "first offset written after the restart");
                }

                // The consumer that was open during the restart reconnects and gets the new record.
                List<ConsumerRecord<byte[], byte[]>> after = Clients.pollExactly(survivor, 1, Clients.WAIT);
                assertEquals(N / PARTITIONS, after.get(0).offset(),
                    "offset read by the consumer open during the restart");
                assertEquals("after", new String(after.get(0).value(), UTF_8));
                Optional<Integer> epochAfter = after.get(0).leaderEpoch();
                if (epochBefore.isPresent()) {
                    assertTrue(epochAfter.isPresent() && epochAfter.get() >= epochBefore.get(),
                        "leader epoch must not go backwards across a restart: " + epochBefore + " then " + epochAfter);
                }
            } finally {
                survivor.close();
            }
        }
    }
}

package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.LongPredicate;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The Java consumer fetches in an incremental fetch session (KIP-227) by default: its session on the broker holds
 * exactly the partitions it is assigned, follows a reassignment through the fetch's forgotten partitions, keeps
 * delivering every record of the partitions it still reads, and is closed when the consumer closes.
 */
@ExtendWith(BrokerLogOnFailure.class)
class FetchSessionsTest {
    static final int PARTITIONS = 3;
    static final int PER_PARTITION = 10;
    static final Duration WAIT = Duration.ofSeconds(30);

    /** A sample of the broker's {@code GET /metrics} without labels. */
    static long metric(BrookBroker broker, String name) throws Exception {
        String admin = broker.readyFields().get("admin");
        HttpRequest req = HttpRequest.newBuilder(URI.create("http://" + admin + "/metrics"))
            .timeout(Duration.ofSeconds(10)).build();
        String body = HttpClient.newHttpClient().send(req, HttpResponse.BodyHandlers.ofString()).body();
        for (String line : body.split("\n")) {
            if (line.startsWith(name + " ")) return (long) Double.parseDouble(line.substring(name.length() + 1));
        }
        throw new AssertionError("no sample " + name + " in the scrape:\n" + body);
    }

    /** Polls the consumer (its fetches move the session) until the metric satisfies {@code ok} (bounded). */
    static void awaitMetric(BrookBroker broker, KafkaConsumer<byte[], byte[]> consumer, String name,
                            LongPredicate ok, String what) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        long last;
        while (!ok.test(last = metric(broker, name))) {
            if (System.nanoTime() > deadline) fail("timed out waiting for " + what + "; " + name + " = " + last);
            if (consumer != null) consumer.poll(Duration.ofMillis(100));
            else Thread.sleep(50);
        }
    }

    static void produce(KafkaProducer<byte[], byte[]> producer, String topic, int partition, int from)
        throws Exception {
        for (int i = from; i < from + PER_PARTITION; i++) {
            producer.send(new ProducerRecord<>(topic, partition, null, ("p" + partition + "-" + i).getBytes(UTF_8)));
        }
        Clients.flush(producer, WAIT);
    }

    @Test
    void theConsumersSessionFollowsItsAssignmentAndClosesWithIt() throws Exception {
        try (BrookBroker broker = BrookBroker.start("fetch-sessions", Map.of("admin.listener", "127.0.0.1:0"))) {
            String bootstrap = broker.bootstrap();
            String topic = Clients.uniqueTopic("fetch-sessions");
            Clients.createTopic(bootstrap, topic, PARTITIONS);
            List<TopicPartition> all = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) all.add(new TopicPartition(topic, p));
            try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap)) {
                for (int p = 0; p < PARTITIONS; p++) produce(producer, topic, p, 0);
                KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap);
                try {
                    consumer.assign(all);
                    consumer.seekToBeginning(all);
                    Clients.pollExactly(consumer, PARTITIONS * PER_PARTITION, WAIT);
                    awaitMetric(broker, consumer, "brook_fetch_sessions", n -> n == 1, "the consumer's session");
                    awaitMetric(broker, consumer, "brook_fetch_session_partitions", n -> n == PARTITIONS,
                        "every assigned partition in the session");

                    // Reading partition 2 alone: the next fetches forget partitions 0 and 1.
                    TopicPartition two = all.get(2);
                    consumer.assign(List.of(two));
                    awaitMetric(broker, consumer, "brook_fetch_session_partitions", n -> n == 1,
                        "partitions 0 and 1 forgotten");
                    assertEquals(1, metric(broker, "brook_fetch_sessions"), "still one session");
                    produce(producer, topic, 0, PER_PARTITION);
                    produce(producer, topic, 2, PER_PARTITION);
                    List<ConsumerRecord<byte[], byte[]>> got = Clients.pollExactly(consumer, PER_PARTITION, WAIT);
                    for (int i = 0; i < PER_PARTITION; i++) {
                        ConsumerRecord<byte[], byte[]> r = got.get(i);
                        assertEquals(2, r.partition(), "only partition 2 is read: " + r);
                        assertEquals(PER_PARTITION + i, r.offset());
                        assertEquals("p2-" + (PER_PARTITION + i), new String(r.value(), UTF_8));
                    }
                } finally {
                    consumer.close();
                }
                // The closing consumer's last fetch carries the final epoch, which closes the session.
                awaitMetric(broker, null, "brook_fetch_sessions", n -> n == 0, "the session closed");
                assertEquals(0, metric(broker, "brook_fetch_session_evictions_total"));
            }
        }
    }
}

package dev.brook.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Predicate;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Kafka 4.4's {@code kafka-client-metrics.sh} ({@code ClientMetricsCommand}) against a broker, and a 4.4 producer's client
 * telemetry (KIP-714, {@code enable.metrics.push=true} by default): it pushes the metrics a client-metrics
 * subscription asks for, which the broker keeps and shows in {@code /v1/client-metrics}; a producer no subscription
 * matches pushes nothing.
 */
@ExtendWith(BrokerLogOnFailure.class)
class ClientTelemetryTest {

    /** Bound on waiting for a producer's pushes to show. */
    static final Duration PUSH_WAIT_MAX = Duration.ofSeconds(30);

    static BrookBroker broker;
    static String bootstrap;
    static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

    @BeforeAll
    static void start() {
        assumeFalse(TestBrokers.isExternal(), "the telemetry test reads its own broker's admin listener");
        broker = BrookBroker.start("client-telemetry", FaultAdmin.adminListenerProps());
        bootstrap = broker.bootstrap();
    }

    @AfterAll
    static void stop() {
        if (broker != null) broker.close();
    }

    static String clientMetricsView() throws Exception {
        String admin = broker.readyFields().get("admin");
        HttpRequest req = HttpRequest.newBuilder(URI.create("http://" + admin + "/v1/client-metrics"))
            .timeout(Duration.ofSeconds(10)).GET().build();
        HttpResponse<String> r = HTTP.send(req, HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        return r.body();
    }

    /** Polls the view until {@code done} holds, bounded by {@link #PUSH_WAIT_MAX}; the last view. */
    static String awaitView(Predicate<String> done, KafkaProducer<byte[], byte[]> producer, String topic)
        throws Exception {
        long deadline = System.nanoTime() + PUSH_WAIT_MAX.toNanos();
        String view = clientMetricsView();
        while (!done.test(view)) {
            if (System.nanoTime() > deadline) throw new AssertionError("not seen in time:\n" + view);
            // Sending keeps the producer's network thread, which pushes telemetry, busy and observable.
            producer.send(new ProducerRecord<>(topic, new byte[] {1})).get();
            view = clientMetricsView();
        }
        return view;
    }

    /**
     * The {@code pushes} of the view's client instance with {@code clientId}; -1 when it has none. Each instance's
     * object starts with its {@code client_id} (the view's keys are sorted) and lists {@code pushes} before the next.
     */
    static int pushes(String view, String clientId) {
        int at = view.indexOf("\"client_id\":\"" + clientId + "\"");
        if (at < 0) return -1;
        int next = view.indexOf("\"client_id\":\"", at + 1);
        String own = view.substring(at, next < 0 ? view.length() : next);
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("\"pushes\":(\\d+)").matcher(own);
        return m.find() ? Integer.parseInt(m.group(1)) : -1;
    }

    static KafkaProducer<byte[], byte[]> producer(String clientId) {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        return Clients.producer(bootstrap, p);
    }

    @Test
    void aSubscribedProducerPushesItsMetricsAndAnUnsubscribedOneDoesNot() throws Exception {
        KafkaTool.tool("ClientMetricsCommand", bootstrap, "--alter", "--name", "producers", "--metrics",
            "org.apache.kafka.producer.", "--interval", "500", "--match", "client_id=telemetry-producer");
        String listed = KafkaTool.tool("ClientMetricsCommand", bootstrap, "--list").out();
        assertTrue(listed.lines().anyMatch(l -> l.strip().equals("producers")), listed);
        String described = KafkaTool.tool("ClientMetricsCommand", bootstrap, "--describe", "--name", "producers").out();
        assertTrue(described.contains("interval.ms=500"), described);

        String topic = "telemetry-" + System.nanoTime();
        try (KafkaProducer<byte[], byte[]> quiet = producer("not-subscribed");
             KafkaProducer<byte[], byte[]> pushing = producer("telemetry-producer")) {
            quiet.send(new ProducerRecord<>(topic, new byte[] {0})).get();
            // Two pushes from the subscribed producer: by then the other one has asked for its subscription
            // (at its first connection) and, given none, sent nothing.
            String view = awaitView(v -> pushes(v, "telemetry-producer") >= 2
                && v.contains("\"name\":\"org.apache.kafka.producer."), pushing, topic);
            assertEquals(0, pushes(view, "not-subscribed"), view);
        }
    }
}

package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.brook.it.FaultAdmin.Batch;
import dev.brook.it.FaultAdmin.Rule;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.message.InitProducerIdRequestData;
import org.apache.kafka.common.message.ProduceRequestData;
import org.apache.kafka.common.message.ProduceResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.SimpleRecord;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.InitProducerIdRequest;
import org.apache.kafka.common.requests.InitProducerIdResponse;
import org.apache.kafka.common.requests.ProduceRequest;
import org.apache.kafka.common.requests.ProduceResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The producer's delivery semantics under injected faults, with the real Java client against a Brook broker whose
 * fault rules are driven through the admin HTTP API (and the {@code brook fault} CLI). Every scenario asserts what
 * ended up in the log twice: through a consumer (assign + seek, no group) and on disk with {@code brook dump-log}.
 *
 * <p>The scenarios are those of the delivery-semantics articles: a lost ack turns a retry into a duplicate unless
 * the producer is idempotent; a lost request is simply retried; a retriable error on the first of five in-flight
 * requests reorders the log unless the producer is idempotent; acks=0 loses a dropped record silently; an expired
 * delivery.timeout.ms does not mean "not written"; an old producer epoch is fenced.
 *
 * <p>Each test starts its own broker (with the admin listener) so that delayed requests and producer state cannot
 * leak between scenarios. Rules are always scoped to the test's topic.
 */
@ExtendWith(BrokerLogOnFailure.class)
class FaultScenariosTest {
    /** request.timeout.ms for the scenarios that wait for a lost response: short, so retries come fast. */
    static final int REQUEST_TIMEOUT_MS = 2_000;

    private BrookBroker broker;
    private FaultAdmin faults;

    @BeforeEach
    void startBroker() {
        broker = BrookBroker.start("faults", FaultAdmin.adminListenerProps());
        faults = FaultAdmin.of(broker);
    }

    @AfterEach
    void stopBroker() {
        if (broker != null) broker.close();
    }

    // ---------------------------------------------------------------------------------------------------------
    // 1. A lost ack
    // ---------------------------------------------------------------------------------------------------------

    /** Lost ack, idempotence off (acks=all, default retries): the retry is appended again, the log holds two copies. */
    @Test
    @Tag(Lab.TAG)
    void lostAckWithoutIdempotenceDuplicatesTheRecord() throws Exception {
        LostOutcome o = sendOnceUnder("drop-response", false);
        lostAckReport(o, false).finish();
        assertEquals(List.of("order-1", "order-1"), o.values, "lost ack without idempotence: the retry is a duplicate");
        assertEquals(1, o.metadata.offset(), "the client is told the offset of the retry, the second copy");
        List<Batch> batches = o.batches;
        assertEquals(2, batches.size(), "two batches on disk: " + batches);
        for (Batch b : batches) {
            assertEquals(-1, b.producerId, "no producer id without idempotence: " + b);
            assertEquals(1, b.count);
        }
        assertEquals(List.of(0L, 1L), batches.stream().map(b -> b.baseOffset).collect(Collectors.toList()));
    }

    /** Lost ack, default (idempotent) producer: the retry is recognised as a duplicate and answered offset 0. */
    @Test
    @Tag(Lab.TAG)
    void lostAckWithIdempotenceKeepsOneCopy() throws Exception {
        LostOutcome o = sendOnceUnder("drop-response", true);
        lostAckReport(o, true).producersView(faults.hostPort(), o.topic, 0).finish();
        assertEquals(List.of("order-1"), o.values, "lost ack with idempotence: one copy");
        assertEquals(0, o.metadata.offset(), "the retry is answered with the offset of the original append");
        assertEquals(1, o.batches.size(), "one batch on disk: " + o.batches);
        Batch b = o.batches.get(0);
        assertTrue(b.producerId >= 0, "idempotent batch carries a producer id: " + b);
        assertEquals(0, b.producerEpoch);
        assertEquals(0, b.baseSequence);
        assertEquals(0, b.lastSequence);
    }

    // ---------------------------------------------------------------------------------------------------------
    // 2. A lost request
    // ---------------------------------------------------------------------------------------------------------

    @Test
    void lostRequestWithoutIdempotenceIsRetriedOnce() throws Exception {
        LostOutcome o = sendOnceUnder("drop-request", false);
        assertEquals(List.of("order-1"), o.values, "a lost request never reached the log; the retry did, once");
        assertEquals(0, o.metadata.offset());
        assertEquals(1, o.batches.size(), "one batch on disk: " + o.batches);
        assertEquals(-1, o.batches.get(0).producerId);
    }

    @Test
    void lostRequestWithIdempotenceIsRetriedOnce() throws Exception {
        LostOutcome o = sendOnceUnder("drop-request", true);
        assertEquals(List.of("order-1"), o.values);
        assertEquals(0, o.metadata.offset());
        assertEquals(1, o.batches.size(), "one batch on disk: " + o.batches);
        assertEquals(0, o.batches.get(0).baseSequence);
    }

    /** The lab report of a lost-ack scenario: the fault command, what the client saw, the log and its batches. */
    private static Lab lostAckReport(LostOutcome o, boolean idempotence) {
        Lab lab = Lab.start().name(o.topic, "$TOPIC");
        lab.say("$ brook fault add --admin $ADMIN " + String.join(" ", o.faultArgs));
        lab.say("producer (enable.idempotence=" + idempotence + ", acks=all): send(order-1); the answer is lost, "
            + "the client retries; send() returns offset " + o.metadata.offset());
        lab.say("consumer, from the beginning: " + o.values);
        lab.say("$ brook dump-log $DATA/$TOPIC-0");
        for (Batch b : o.batches) lab.dumpLogLine(b);
        return lab;
    }

    static final class LostOutcome {
        String topic;
        List<String> faultArgs;
        RecordMetadata metadata;
        List<String> values;
        List<Batch> batches;
    }

    /**
     * Installs a once-only {@code action} rule on Produce for a fresh topic, sends one record with acks=all and
     * waits for its ack, then reads the log back. Checks that the rule fired and that the client retried.
     */
    private LostOutcome sendOnceUnder(String action, boolean idempotence) throws Exception {
        String topic = Clients.uniqueTopic(action + (idempotence ? "-idem" : "-plain"));
        Clients.createTopic(broker.bootstrap(), topic, 1);
        LostOutcome o = new LostOutcome();
        o.topic = topic;
        // Through the CLI, as docs/LABS.md tells the reader to.
        o.faultArgs = List.of("--api", "produce", "--action", action, "--topic", topic, "--times", "1");
        FaultAdmin.Run add = faults.cli("add", o.faultArgs.toArray(new String[0]));
        assertEquals(0, add.exit, add.toString());
        long rule = Long.parseLong(add.stdout.trim());

        Map<String, Object> cfg = new HashMap<>();
        cfg.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, String.valueOf(idempotence));
        cfg.put(ProducerConfig.ACKS_CONFIG, "all");
        cfg.put(ProducerConfig.LINGER_MS_CONFIG, 0);
        cfg.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, REQUEST_TIMEOUT_MS);
        cfg.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 15_000);
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(broker.bootstrap(), cfg)) {
            CompletableFuture<RecordMetadata> callback = new CompletableFuture<>();
            Future<RecordMetadata> f = producer.send(new ProducerRecord<>(topic, 0, null, "order-1".getBytes(UTF_8)),
                (md, e) -> {
                    if (e != null) callback.completeExceptionally(e);
                    else callback.complete(md);
                });
            o.metadata = f.get(Clients.WAIT.toMillis(), TimeUnit.MILLISECONDS);
            RecordMetadata fromCallback = callback.get(Clients.WAIT.toMillis(), TimeUnit.MILLISECONDS);
            assertEquals(o.metadata.offset(), fromCallback.offset(), "callback and future agree on the offset");
            assertTrue(retries(producer) >= 1, "the client retried the request (record-retry-total)");
        }
        assertEquals(1, faults.fired(rule), "the " + action + " rule fired once");
        o.values = values(topic);
        o.batches = FaultAdmin.dumpLog(broker, topic, 0);
        assertAllValid(o.batches);
        observed(action + (idempotence ? " (idempotent)" : " (idempotence off)"), "offset " + o.metadata.offset()
            + ", log " + o.values + ", on disk " + summary(o.batches));
        return o;
    }

    // ---------------------------------------------------------------------------------------------------------
    // 3. Five requests in flight, the first failing once with a retriable error
    // ---------------------------------------------------------------------------------------------------------

    /**
     * Without idempotence the retried first record lands after the four that followed it. Deterministic: the
     * broker answers requests on a connection strictly in order, and the error answer is delayed 500 ms, so all
     * five requests are already in the socket when the error goes back; the four are appended before the retry
     * (sent after retry.backoff.ms on the same connection) can arrive.
     */
    @Test
    @Tag(Lab.TAG)
    void retriableErrorWithFiveInFlightReordersWithoutIdempotence() throws Exception {
        InFlightOutcome o = fiveInFlightFirstFails(false);
        inFlightReport(o, false).finish();
        assertEquals(List.of("w", "m1", "m2", "m3", "m4", "m0"), o.values,
            "without idempotence the retried m0 is appended after m1..m4");
        assertEquals(List.of(5L, 1L, 2L, 3L, 4L), o.offsets, "offsets of m0..m4 as the client saw them");
        assertEquals(1.0, o.retries, "only m0 was retried");
        for (Batch b : o.batches) assertEquals(-1, b.producerId, b.toString());
    }

    /**
     * With idempotence the broker answers OUT_OF_ORDER_SEQUENCE_NUMBER to m1..m4 (it expects m0's sequence first);
     * the client retries them after m0, in sequence order, and the log keeps the send order.
     */
    @Test
    @Tag(Lab.TAG)
    void retriableErrorWithFiveInFlightKeepsOrderWithIdempotence() throws Exception {
        InFlightOutcome o = fiveInFlightFirstFails(true);
        inFlightReport(o, true).finish();
        assertEquals(List.of("w", "m0", "m1", "m2", "m3", "m4"), o.values, "with idempotence the send order is kept");
        assertEquals(List.of(1L, 2L, 3L, 4L, 5L), o.offsets);
        // m0 after the error, m1..m4 after OUT_OF_ORDER_SEQUENCE_NUMBER: proof that all five were in flight.
        assertEquals(5.0, o.retries, "all five records were retried");
        long pid = o.batches.get(0).producerId;
        assertTrue(pid >= 0);
        for (int i = 0; i < o.batches.size(); i++) {
            Batch b = o.batches.get(i);
            assertEquals(pid, b.producerId, "one producer id throughout: " + b);
            assertEquals(i, b.baseSequence, "sequence " + i + " at offset " + i + ": " + b);
            assertEquals(i, b.baseOffset);
        }
    }

    private static Lab inFlightReport(InFlightOutcome o, boolean idempotence) {
        Lab lab = Lab.start().name(o.topic, "$TOPIC");
        lab.say("producer (enable.idempotence=" + idempotence + ", max.in.flight.requests.per.connection=5, "
            + "batch.size=1): send(w) and wait, to warm up");
        lab.say("$ brook fault add --admin $ADMIN " + String.join(" ", o.faultArgs));
        lab.say("producer: send(m0) .. send(m4) without waiting; m0 is answered error 6 (NOT_LEADER_OR_FOLLOWER) "
            + "after 500 ms");
        lab.say("records retried (record-retry-total): " + (long) o.retries);
        lab.say("offsets send() returned for m0..m4: " + o.offsets);
        lab.say("consumer, from the beginning: " + o.values);
        lab.say("$ brook dump-log $DATA/$TOPIC-0");
        for (Batch b : o.batches) lab.dumpLogLine(b);
        return lab;
    }

    static final class InFlightOutcome {
        String topic;
        List<String> faultArgs;
        List<String> values;
        List<Long> offsets = new ArrayList<>();
        List<Batch> batches;
        double retries;
    }

    private InFlightOutcome fiveInFlightFirstFails(boolean idempotence) throws Exception {
        String topic = Clients.uniqueTopic("inflight" + (idempotence ? "-idem" : "-plain"));
        Clients.createTopic(broker.bootstrap(), topic, 1);
        Map<String, Object> cfg = new HashMap<>();
        cfg.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, String.valueOf(idempotence));
        cfg.put(ProducerConfig.ACKS_CONFIG, "all");
        cfg.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 5);
        cfg.put(ProducerConfig.LINGER_MS_CONFIG, 0);
        // Smaller than any record: a batch's buffer is then sized for its first record (from an upper-bound
        // estimate), and the records are padded so that the estimate's slack cannot take a second one. Every
        // record is a batch of its own, and a partition sends one batch per request.
        cfg.put(ProducerConfig.BATCH_SIZE_CONFIG, 1);
        cfg.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 5_000);
        cfg.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 20_000);
        InFlightOutcome o = new InFlightOutcome();
        o.topic = topic;
        long rule;
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(broker.bootstrap(), cfg)) {
            // Warm up: metadata, the connection and, for the idempotent producer, its state on the broker (the
            // broker accepts any sequence from a producer it has no state for).
            producer.send(record(topic, padded("w"))).get(Clients.WAIT.toMillis(), TimeUnit.MILLISECONDS);
            o.faultArgs = List.of("--api", "produce", "--action", "error", "--error", "6", "--delay-ms", "500",
                "--topic", topic, "--times", "1");
            FaultAdmin.Run add = faults.cli("add", o.faultArgs.toArray(new String[0]));
            assertEquals(0, add.exit, add.toString());
            rule = Long.parseLong(add.stdout.trim());
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < 5; i++) fs.add(producer.send(record(topic, padded("m" + i))));
            for (Future<RecordMetadata> f : fs) {
                o.offsets.add(f.get(Clients.WAIT.toMillis(), TimeUnit.MILLISECONDS).offset());
            }
            o.retries = retries(producer);
        }
        assertEquals(1, faults.fired(rule), "the error rule fired once");
        o.values = values(topic).stream().map(FaultScenariosTest::unpadded).collect(Collectors.toList());
        o.batches = FaultAdmin.dumpLog(broker, topic, 0);
        assertAllValid(o.batches);
        observed("five in flight, first fails with 6" + (idempotence ? " (idempotent)" : " (idempotence off)"),
            "offsets of m0..m4 " + o.offsets + ", records retried " + o.retries + ", log " + o.values + ", on disk " + summary(o.batches));
        assertEquals(6, o.batches.size(), "six single-record batches: " + o.batches);
        for (Batch b : o.batches) assertEquals(1, b.count, b.toString());
        return o;
    }

    // ---------------------------------------------------------------------------------------------------------
    // 4. acks=0
    // ---------------------------------------------------------------------------------------------------------

    /** acks=0: offsets are -1, a dropped request loses its record and nothing tells the client. */
    @Test
    @Tag(Lab.TAG)
    void acksZeroLosesADroppedRecordSilently() throws Exception {
        String topic = Clients.uniqueTopic("acks0");
        Clients.createTopic(broker.bootstrap(), topic, 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<String, Object> cfg = Map.of(ProducerConfig.ACKS_CONFIG, "0", ProducerConfig.LINGER_MS_CONFIG, 0);
        List<RecordMetadata> mds = new ArrayList<>();
        List<Exception> callbackErrors = new ArrayList<>();
        long rule;
        List<String> faultArgs;
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(broker.bootstrap(), cfg);
             KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(broker.bootstrap())) {
            consumer.assign(List.of(tp));
            for (int i = 0; i < 2; i++) mds.add(send(producer, topic, "r" + i, callbackErrors));
            // acks=0 gives no completion signal: the rule must not catch r0 or r1, so wait until both are in.
            awaitEndOffset(consumer, tp, 2);
            faultArgs = List.of("--api", "produce", "--action", "drop-request", "--topic", topic, "--times", "1");
            FaultAdmin.Run add = faults.cli("add", faultArgs.toArray(new String[0]));
            assertEquals(0, add.exit, add.toString());
            rule = Long.parseLong(add.stdout.trim());
            mds.add(send(producer, topic, "r2", callbackErrors));
            faults.awaitFired(rule, 1, Clients.WAIT);
            for (int i = 3; i < 5; i++) mds.add(send(producer, topic, "r" + i, callbackErrors));
            awaitEndOffset(consumer, tp, 4);
        }
        assertEquals(List.of(), callbackErrors, "no error reaches an acks=0 client");
        for (RecordMetadata md : mds) {
            assertFalse(md.hasOffset(), "acks=0: no offset");
            assertEquals(-1, md.offset(), "acks=0: the returned offset is -1");
        }
        assertEquals(1, faults.fired(rule));
        List<String> values = values(topic);
        List<Batch> batches = FaultAdmin.dumpLog(broker, topic, 0);
        observed("acks=0, r2 dropped", "offsets " + mds.stream().map(RecordMetadata::offset)
            .collect(Collectors.toList()) + ", client errors " + callbackErrors + ", log " + values + ", on disk "
            + summary(batches));
        assertEquals(List.of("r0", "r1", "r3", "r4"), values, "r2 was dropped and is lost");
        assertAllValid(batches);
        assertEquals(List.of(0L, 1L, 2L, 3L), batches.stream().map(b -> b.baseOffset).collect(Collectors.toList()),
            "four batches, no gap in offsets (the lost record never got one): " + batches);

        Lab lab = Lab.start().name(topic, "$TOPIC");
        lab.say("producer (acks=0): send(r0), send(r1); both reach the log");
        lab.say("$ brook fault add --admin $ADMIN " + String.join(" ", faultArgs));
        lab.say("producer: send(r2), send(r3), send(r4)");
        lab.say("errors reported to the callbacks: " + callbackErrors);
        lab.say("offsets send() returned: " + mds.stream().map(RecordMetadata::offset).collect(Collectors.toList()));
        lab.say("consumer, from the beginning: " + values);
        lab.say("$ brook dump-log $DATA/$TOPIC-0");
        for (Batch b : batches) lab.dumpLogLine(b);
        lab.finish();
    }

    private static RecordMetadata send(KafkaProducer<byte[], byte[]> producer, String topic, String value,
                                       List<Exception> errors) throws Exception {
        return producer.send(record(topic, value), (md, e) -> {
            if (e != null) {
                synchronized (errors) {
                    errors.add(e);
                }
            }
        }).get(Clients.WAIT.toMillis(), TimeUnit.MILLISECONDS);
    }

    // ---------------------------------------------------------------------------------------------------------
    // 5. delivery.timeout.ms expiring under a long delay
    // ---------------------------------------------------------------------------------------------------------

    static final int DELAY_MS = 5_000;
    static final int DELIVERY_TIMEOUT_MS = 3_000;

    /**
     * Default (idempotent) producer, every Produce for the topic delayed 5 s, delivery.timeout.ms 3 s,
     * request.timeout.ms 2 s. The client gives up with a TimeoutException, but the broker still appends the
     * delayed request when its delay ends: a timeout means "outcome unknown", not "not written". Any further
     * attempt of the same batch (same producer id, epoch and sequence) is a duplicate, so exactly one copy.
     */
    @Test
    void deliveryTimeoutUnderLongDelayWithIdempotenceStoresOneCopy() throws Exception {
        TimeoutOutcome o = deliveryTimeoutUnderDelay(true);
        assertEquals(List.of("order-1"), o.values, "exactly one copy: the first delayed attempt, appended late;"
            + " later attempts (" + o.fired + " delayed in all) were duplicates");
        assertEquals(1, o.batches.size(), o.batches.toString());
        assertEquals(0, o.batches.get(0).baseSequence);
    }

    /**
     * The same without idempotence: each attempt that reached the broker is appended when its delay ends, so the
     * log holds as many copies as the rule delayed requests (normally two: the first attempt, and the retry sent
     * after request.timeout.ms, before delivery.timeout.ms expired).
     */
    @Test
    void deliveryTimeoutUnderLongDelayWithoutIdempotenceStoresEveryAttempt() throws Exception {
        TimeoutOutcome o = deliveryTimeoutUnderDelay(false);
        List<String> expected = new ArrayList<>();
        for (int i = 0; i < o.fired; i++) expected.add("order-1");
        assertEquals(expected, o.values, "one copy per delayed attempt (" + o.fired + ")");
        assertEquals(o.fired, o.batches.size(), o.batches.toString());
    }

    static final class TimeoutOutcome {
        long fired;
        List<String> values;
        List<Batch> batches;
    }

    private TimeoutOutcome deliveryTimeoutUnderDelay(boolean idempotence) throws Exception {
        String topic = Clients.uniqueTopic("timeout" + (idempotence ? "-idem" : "-plain"));
        Clients.createTopic(broker.bootstrap(), topic, 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        long rule = faults.add(Rule.of("delay").api("produce").topic(topic).delayMs(DELAY_MS).times(1_000));
        Map<String, Object> cfg = new HashMap<>();
        cfg.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, String.valueOf(idempotence));
        cfg.put(ProducerConfig.ACKS_CONFIG, "all");
        cfg.put(ProducerConfig.LINGER_MS_CONFIG, 0);
        cfg.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, REQUEST_TIMEOUT_MS);
        cfg.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, DELIVERY_TIMEOUT_MS);
        TimeoutOutcome o = new TimeoutOutcome();
        long failedAt;
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(broker.bootstrap(), cfg);
             KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(broker.bootstrap())) {
            long sentAt = System.nanoTime();
            Future<RecordMetadata> f = producer.send(record(topic, "order-1"));
            try {
                RecordMetadata md = f.get(DELIVERY_TIMEOUT_MS + 10_000, TimeUnit.MILLISECONDS);
                fail("expected a TimeoutException, got offset " + md.offset());
            } catch (ExecutionException e) {
                assertSame(TimeoutException.class, e.getCause().getClass(), "the send fails with: " + e.getCause());
            }
            failedAt = System.nanoTime();
            long tookMs = (failedAt - sentAt) / 1_000_000;
            assertTrue(tookMs >= DELIVERY_TIMEOUT_MS - 100 && tookMs < DELIVERY_TIMEOUT_MS + 3_000,
                "the TimeoutException came after about delivery.timeout.ms: " + tookMs + " ms");
            // Every attempt was sent before the client gave up; none is sent after.
            o.fired = faults.fired(rule);
            assertTrue(o.fired >= 1, "the delayed attempts reached the broker");
            assertEquals(1, faults.clear(), "the delay rule is removed");

            // Wait for the delayed requests: the first lands when its delay ends (an event we can wait for)...
            consumer.assign(List.of(tp));
            long expectedEnd = idempotence ? 1 : o.fired;
            awaitEndOffset(consumer, tp, expectedEnd);
            // ...but a duplicate that writes nothing gives no signal. Every attempt was fired before the client
            // gave up, so all have finished by failedAt + DELAY_MS; watch the end offset until then (plus margin).
            long quietUntil = failedAt + TimeUnit.MILLISECONDS.toNanos(DELAY_MS + 1_000);
            while (System.nanoTime() < quietUntil) {
                long end = consumer.endOffsets(List.of(tp), Clients.WAIT).get(tp);
                assertEquals(expectedEnd, end, "log end offset while the delayed attempts finish");
                Thread.sleep(100);
            }
            if (idempotence) {
                // The producer is still usable after the expiry: the next record lands at offset 1.
                RecordMetadata next = producer.send(record(topic, "order-2"))
                    .get(Clients.WAIT.toMillis(), TimeUnit.MILLISECONDS);
                assertEquals(1, next.offset(), "the producer recovered after the expired batch");
            }
        }
        o.values = values(topic);
        if (idempotence) {
            assertEquals("order-2", o.values.get(o.values.size() - 1));
            o.values = o.values.subList(0, o.values.size() - 1);
        }
        o.batches = FaultAdmin.dumpLog(broker, topic, 0);
        assertAllValid(o.batches);
        if (idempotence) {
            Batch first = o.batches.get(0);
            Batch next = o.batches.get(o.batches.size() - 1);
            assertTrue(next.producerId != first.producerId || next.producerEpoch > first.producerEpoch,
                "after the expired batch the producer continued under a new producer id or epoch: " + o.batches);
            o.batches = o.batches.subList(0, o.batches.size() - 1);
        }
        observed("delivery.timeout.ms under a " + DELAY_MS + " ms delay" + (idempotence ? " (idempotent)"
            : " (idempotence off)"), "TimeoutException; " + o.fired + " attempts delayed; log " + o.values
            + ", on disk " + summary(o.batches) + (idempotence ? " then order-2 under a bumped epoch" : ""));
        return o;
    }

    // ---------------------------------------------------------------------------------------------------------
    // 6. An old producer epoch, at the wire level
    // ---------------------------------------------------------------------------------------------------------

    /** A batch at epoch 1 is accepted; a later batch of the same producer at epoch 0 gets INVALID_PRODUCER_EPOCH. */
    @Test
    void olderProducerEpochIsFenced() throws Exception {
        String topic = Clients.uniqueTopic("epoch");
        Clients.createTopic(broker.bootstrap(), topic, 1);
        try (RawClient raw = new RawClient(broker.bootstrap())) {
            InitProducerIdResponse init = (InitProducerIdResponse) raw.send(
                new InitProducerIdRequest.Builder(new InitProducerIdRequestData()
                    .setTransactionalId(null).setTransactionTimeoutMs(60_000)), (short) 4);
            assertEquals(Errors.NONE.code(), init.data().errorCode());
            long pid = init.data().producerId();
            assertTrue(pid >= 0);

            ProduceResponseData.PartitionProduceResponse first = raw.produce(topic, pid, (short) 1, 0, "e1-s0");
            assertEquals(Errors.NONE.code(), first.errorCode(), "epoch 1, sequence 0: " + first);
            assertEquals(0, first.baseOffset());

            ProduceResponseData.PartitionProduceResponse stale = raw.produce(topic, pid, (short) 0, 1, "e0-s1");
            assertEquals(Errors.INVALID_PRODUCER_EPOCH.code(), stale.errorCode(), "epoch 0 after 1: " + stale);
            ProduceResponseData.PartitionProduceResponse staleZero = raw.produce(topic, pid, (short) 0, 0, "e0-s0");
            assertEquals(Errors.INVALID_PRODUCER_EPOCH.code(), staleZero.errorCode(),
                "epoch 0 at sequence 0 is not a duplicate of the epoch-1 batch: " + staleZero);

            // The current epoch still works, in sequence; a gap is OUT_OF_ORDER_SEQUENCE_NUMBER.
            ProduceResponseData.PartitionProduceResponse next = raw.produce(topic, pid, (short) 1, 1, "e1-s1");
            assertEquals(Errors.NONE.code(), next.errorCode(), next.toString());
            assertEquals(1, next.baseOffset());
            ProduceResponseData.PartitionProduceResponse gap = raw.produce(topic, pid, (short) 1, 5, "e1-s5");
            assertEquals(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER.code(), gap.errorCode(), gap.toString());
        }
        assertEquals(List.of("e1-s0", "e1-s1"), values(topic), "only the epoch-1 batches in sequence are stored");
        List<Batch> batches = FaultAdmin.dumpLog(broker, topic, 0);
        observed("old producer epoch", "epoch 1 seq 0 ok, epoch 0 -> 47, epoch 1 seq 5 -> 45; on disk "
            + summary(batches));
        assertAllValid(batches);
        assertEquals(2, batches.size(), batches.toString());
        for (int i = 0; i < 2; i++) {
            assertEquals(1, batches.get(i).producerEpoch, batches.get(i).toString());
            assertEquals(i, batches.get(i).baseSequence, batches.get(i).toString());
        }
    }

    /** A minimal Kafka wire client: size-prefixed requests serialized by kafka-clients' own request classes. */
    static final class RawClient implements AutoCloseable {
        private final Socket socket = new Socket();
        private final DataInputStream in;
        private final DataOutputStream out;
        private int correlationId = 0;

        RawClient(String bootstrap) throws IOException {
            int colon = bootstrap.lastIndexOf(':');
            socket.connect(new InetSocketAddress(bootstrap.substring(0, colon),
                Integer.parseInt(bootstrap.substring(colon + 1))), 10_000);
            socket.setSoTimeout(10_000);  // every read is bounded
            in = new DataInputStream(socket.getInputStream());
            out = new DataOutputStream(socket.getOutputStream());
        }

        AbstractResponse send(AbstractRequest.Builder<?> builder, short version) throws IOException {
            AbstractRequest req = builder.build(version);
            RequestHeader header = new RequestHeader(req.apiKey(), version, "raw-client", ++correlationId);
            ByteBuffer buf = req.serializeWithHeader(header);
            byte[] bytes = new byte[buf.remaining()];
            buf.get(bytes);
            out.writeInt(bytes.length);
            out.write(bytes);
            out.flush();
            int len = in.readInt();
            byte[] resp = new byte[len];
            in.readFully(resp);
            return AbstractResponse.parseResponse(ByteBuffer.wrap(resp), header);
        }

        /** Produce v12 (topic by name), acks=-1, one idempotent batch of one record. */
        ProduceResponseData.PartitionProduceResponse produce(String topic, long pid, short epoch, int seq,
                                                            String value) throws IOException {
            MemoryRecords records = MemoryRecords.withIdempotentRecords(Compression.NONE, pid, epoch, seq,
                new SimpleRecord(System.currentTimeMillis(), null, value.getBytes(UTF_8)));
            ProduceRequestData data = new ProduceRequestData()
                .setAcks((short) -1)
                .setTimeoutMs(10_000)
                .setTopicData(new ProduceRequestData.TopicProduceDataCollection(List.of(
                    new ProduceRequestData.TopicProduceData()
                        .setName(topic)
                        .setPartitionData(List.of(new ProduceRequestData.PartitionProduceData()
                            .setIndex(0)
                            .setRecords(records)))).iterator()));
            short v = 12;
            ProduceResponse resp = (ProduceResponse) send(new ProduceRequest.Builder(v, v, data), v);
            assertEquals(ApiKeys.PRODUCE, resp.apiKey());
            List<ProduceResponseData.PartitionProduceResponse> parts = new ArrayList<>();
            resp.data().responses().forEach(t -> parts.addAll(t.partitionResponses()));
            assertEquals(1, parts.size(), "one partition answered: " + resp.data());
            return parts.get(0);
        }

        @Override
        public void close() throws IOException {
            socket.close();
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // The fault CLI, end to end, and bad admin input
    // ---------------------------------------------------------------------------------------------------------

    private static final Pattern FIRED = Pattern.compile("\"fired\"\\s*:\\s*(\\d+)");

    /** `brook fault add/list/clear` drive a lost ack that the idempotent producer absorbs. */
    @Test
    void faultCliDrivesALostAck() throws Exception {
        String topic = Clients.uniqueTopic("cli");
        Clients.createTopic(broker.bootstrap(), topic, 1);

        FaultAdmin.Run add = faults.cli("add", "--api", "produce", "--action", "drop-response", "--times", "1",
            "--topic", topic);
        assertEquals(0, add.exit, add.toString());
        long id = Long.parseLong(add.stdout.trim());

        FaultAdmin.Run list = faults.cli("list");
        assertEquals(0, list.exit, list.toString());
        assertTrue(list.stdout.contains("\"drop-response\"") && list.stdout.contains(topic), list.toString());
        assertEquals(0, firedIn(list.stdout), list.toString());

        Map<String, Object> cfg = Map.of(ProducerConfig.LINGER_MS_CONFIG, 0,
            ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, REQUEST_TIMEOUT_MS,
            ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 15_000);
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(broker.bootstrap(), cfg)) {
            RecordMetadata md = producer.send(record(topic, "via-cli")).get(Clients.WAIT.toMillis(),
                TimeUnit.MILLISECONDS);
            assertEquals(0, md.offset());
        }
        assertEquals(1, faults.fired(id), "the HTTP API sees the rule the CLI added");
        list = faults.cli("list");
        assertEquals(1, firedIn(list.stdout), list.toString());

        FaultAdmin.Run bad = faults.cli("add", "--api", "produce", "--action", "explode");
        assertNotEquals(0, bad.exit, "an unknown action is refused: " + bad);
        assertTrue(bad.stderr.contains("400") && bad.stderr.contains("unknown action"), bad.toString());

        FaultAdmin.Run clearOne = faults.cli("clear", "--id", "999999");
        assertNotEquals(0, clearOne.exit, "clearing a rule that does not exist fails: " + clearOne);

        FaultAdmin.Run clear = faults.cli("clear");
        assertEquals(0, clear.exit, clear.toString());
        assertEquals("removed 1", clear.stdout.trim());
        list = faults.cli("list");
        assertEquals("[]", list.stdout.trim(), list.toString());

        assertEquals(List.of("via-cli"), values(topic));
        List<Batch> batches = FaultAdmin.dumpLog(broker, topic, 0);
        assertAllValid(batches);
        assertEquals(1, batches.size(), batches.toString());
    }

    private static long firedIn(String json) {
        Matcher m = FIRED.matcher(json);
        assertTrue(m.find(), "no fired count in " + json);
        long n = Long.parseLong(m.group(1));
        assertFalse(m.find(), "more than one rule in " + json);
        return n;
    }

    /** Malformed or unknown input gets 400 with a message; nothing is installed; the broker keeps serving. */
    @Test
    void badAdminInputIsRefusedAndTheBrokerKeepsServing() throws Exception {
        assertBadRequest(faults.post("{\"action\": \"drop-request\"", "application/json"));
        assertBadRequest(faults.post("not json at all", "application/json"));
        assertBadRequest(faults.post("{\"action\":\"explode\",\"api\":\"produce\"}", "application/json"),
            "unknown action", "explode");
        assertBadRequest(faults.post("{\"action\":\"drop-request\",\"api\":\"nope\"}", "application/json"),
            "unknown api", "nope");
        assertBadRequest(faults.post("{\"action\":\"drop-request\",\"api\":\"9999\"}", "application/json"),
            "unknown api");
        assertBadRequest(faults.post("{\"action\":\"delay\",\"api\":\"produce\"}", "application/json"),
            "delay needs delay_ms");
        assertBadRequest(faults.post("{\"action\":\"error\",\"api\":\"produce\"}", "application/json"),
            "error needs error_code");
        assertBadRequest(faults.post("{\"action\":\"close\",\"probability\":2.0}", "application/json"),
            "probability");
        assertBadRequest(faults.post("{\"action\":\"close\",\"bogus\":1}", "application/json"), "bogus");
        assertBadRequest(faults.post("{\"action\":\"delay\",\"delay_ms\":-5}", "application/json"), "delay_ms");
        assertBadRequest(faults.post("{\"action\":\"close\"}", null), "Content-Type");
        assertBadRequest(faults.delete("/faults/abc"), "not a number");
        FaultAdmin.Answer missing = faults.delete("/faults/424242");
        assertEquals(404, missing.status, missing.toString());

        assertEquals(List.of(), faults.rules(), "bad input installed nothing");

        // The broker still serves Kafka clients and the admin API.
        String topic = Clients.uniqueTopic("after-bad-input");
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(broker.bootstrap(),
            Map.of(ProducerConfig.LINGER_MS_CONFIG, 0))) {
            assertEquals(0, producer.send(record(topic, "still-alive")).get(Clients.WAIT.toMillis(),
                TimeUnit.MILLISECONDS).offset());
        }
        assertEquals(List.of("still-alive"), values(topic));
        long id = faults.add(Rule.of("delay").api("fetch").delayMs(1).times(1));
        assertEquals(1, faults.rules().size());
        assertEquals(0, faults.fired(id));
        assertEquals(1, faults.clear());
        assertTrue(broker.isAlive());
    }

    private static void assertBadRequest(FaultAdmin.Answer a, String... messageParts) {
        assertEquals(400, a.status, "expected 400, got " + a);
        assertTrue(a.body.contains("\"error\""), "the answer carries an error message: " + a);
        assertTrue(a.body.length() > "{\"error\":\"\"}".length(), "the message is not empty: " + a);
        for (String part : messageParts) {
            assertTrue(a.body.contains(part), "the message mentions '" + part + "': " + a);
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Helpers
    // ---------------------------------------------------------------------------------------------------------

    private static ProducerRecord<byte[], byte[]> record(String topic, String value) {
        return new ProducerRecord<>(topic, 0, null, value.getBytes(UTF_8));
    }

    private static String padded(String label) {
        return label + "|" + "x".repeat(64);
    }

    private static String unpadded(String value) {
        int bar = value.indexOf('|');
        return bar < 0 ? value : value.substring(0, bar);
    }

    /** Prints an observed outcome (for the project's notes); the assertions are what checks it. */
    private static void observed(String scenario, String outcome) {
        System.out.println("[fault-scenario] " + scenario + ": " + outcome);
    }

    /** Batches as "offset:pid/epoch/seq" (count when it is not 1). */
    private static String summary(List<Batch> batches) {
        return batches.stream().map(b -> b.baseOffset + ":" + (b.producerId < 0 ? "no-pid"
                : b.producerId + "/" + b.producerEpoch + "/" + b.baseSequence) + (b.count == 1 ? "" : "x" + b.count))
            .collect(Collectors.joining(" ", "[", "]"));
    }

    /** The producer's record-retry-total metric. */
    private static double retries(KafkaProducer<byte[], byte[]> producer) {
        for (Map.Entry<MetricName, ? extends Metric> e : producer.metrics().entrySet()) {
            MetricName n = e.getKey();
            if (n.name().equals("record-retry-total") && n.group().equals("producer-metrics")) {
                return ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        throw new AssertionError("no record-retry-total metric");
    }

    /** Every value in partition 0 of {@code topic}, from the beginning to the end offset, in offset order. */
    private List<String> values(String topic) {
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(broker.bootstrap())) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            List<ConsumerRecord<byte[], byte[]>> records = Clients.readToEnd(consumer, Clients.WAIT);
            List<String> out = new ArrayList<>();
            long expectedOffset = 0;
            for (ConsumerRecord<byte[], byte[]> r : records) {
                assertEquals(expectedOffset++, r.offset(), "offsets are dense");
                out.add(new String(r.value(), UTF_8));
            }
            return out;
        }
    }

    /** Waits (bounded) until the partition's end offset is at least {@code n}; fails if it goes past it. */
    private static void awaitEndOffset(KafkaConsumer<byte[], byte[]> consumer, TopicPartition tp, long n)
        throws InterruptedException {
        long deadline = System.nanoTime() + Clients.WAIT.toNanos();
        while (true) {
            long end = consumer.endOffsets(List.of(tp), Clients.WAIT).get(tp);
            if (end == n) return;
            if (end > n) fail("end offset of " + tp + " is " + end + ", expected " + n);
            if (System.nanoTime() > deadline) fail("end offset of " + tp + " stayed at " + end + ", expected " + n);
            // An append by an acks=0 or abandoned request has no client-side event: poll, within the deadline.
            Thread.sleep(20);
        }
    }

    private static void assertAllValid(List<Batch> batches) {
        for (Batch b : batches) assertTrue(b.valid, "CRC holds: " + b);
    }
}

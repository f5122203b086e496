package dev.brook.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * SIGKILL in the middle of an idempotent produce stream, restart on the same port, and the producer carries on.
 *
 * <p>The kill is issued from the producer's own callback when the {@value #KILL_AFTER}th acknowledgement arrives,
 * so requests are in flight when the broker dies; another thread restarts it at once, while the test keeps sending
 * (records sent after the kill wait in the producer until the broker is back). Afterwards:
 * every acknowledged record is in the log exactly once, at the offset it was acknowledged with, and the log holds
 * the records in send order with no duplicates (the default producer is idempotent, so retries of batches the
 * broker wrote before it died must be recognised as duplicates after recovery).
 */
@ExtendWith(BrokerLogOnFailure.class)
class KillTest {
    static final int TOTAL = 20_000;
    static final int PHASE1 = 10_000;     // sent before the kill (the kill happens while these are acknowledged)
    static final int KILL_AFTER = 3_000;  // acknowledgements before SIGKILL

    static byte[] value(int i) {
        return ByteBuffer.allocate(64).putInt(i).put(new byte[60]).array();
    }

    @Test
    void sigkillMidProduceLosesNoAcknowledgedRecord() throws Exception {
        assumeFalse(TestBrokers.isExternal(), "kill -9 needs a Brook broker started by the harness");
        try (BrookBroker broker = BrookBroker.start("kill")) {
            String bootstrap = broker.bootstrap();
            String topic = Clients.uniqueTopic("kill");
            Clients.createTopic(bootstrap, topic, 1);
            TopicPartition tp = new TopicPartition(topic, 0);

            AtomicLongArray ackedOffset = new AtomicLongArray(TOTAL);
            for (int i = 0; i < TOTAL; i++) ackedOffset.set(i, -2);  // -2: no callback yet
            Map<Integer, Exception> failed = new ConcurrentHashMap<>();
            AtomicInteger acks = new AtomicInteger();
            CountDownLatch killed = new CountDownLatch(1);
            AtomicReference<Throwable> killError = new AtomicReference<>();

            // The restart runs on its own thread, right after the kill. It must not wait for the sends below:
            // with its only broker unreachable the producer rebootstraps (metadata.recovery.strategy=rebootstrap,
            // the default) and forgets the topic's partitions, so send() blocks in waitOnMetadata until the
            // broker is back (observed in a thread dump).
            CompletableFuture<Long> restart = new CompletableFuture<>();
            Thread restarter = new Thread(() -> {
                try {
                    if (!killed.await(60, TimeUnit.SECONDS)) throw new AssertionError("the kill never happened");
                    long t0 = System.nanoTime();
                    broker.startAgain();  // same port, same log.dirs
                    restart.complete((System.nanoTime() - t0) / 1_000_000);
                } catch (Throwable t) {
                    restart.completeExceptionally(t);
                }
            }, "restarter");
            restarter.setDaemon(true);
            restarter.start();

            Map<String, Object> cfg = Map.of(
                ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000,
                ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 5_000);
            long restartMs;
            KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap, cfg);
            try {
                for (int i = 0; i < TOTAL; i++) {
                    if (i == PHASE1) {
                        // Wait (bounded) for the kill the callback performs; the rest is sent after it.
                        if (!killed.await(60, TimeUnit.SECONDS)) {
                            fail("only " + acks.get() + " acknowledgements within 60 s; the kill never happened");
                        }
                        if (killError.get() != null) fail("kill failed", killError.get());
                    }
                    final int idx = i;
                    producer.send(new ProducerRecord<>(topic, 0, null, value(i)), (md, e) -> {
                        if (e != null) {
                            failed.put(idx, e);
                            ackedOffset.set(idx, -3);
                            return;
                        }
                        ackedOffset.set(idx, md.offset());
                        if (acks.incrementAndGet() == KILL_AFTER) {
                            try {
                                broker.kill();  // on the producer's I/O thread: later responses stay unread
                            } catch (Throwable t) {
                                killError.set(t);
                            } finally {
                                killed.countDown();
                            }
                        }
                    });
                }
                restartMs = restart.get(60, TimeUnit.SECONDS);
                // Every batch completes (acknowledged or expired) within delivery.timeout.ms.
                Clients.flush(producer, Duration.ofSeconds(60));

                // The producer is still usable after the crash.
                long after = producer.send(new ProducerRecord<>(topic, 0, null, value(TOTAL)))
                    .get(30, TimeUnit.SECONDS).offset();
                assertTrue(after >= 0);
            } finally {
                producer.close(Duration.ofSeconds(10));
            }

            int pending = 0;
            List<Integer> acked = new ArrayList<>();
            for (int i = 0; i < TOTAL; i++) {
                long o = ackedOffset.get(i);
                if (o == -2) pending++;
                if (o >= 0) acked.add(i);
            }
            assertEquals(0, pending, "every send must have completed after flush()");
            Map<String, Integer> failureKinds = new TreeMap<>();
            failed.values().forEach(e -> failureKinds.merge(e.getClass().getSimpleName(), 1, Integer::sum));
            int ackedBeforeKill = 0;
            int ackedAfterKill = 0;
            for (int i : acked) {
                if (i < PHASE1) ackedBeforeKill++; else ackedAfterKill++;
            }
            System.out.printf("KillTest: %d acknowledged (%d of the %d sent before the kill, %d of the %d sent after),"
                    + " %d failed %s, restart took %d ms%n", acked.size(), ackedBeforeKill, PHASE1, ackedAfterKill,
                TOTAL - PHASE1, failed.size(), failureKinds, restartMs);

            // Read the whole log.
            List<ConsumerRecord<byte[], byte[]>> log;
            try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap)) {
                consumer.assign(List.of(tp));
                consumer.seekToBeginning(List.of(tp));
                log = Clients.readToEnd(consumer, Duration.ofSeconds(60));
            }
            Map<Long, Integer> indexAtOffset = new HashMap<>();
            int prev = -1;
            long expectOffset = 0;
            for (ConsumerRecord<byte[], byte[]> r : log) {
                int idx = ByteBuffer.wrap(r.value()).getInt();
                assertEquals(expectOffset, r.offset(), "offsets are dense");
                expectOffset++;
                if (idx <= prev) {
                    fail("log not in send order or has a duplicate: record " + idx + " at offset " + r.offset()
                        + " follows record " + prev + " (retry of a batch written before the crash appended again?)");
                }
                prev = idx;
                indexAtOffset.put(r.offset(), idx);
            }
            List<String> missing = new ArrayList<>();
            for (int i : acked) {
                long off = ackedOffset.get(i);
                Integer there = indexAtOffset.get(off);
                if (there == null || there != i) {
                    missing.add("record " + i + " acknowledged at offset " + off + " but the log has "
                        + (there == null ? "nothing" : "record " + there) + " there");
                }
            }
            if (!missing.isEmpty()) {
                fail(missing.size() + " acknowledged records lost or moved; first: "
                    + missing.subList(0, Math.min(5, missing.size())));
            }
            // The records sent after the kill had 30 s to be delivered after a quick restart.
            assertEquals(TOTAL - PHASE1, ackedAfterKill,
                "records sent after the kill should all be delivered once the broker is back; failures "
                    + failureKinds + (failed.isEmpty() ? "" : ", e.g. " + failed.values().iterator().next()));
        }
    }
}

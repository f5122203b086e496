package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** 100,000 records over 3 partitions: exact count, per-partition order, offsets dense from 0. */
@ExtendWith(BrokerLogOnFailure.class)
class ManyRecordsTest {
    static final int TOTAL = 100_000;
    static final int PARTITIONS = 3;

    /** Value layout: partition (int), per-partition sequence (int), global index (int), then some padding. */
    static byte[] value(int partition, int seq, int index) {
        ByteBuffer b = ByteBuffer.allocate(12 + 20);
        b.putInt(partition).putInt(seq).putInt(index);
        b.put("padding-padding-pad!".getBytes(UTF_8));
        return b.array();
    }

    @Test
    void hundredThousandRecordsOverThreePartitions() throws Exception {
        String bootstrap = TestBrokers.bootstrap();
        String topic = Clients.uniqueTopic("many");
        Clients.createTopic(bootstrap, topic, PARTITIONS);

        int[] nextSeq = new int[PARTITIONS];
        AtomicInteger acked = new AtomicInteger();
        AtomicReference<Exception> firstError = new AtomicReference<>();
        CompletableFuture<Void> allAcked = new CompletableFuture<>();
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap)) {
            for (int i = 0; i < TOTAL; i++) {
                int p = i % PARTITIONS;
                int seq = nextSeq[p]++;
                byte[] key = ("k" + i).getBytes(UTF_8);
                producer.send(new ProducerRecord<>(topic, p, key, value(p, seq, i)), (md, e) -> {
                    if (e != null) {
                        firstError.compareAndSet(null, e);
                        allAcked.completeExceptionally(e);
                    } else if (md.offset() != seq) {
                        AssertionError ae = new AssertionError("partition " + p + " sequence " + seq
                            + " was acknowledged at offset " + md.offset());
                        allAcked.completeExceptionally(ae);
                    } else if (acked.incrementAndGet() == TOTAL) {
                        allAcked.complete(null);
                    }
                });
            }
            Clients.flush(producer, Duration.ofSeconds(60));
            allAcked.get(60, TimeUnit.SECONDS);
        }
        if (firstError.get() != null) fail("send failed", firstError.get());

        List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1),
            new TopicPartition(topic, 2));
        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap)) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Clients.WAIT);
            Map<TopicPartition, Long> begins = consumer.beginningOffsets(tps, Clients.WAIT);
            for (int p = 0; p < PARTITIONS; p++) {
                assertEquals(0L, begins.get(tps.get(p)), "beginning offset of partition " + p);
                assertEquals((long) nextSeq[p], ends.get(tps.get(p)), "end offset of partition " + p);
            }

            List<ConsumerRecord<byte[], byte[]>> got = Clients.pollExactly(consumer, TOTAL, Duration.ofSeconds(60));
            Map<Integer, Integer> expectedNext = new HashMap<>();
            for (ConsumerRecord<byte[], byte[]> r : got) {
                ByteBuffer b = ByteBuffer.wrap(r.value());
                int p = b.getInt();
                int seq = b.getInt();
                int index = b.getInt();
                int want = expectedNext.getOrDefault(r.partition(), 0);
                assertEquals(r.partition(), p, "record at " + r.partition() + "/" + r.offset() + " belongs elsewhere");
                assertEquals(want, seq, "per-partition order in partition " + p);
                assertEquals(seq, r.offset(), "offset of sequence " + seq + " in partition " + p);
                assertEquals("k" + index, new String(r.key(), UTF_8));
                assertEquals(index % PARTITIONS, p);
                expectedNext.put(p, want + 1);
            }
            int total = 0;
            for (int p = 0; p < PARTITIONS; p++) {
                assertEquals(nextSeq[p], expectedNext.getOrDefault(p, 0), "records read from partition " + p);
                total += expectedNext.getOrDefault(p, 0);
            }
            assertEquals(TOTAL, total);
        }
    }
}

package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** ListOffsets through the consumer: offsetsForTimes, beginning/end offsets, seekToBeginning/seekToEnd. */
@ExtendWith(BrokerLogOnFailure.class)
class OffsetsTest {
    static final int IN_ONE_BATCH = 10;
    static final int SEPARATE = 10;
    static final int N = IN_ONE_BATCH + SEPARATE;
    static final long STEP = 1_000;

    @Test
    void offsetsForTimesAndSeeks() throws Exception {
        String bootstrap = TestBrokers.bootstrap();
        String topic = Clients.uniqueTopic("offsets");
        Clients.createTopic(bootstrap, topic, 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        long base = System.currentTimeMillis() - 3_600_000L;

        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap)) {
            // An empty partition: both ends are 0, and there is no offset for any time.
            assertEquals(Map.of(tp, 0L), consumer.beginningOffsets(List.of(tp), Clients.WAIT), "empty: beginning");
            assertEquals(Map.of(tp, 0L), consumer.endOffsets(List.of(tp), Clients.WAIT), "empty: end");
            Map<TopicPartition, OffsetAndTimestamp> none = consumer.offsetsForTimes(Map.of(tp, 0L), Clients.WAIT);
            assertTrue(none.containsKey(tp), "offsetsForTimes answers for every partition asked");
            assertNull(none.get(tp), "empty partition: offsetsForTimes(0) is null");
        }

        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap)) {
            // Records 0..9 in one batch (timestamps inside one batch), 10..19 one batch each.
            for (int i = 0; i < IN_ONE_BATCH; i++) {
                producer.send(new ProducerRecord<>(topic, 0, base + i * STEP, null, ("v" + i).getBytes(UTF_8)));
            }
            Clients.flush(producer, Clients.WAIT);
            for (int i = IN_ONE_BATCH; i < N; i++) {
                long off = producer.send(new ProducerRecord<>(topic, 0, base + i * STEP, null,
                    ("v" + i).getBytes(UTF_8))).get(Clients.WAIT.toMillis(), TimeUnit.MILLISECONDS).offset();
                assertEquals(i, off);
            }
        }

        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap)) {
            assertEquals(Map.of(tp, 0L), consumer.beginningOffsets(List.of(tp), Clients.WAIT), "beginningOffsets");
            assertEquals(Map.of(tp, (long) N), consumer.endOffsets(List.of(tp), Clients.WAIT), "endOffsets");

            // Exact hits, lookups between two records, before the first and beyond the last.
            for (int i = 0; i < N; i++) {
                long exact = base + i * STEP;
                long between = exact - STEP / 2;
                for (long target : new long[] {exact, between}) {
                    OffsetAndTimestamp oat = consumer.offsetsForTimes(Map.of(tp, target), Clients.WAIT).get(tp);
                    assertNotNull(oat, "offsetsForTimes(" + (target - base) + " after base) should find record " + i);
                    assertEquals(i, oat.offset(), "offsetsForTimes(base+" + (target - base) + ")");
                    assertEquals(exact, oat.timestamp(), "timestamp returned for base+" + (target - base));
                }
            }
            OffsetAndTimestamp first = consumer.offsetsForTimes(Map.of(tp, 0L), Clients.WAIT).get(tp);
            assertNotNull(first, "offsetsForTimes(0)");
            assertEquals(0, first.offset(), "offsetsForTimes(0) is the first record");
            Map<TopicPartition, OffsetAndTimestamp> beyond =
                consumer.offsetsForTimes(Map.of(tp, base + (N - 1) * STEP + 1), Clients.WAIT);
            assertTrue(beyond.containsKey(tp));
            assertNull(beyond.get(tp), "offsetsForTimes beyond the last timestamp is null");

            consumer.assign(List.of(tp));

            consumer.seekToEnd(List.of(tp));
            assertEquals(N, consumer.position(tp, Clients.WAIT), "position after seekToEnd");

            consumer.seekToBeginning(List.of(tp));
            assertEquals(0, consumer.position(tp, Clients.WAIT), "position after seekToBeginning");
            List<ConsumerRecord<byte[], byte[]>> all = Clients.pollExactly(consumer, N, Clients.WAIT);
            for (int i = 0; i < N; i++) {
                assertEquals(i, all.get(i).offset());
                assertEquals(base + i * STEP, all.get(i).timestamp());
                assertEquals("v" + i, new String(all.get(i).value(), UTF_8));
            }

            // seek into the middle of the first batch (records 0..9)
            consumer.seek(tp, 5);
            List<ConsumerRecord<byte[], byte[]>> fromFive = Clients.pollExactly(consumer, N - 5, Clients.WAIT);
            assertEquals(5, fromFive.get(0).offset(), "first record after seek(5)");

            // seek to the offset found by time, then read from there.
            long mid = consumer.offsetsForTimes(Map.of(tp, base + 12 * STEP - 1), Clients.WAIT).get(tp).offset();
            consumer.seek(tp, mid);
            List<ConsumerRecord<byte[], byte[]>> tail = Clients.pollExactly(consumer, N - 12, Clients.WAIT);
            assertEquals(12, tail.get(0).offset());

            // After seekToEnd a new record is the next one read.
            consumer.seekToEnd(List.of(tp));
            assertEquals(N, consumer.position(tp, Clients.WAIT));
            try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap)) {
                producer.send(new ProducerRecord<>(topic, 0, base + N * STEP, null, "last".getBytes(UTF_8)))
                    .get(Clients.WAIT.toMillis(), TimeUnit.MILLISECONDS);
            }
            List<ConsumerRecord<byte[], byte[]>> last = Clients.pollExactly(consumer, 1, Clients.WAIT);
            assertEquals(N, last.get(0).offset());
            assertEquals("last", new String(last.get(0).value(), UTF_8));
            assertEquals(Map.of(tp, (long) N + 1), consumer.endOffsets(List.of(tp), Clients.WAIT));
        }
    }

    /** offsetsForTimes over several partitions in one call, each answered independently. */
    @Test
    void offsetsForTimesAcrossPartitions() throws Exception {
        String bootstrap = TestBrokers.bootstrap();
        String topic = Clients.uniqueTopic("offsets-multi");
        Clients.createTopic(bootstrap, topic, 3);
        long base = System.currentTimeMillis() - 3_600_000L;
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap)) {
            // Partition p gets p+1 records at base + p*100 + k*10.
            for (int p = 0; p < 3; p++) {
                for (int k = 0; k <= p; k++) {
                    producer.send(new ProducerRecord<>(topic, p, base + p * 100 + k * 10, null, new byte[] {1}));
                }
            }
            Clients.flush(producer, Clients.WAIT);
        }
        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap)) {
            Map<TopicPartition, Long> query = new HashMap<>();
            for (int p = 0; p < 3; p++) query.put(new TopicPartition(topic, p), base + 105);
            Map<TopicPartition, OffsetAndTimestamp> res = consumer.offsetsForTimes(query, Duration.ofSeconds(30));
            assertNull(res.get(new TopicPartition(topic, 0)), "partition 0 has nothing at or after base+105");
            OffsetAndTimestamp p1 = res.get(new TopicPartition(topic, 1));
            OffsetAndTimestamp p2 = res.get(new TopicPartition(topic, 2));
            assertNotNull(p1, "partition 1");
            assertNotNull(p2, "partition 2");
            assertEquals(1, p1.offset(), "partition 1 offset");
            assertEquals(base + 110, p1.timestamp(), "partition 1 timestamp");
            assertEquals(0, p2.offset(), "partition 2 offset");
            assertEquals(base + 200, p2.timestamp(), "partition 2 timestamp");
        }
    }
}

package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Produce with acks=0 and acks=1 (idempotence is then off by default), then read everything back. */
@ExtendWith(BrokerLogOnFailure.class)
class AcksTest {
    static final int N = 2_000;

    @ParameterizedTest(name = "acks={0}")
    @ValueSource(strings = {"0", "1"})
    void produceAndConsume(String acks) throws Exception {
        String bootstrap = TestBrokers.bootstrap();
        String topic = Clients.uniqueTopic("acks" + acks);
        Clients.createTopic(bootstrap, topic, 1);
        TopicPartition tp = new TopicPartition(topic, 0);

        try (KafkaProducer<byte[], byte[]> producer =
                 Clients.producer(bootstrap, Map.of(ProducerConfig.ACKS_CONFIG, acks))) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < N; i++) {
                fs.add(producer.send(new ProducerRecord<>(topic, 0, ("k" + i).getBytes(UTF_8),
                    ("v" + i).getBytes(UTF_8))));
            }
            Clients.flush(producer, Clients.WAIT);
            for (int i = 0; i < N; i++) {
                RecordMetadata md = fs.get(i).get(Clients.WAIT.toMillis(), TimeUnit.MILLISECONDS);
                assertEquals(0, md.partition());
                if (acks.equals("0")) {
                    assertFalse(md.hasOffset(), "acks=0: no offset is known");
                    assertEquals(-1, md.offset(), "acks=0: RecordMetadata.offset is -1");
                } else {
                    assertTrue(md.hasOffset());
                    assertEquals(i, md.offset(), "acks=1: offset of record " + i);
                }
            }
        }

        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            // acks=0 gives no completion signal from the broker: wait (bounded) for all records to arrive.
            List<ConsumerRecord<byte[], byte[]>> got = Clients.pollAtLeast(consumer, N, Clients.WAIT);
            assertEquals(N, got.size(), "record count");
            assertEquals(Map.of(tp, (long) N), consumer.endOffsets(List.of(tp), Clients.WAIT));
            for (int i = 0; i < N; i++) {
                ConsumerRecord<byte[], byte[]> r = got.get(i);
                assertEquals(i, r.offset());
                assertEquals("k" + i, new String(r.key(), UTF_8));
                assertEquals("v" + i, new String(r.value(), UTF_8));
            }
        }
    }
}

package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
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
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Every compression codec: keys (and null keys), null and empty values, headers with duplicate keys (order kept),
 * explicit timestamps. Every field must read back exactly and offsets must be dense from 0.
 */
@ExtendWith(BrokerLogOnFailure.class)
class CompressionRoundTripTest {

    /** What was sent for one record, to compare against what is read back. */
    record Sent(byte[] key, byte[] value, List<Header> headers, long timestamp) {}

    static List<Sent> records(long baseTs) {
        List<Sent> out = new ArrayList<>();
        int n = 300;
        for (int i = 0; i < n; i++) {
            byte[] key = (i % 7 == 3) ? null : ("key-" + i).getBytes(UTF_8);
            byte[] value;
            if (i % 10 == 5) {
                value = null;                       // a tombstone-like null value
            } else if (i % 10 == 6) {
                value = new byte[0];                // empty, which is not null
            } else {
                // Compressible and long enough that every codec really compresses.
                value = ("value-" + i + "-" + "abcdefghij".repeat(1 + i % 20)).getBytes(UTF_8);
            }
            List<Header> headers = new ArrayList<>();
            if (i % 3 != 0) {
                headers.add(new RecordHeader("dup", ("first-" + i).getBytes(UTF_8)));
                headers.add(new RecordHeader("other", ("o-" + i).getBytes(UTF_8)));
                headers.add(new RecordHeader("dup", ("second-" + i).getBytes(UTF_8)));
                headers.add(new RecordHeader("null-header", null));
                headers.add(new RecordHeader("dup", new byte[0]));
            }
            // Not monotonic: a record may carry an older timestamp than the one before it.
            long ts = baseTs + i * 13L - (i % 5 == 4 ? 1_000 : 0);
            out.add(new Sent(key, value, headers, ts));
        }
        return out;
    }

    /**
     * Bytes the consumer received from the network, over all its connections (consumer-node-metrics
     * incoming-byte-total). bytes-consumed-total would not do: the client counts it on decompressed records.
     */
    static double bytesReceived(KafkaConsumer<?, ?> consumer) {
        double sum = 0;
        int found = 0;
        for (Map.Entry<MetricName, ? extends Metric> e : consumer.metrics().entrySet()) {
            if (e.getKey().name().equals("incoming-byte-total") && e.getKey().group().equals("consumer-node-metrics")) {
                sum += ((Number) e.getValue().metricValue()).doubleValue();
                found++;
            }
        }
        if (found == 0) throw new AssertionError("no consumer-node-metrics incoming-byte-total metric");
        return sum;
    }

    @ParameterizedTest(name = "compression.type={0}")
    @ValueSource(strings = {"none", "gzip", "snappy", "lz4", "zstd"})
    void roundTrip(String codec) throws Exception {
        String bootstrap = TestBrokers.bootstrap();
        String topic = Clients.uniqueTopic("codec-" + codec);
        Clients.createTopic(bootstrap, topic, 1);
        long baseTs = System.currentTimeMillis() - 3_600_000L;
        List<Sent> sent = records(baseTs);

        try (KafkaProducer<byte[], byte[]> producer =
                 Clients.producer(bootstrap, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec))) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (Sent s : sent) {
                futures.add(producer.send(new ProducerRecord<>(topic, 0, s.timestamp(), s.key(), s.value(),
                    s.headers())));
            }
            Clients.flush(producer, Clients.WAIT);
            for (int i = 0; i < futures.size(); i++) {
                RecordMetadata md = futures.get(i).get(Clients.WAIT.toMillis(), TimeUnit.MILLISECONDS);
                assertEquals(i, md.offset(), "RecordMetadata.offset of record " + i);
                assertEquals(0, md.partition());
                assertEquals(sent.get(i).timestamp(), md.timestamp(),
                    "RecordMetadata.timestamp of record " + i + " (CreateTime topic: the producer's timestamp)");
            }
        }

        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            List<ConsumerRecord<byte[], byte[]>> got = Clients.pollExactly(consumer, sent.size(), Clients.WAIT);
            for (int i = 0; i < sent.size(); i++) {
                Sent s = sent.get(i);
                ConsumerRecord<byte[], byte[]> r = got.get(i);
                String what = codec + " record " + i;
                assertEquals(topic, r.topic());
                assertEquals(0, r.partition());
                assertEquals(i, r.offset(), what + ": offsets dense from 0");
                assertEquals(s.timestamp(), r.timestamp(), what + ": timestamp");
                assertEquals(TimestampType.CREATE_TIME, r.timestampType(), what + ": timestamp type");
                if (s.key() == null) {
                    assertNull(r.key(), what + ": null key");
                } else {
                    assertArrayEquals(s.key(), r.key(), what + ": key");
                }
                if (s.value() == null) {
                    assertNull(r.value(), what + ": null value");
                } else {
                    assertArrayEquals(s.value(), r.value(), what + ": value");
                }
                Header[] hs = r.headers().toArray();
                assertEquals(s.headers().size(), hs.length, what + ": header count (duplicates must be kept)");
                for (int h = 0; h < hs.length; h++) {
                    Header want = s.headers().get(h);
                    assertEquals(want.key(), hs[h].key(), what + ": header " + h + " key");
                    if (want.value() == null) assertNull(hs[h].value(), what + ": header " + h + " null value");
                    else assertArrayEquals(want.value(), hs[h].value(), what + ": header " + h + " value");
                }
                // Duplicate keys come back in order through the Headers API too.
                List<String> dups = new ArrayList<>();
                r.headers().headers("dup").forEach(h -> dups.add(new String(h.value(), UTF_8)));
                if (i % 3 != 0) assertEquals(List.of("first-" + i, "second-" + i, ""), dups, what + ": dup headers");
                assertEquals(r.key() == null ? -1 : r.key().length, r.serializedKeySize(),
                    what + ": serializedKeySize");
                assertEquals(r.value() == null ? -1 : r.value().length, r.serializedValueSize(),
                    what + ": serializedValueSize");
            }

            // The broker must serve the batches as the producer compressed them (Kafka stores them as received):
            // the consumer receives far fewer bytes than the payload when a codec is used.
            long payload = 0;
            for (Sent s : sent) {
                payload += (s.key() == null ? 0 : s.key().length) + (s.value() == null ? 0 : s.value().length);
                for (Header h : s.headers()) payload += h.key().length() + (h.value() == null ? 0 : h.value().length);
            }
            double fetched = bytesReceived(consumer);
            System.out.printf("CompressionRoundTripTest: %s: consumer received %.0f bytes for %d payload bytes%n",
                codec, fetched, payload);
            if (codec.equals("none")) {
                assertTrue(fetched >= payload, "uncompressed: received " + fetched + " bytes < payload " + payload);
            } else {
                assertTrue(fetched > 0 && fetched < payload / 2.0, codec + ": received " + fetched
                    + " bytes for a payload of " + payload + "; batches not served compressed?");
            }

            // Seeking into the middle of a (compressed) batch: the first record read is the one sought.
            int mid = sent.size() / 2 + 1;
            consumer.seek(tp, mid);
            List<ConsumerRecord<byte[], byte[]>> rest = Clients.pollExactly(consumer, sent.size() - mid, Clients.WAIT);
            assertEquals(mid, rest.get(0).offset(), "first record after seek(" + mid + ")");
            assertEquals(sent.get(mid).timestamp(), rest.get(0).timestamp());
        }
    }
}

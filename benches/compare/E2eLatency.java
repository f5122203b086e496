// End-to-end latency at a fixed rate, for benches/compare/run.py. Run with the Kafka jars on the
// class path in source-launcher mode (no build step):
//   java -cp 'target/kafka-reference/lib/*' benches/compare/E2eLatency.java BOOTSTRAP TOPIC RATE SECONDS WARMUP_SECONDS SIZE
// One producer (linger.ms=0, acks=all, otherwise defaults) sends SIZE-byte records at RATE per second to partition 0;
// one consumer in the same JVM (assign + seekToEnd, defaults) reads them. Each value starts with the producer's
// System.nanoTime(); latency = consumer's nanoTime() at poll return minus that. Records sent in the first WARMUP_SECONDS
// are not counted. Prints one line:
//   E2E sent=N received=N p50_us=.. p99_us=.. p999_us=.. max_us=.. avg_us=..
// (kafka-tools' EndToEndLatency sends one record at a time and waits for it, and prints whole milliseconds only.)
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class E2eLatency {
    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], topic = a[1];
        int rate = Integer.parseInt(a[2]);
        double seconds = Double.parseDouble(a[3]), warmup = Double.parseDouble(a[4]);
        int size = Math.max(16, Integer.parseInt(a[5]));
        int total = (int) Math.round(rate * seconds), skip = (int) Math.round(rate * warmup);

        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("linger.ms", "0");
        pp.put("acks", "all");
        pp.put("key.serializer", ByteArraySerializer.class.getName());
        pp.put("value.serializer", ByteArraySerializer.class.getName());
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("key.deserializer", ByteArrayDeserializer.class.getName());
        cp.put("value.deserializer", ByteArrayDeserializer.class.getName());
        TopicPartition tp = new TopicPartition(topic, 0);

        long[] lat = new long[total];
        int[] got = {0};
        AtomicBoolean done = new AtomicBoolean();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp);
             KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            producer.partitionsFor(topic);
            consumer.assign(List.of(tp));
            consumer.seekToEnd(List.of(tp));
            long start = consumer.position(tp);
            Thread reader = new Thread(() -> {
                while (!done.get()) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                        long now = System.nanoTime();
                        int i = (int) (r.offset() - start);
                        if (i >= 0 && i < total) lat[i] = now - ByteBuffer.wrap(r.value()).getLong();
                        got[0]++;
                    }
                }
            });
            reader.start();
            Random rnd = new Random(42);
            byte[] pad = new byte[size];
            for (int i = 0; i < size; i++) pad[i] = (byte) (1 + rnd.nextInt(255));
            long period = 1_000_000_000L / rate, t0 = System.nanoTime();
            for (int i = 0; i < total; i++) {
                long due = t0 + i * period, wait;
                while ((wait = due - System.nanoTime()) > 0) {
                    if (wait > 200_000) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000)); else Thread.onSpinWait();
                }
                byte[] v = pad.clone();
                ByteBuffer.wrap(v).putLong(System.nanoTime());
                producer.send(new ProducerRecord<>(topic, 0, null, v));
            }
            producer.flush();
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (got[0] < total && System.nanoTime() < deadline) Thread.sleep(10);
            done.set(true);
            reader.join();
        }
        long[] m = Arrays.stream(lat, skip, total).filter(x -> x > 0).sorted().toArray();
        if (m.length == 0) { System.out.println("E2E sent=" + total + " received=" + got[0] + " no samples"); System.exit(1); }
        double avg = Arrays.stream(m).average().orElse(0) / 1000.0;
        System.out.printf("E2E sent=%d received=%d p50_us=%d p99_us=%d p999_us=%d max_us=%d avg_us=%.1f%n",
            total, got[0], m[(int) (m.length * 0.5)] / 1000, m[Math.min(m.length - 1, (int) (m.length * 0.99))] / 1000,
            m[Math.min(m.length - 1, (int) (m.length * 0.999))] / 1000, m[m.length - 1] / 1000, avg);
    }
}

// What one transaction commit costs, measured directly, for benches/compare/run.py (W9). Run with the Kafka jars
// on the class path in source-launcher mode (no build step):
//   java -cp 'target/kafka-reference/lib/*' benches/compare/TxnCommitLatency.java BOOTSTRAP TOPIC PARTITIONS TXNS WARMUP_TXNS RECORDS SIZE
// One transactional producer (kafka-clients' defaults otherwise: acks=all, idempotent, linger.ms=5) runs
// WARMUP_TXNS + TXNS transactions one after another. Each sends RECORDS records of SIZE bytes spread over
// PARTITIONS partitions, then flush() (every record acknowledged), then commitTransaction(). The commit is timed
// alone: after the flush nothing else is in flight, so its latency is the commit protocol's own (EndTxn to the
// coordinator, which answers once the commit decision is in its log; under transaction.version 2 nothing else;
// under version 1 the client's AddPartitionsToTxn calls happen during the sends, not here). The whole transaction
// (begin to commit's return) is timed too. The first WARMUP_TXNS are not counted. Prints one line:
//   TXN txns=N commit_p50_us=.. commit_p99_us=.. commit_max_us=.. txn_p50_us=.. txn_p99_us=..
import java.util.Arrays;
import java.util.Properties;
import java.util.Random;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TxnCommitLatency {
    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], topic = a[1];
        int partitions = Integer.parseInt(a[2]), txns = Integer.parseInt(a[3]), warmup = Integer.parseInt(a[4]);
        int records = Integer.parseInt(a[5]), size = Integer.parseInt(a[6]);

        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("transactional.id", "commit-latency-" + System.nanoTime());
        pp.put("key.serializer", ByteArraySerializer.class.getName());
        pp.put("value.serializer", ByteArraySerializer.class.getName());
        long[] commit = new long[txns], whole = new long[txns];
        Random rnd = new Random(42);
        byte[] value = new byte[size];
        rnd.nextBytes(value);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            producer.initTransactions();
            for (int t = 0; t < warmup + txns; t++) {
                long t0 = System.nanoTime();
                producer.beginTransaction();
                for (int i = 0; i < records; i++) {
                    producer.send(new ProducerRecord<>(topic, i % partitions, null, value));
                }
                producer.flush();
                long t1 = System.nanoTime();
                producer.commitTransaction();
                long t2 = System.nanoTime();
                if (t >= warmup) {
                    commit[t - warmup] = t2 - t1;
                    whole[t - warmup] = t2 - t0;
                }
            }
        }
        Arrays.sort(commit);
        Arrays.sort(whole);
        System.out.printf("TXN txns=%d commit_p50_us=%d commit_p99_us=%d commit_max_us=%d txn_p50_us=%d txn_p99_us=%d%n",
            txns, pct(commit, 0.50), pct(commit, 0.99), commit[txns - 1] / 1000, pct(whole, 0.50), pct(whole, 0.99));
    }

    static long pct(long[] sorted, double q) {
        return sorted[Math.min(sorted.length - 1, (int) Math.floor(q * sorted.length))] / 1000;
    }
}

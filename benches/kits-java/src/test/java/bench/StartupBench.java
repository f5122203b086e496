package bench;

import dev.brook.junit.Brook;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Callable;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.springframework.kafka.test.EmbeddedKafkaKraftBroker;

/**
 * Time from a test's first line to the first acknowledged produce (acks=all), and resident memory, for the Brook
 * kit and spring-kafka-test's EmbeddedKafkaKraftBroker (1 and 3 brokers), in one JVM. Brook's memory is its
 * processes' (supervisor and nodes); the embedded broker's is the growth of this JVM's RSS while it runs.
 */
class StartupBench {
    static final int ROUNDS = 3;

    static long rssKb(long pid) {
        try {
            for (String l : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
                if (l.startsWith("VmRSS:")) return Long.parseLong(l.replaceAll("[^0-9]", ""));
            }
        } catch (IOException e) {
            return 0;
        }
        return 0;
    }

    static long firstAck(String bootstrap) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            return prod.send(new ProducerRecord<>("bench", "v")).get().offset();
        }
    }

    static void report(String what, Callable<long[]> run) throws Exception {
        for (int r = 0; r < ROUNDS; r++) {
            long[] res = run.call();
            System.out.printf("RESULT %-28s round %d: first ack %6d ms, RSS %7d kB%n", what, r + 1, res[0], res[1]);
        }
    }

    static long[] brook(int nodes) throws Exception {
        long t0 = System.nanoTime();
        try (Brook b = Brook.cluster().nodes(nodes).withConfig("auto.create.topics.enable", "true").start()) {
            firstAck(b.bootstrapServers());
            long ms = (System.nanoTime() - t0) / 1_000_000;
            long rss = rssKb(b.supervisorPid());
            for (Map<String, Object> n : b.nodes()) rss += rssKb(((Number) n.get("pid")).longValue());
            return new long[] {ms, rss};
        }
    }

    static long[] spring(int brokers) throws Exception {
        System.gc();
        long before = rssKb(ProcessHandle.current().pid());
        long t0 = System.nanoTime();
        EmbeddedKafkaKraftBroker k = new EmbeddedKafkaKraftBroker(brokers, 1, "bench");
        k.afterPropertiesSet();
        try {
            firstAck(k.getBrokersAsString());
            long ms = (System.nanoTime() - t0) / 1_000_000;
            return new long[] {ms, rssKb(ProcessHandle.current().pid()) - before};
        } finally {
            k.destroy();
        }
    }

    @Test
    void startup() throws Exception {
        report("brook-junit 1 node", () -> brook(1));
        report("brook-junit 3 nodes", () -> brook(3));
        report("EmbeddedKafkaKraftBroker 1", () -> spring(1));
        report("EmbeddedKafkaKraftBroker 3", () -> spring(3));
    }
}

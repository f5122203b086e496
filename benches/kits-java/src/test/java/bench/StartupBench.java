package bench;

import dev.brook.junit.Brook;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.springframework.kafka.test.EmbeddedKafkaKraftBroker;

/**
 * Time from a test's first line to the first acknowledged produce (acks=all), and resident memory, for the Brook
 * kit and spring-kafka-test's EmbeddedKafkaKraftBroker (1 and 3 brokers), in one JVM, alternating which goes first.
 * Both start with the topic "bench" (1 partition, as many replicas as brokers), as EmbeddedKafkaKraftBroker creates
 * its topics before it returns; Brook also without it (auto-created on the first produce). Brook's memory is its
 * processes' RSS (supervisor and nodes); the embedded broker's is a JVM of its own running it (and a producer), next
 * to a JVM running only a producer against Brook: the whole RSS of each, at the first ack.
 */
class StartupBench {
    static final int ROUNDS = Integer.getInteger("bench.rounds", 5);
    /** Bound on a child JVM's run. */
    static final long CHILD_TIMEOUT_S = 120;

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

    /** {start ms, first ack ms, RSS kB}: start is the line that starts the broker returning. */
    static long[] brook(int nodes, boolean topicAtStart) throws Exception {
        long t0 = System.nanoTime();
        Brook.Builder b = Brook.cluster().nodes(nodes);
        if (topicAtStart) b.topic("bench", 1, nodes);
        else b.withConfig("auto.create.topics.enable", "true");
        try (Brook brook = b.start()) {
            long started = (System.nanoTime() - t0) / 1_000_000;
            firstAck(brook.bootstrapServers());
            long ms = (System.nanoTime() - t0) / 1_000_000;
            long rss = rssKb(brook.supervisorPid());
            for (Map<String, Object> n : brook.nodes()) rss += rssKb(((Number) n.get("pid")).longValue());
            return new long[] {started, ms, rss};
        }
    }

    static long[] spring(int brokers) throws Exception {
        long t0 = System.nanoTime();
        EmbeddedKafkaKraftBroker k = new EmbeddedKafkaKraftBroker(brokers, 1, "bench");
        k.afterPropertiesSet();
        try {
            long started = (System.nanoTime() - t0) / 1_000_000;
            firstAck(k.getBrokersAsString());
            return new long[] {started, (System.nanoTime() - t0) / 1_000_000, 0};
        } finally {
            k.destroy();
        }
    }

    static void print(String what, int round, long[] r) {
        System.out.printf("RESULT %-40s round %d: started %6d ms, first ack %6d ms, RSS %7d kB%n", what, round,
            r[0], r[1], r[2]);
    }

    @Test
    void startup() throws Exception {
        for (int nodes : new int[] {1, 3}) {
            List<String> names = List.of("brook-junit " + nodes + " node(s), topic at start",
                "brook-junit " + nodes + " node(s), auto-created topic", "EmbeddedKafkaKraftBroker " + nodes);
            List<Callable<long[]>> runs = List.of(() -> brook(nodes, true), () -> brook(nodes, false),
                () -> spring(nodes));
            for (int r = 0; r < ROUNDS; r++) {
                // Alternate the order: whoever runs first in a round pays for what the JVM has not loaded yet.
                List<Integer> order = new ArrayList<>(List.of(0, 1, 2));
                if (r % 2 == 1) java.util.Collections.reverse(order);
                for (int i : order) print(names.get(i), r + 1, runs.get(i).call());
            }
        }
    }

    /** The embedded broker alone in a fresh JVM: its whole RSS at the first ack; the same for a producer-only JVM. */
    @Test
    void memoryInOwnJvm() throws Exception {
        for (int nodes : new int[] {1, 3}) {
            for (int r = 0; r < ROUNDS; r++) {
                System.out.println("RESULT own JVM, embedded " + nodes + ": " + child(Alone.class, "embedded", nodes));
                try (Brook b = Brook.cluster().nodes(nodes).topic("bench", 1, nodes).start()) {
                    String jvm = child(Alone.class, "producer:" + b.bootstrapServers(), nodes);
                    long rss = rssKb(b.supervisorPid());
                    long sup = rss;
                    for (Map<String, Object> n : b.nodes()) rss += rssKb(((Number) n.get("pid")).longValue());
                    System.out.println("RESULT own JVM, producer only against brook " + nodes + ": " + jvm
                        + "; brook processes " + rss + " kB (supervisor " + sup + " kB)");
                }
            }
        }
    }

    static String child(Class<?> main, String what, int nodes) throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process p = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), main.getName(), what,
            String.valueOf(nodes)).redirectErrorStream(true).start();
        String last = "";
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) if (line.startsWith("ALONE ")) last = line.substring(6);
        }
        if (!p.waitFor(CHILD_TIMEOUT_S, TimeUnit.SECONDS)) p.destroyForcibly();
        return last;
    }

    /** Child JVM main: {@code embedded N} starts the embedded broker; {@code producer:BOOTSTRAP} only produces. */
    public static final class Alone {
        public static void main(String[] args) throws Exception {
            long self = ProcessHandle.current().pid();
            long t0 = System.nanoTime();
            if (args[0].equals("embedded")) {
                EmbeddedKafkaKraftBroker k = new EmbeddedKafkaKraftBroker(Integer.parseInt(args[1]), 1, "bench");
                k.afterPropertiesSet();
                firstAck(k.getBrokersAsString());
                long ms = (System.nanoTime() - t0) / 1_000_000;
                System.out.println("ALONE first ack " + ms + " ms, JVM RSS " + rssKb(self) + " kB");
                k.destroy();
            } else {
                firstAck(args[0].substring("producer:".length()));
                long ms = (System.nanoTime() - t0) / 1_000_000;
                System.out.println("ALONE first ack " + ms + " ms, JVM RSS " + rssKb(self) + " kB");
            }
            System.exit(0);
        }
    }
}

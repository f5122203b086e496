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
 * processes' RSS and PSS (supervisor and nodes); the embedded broker's is a JVM of its own running it (and a
 * producer), next to a JVM running only a producer against Brook: the RSS and PSS of each at the first ack, and its
 * heap in use after a full collection. Each close() (or destroy()) is timed too.
 */
class StartupBench {
    static final int ROUNDS = Integer.getInteger("bench.rounds", 5);
    /** Bound on a child JVM's run. */
    static final long CHILD_TIMEOUT_S = 120;
    /** Bound on the first produce: a 3-broker embedded Kafka in a fresh JVM once waited 15 minutes for its ack. */
    static final long FIRST_ACK_TIMEOUT_S = 60;

    static long rssKb(long pid) {
        return procField("/proc/" + pid + "/status", "VmRSS:");
    }

    /** Proportional set size: each page shared by n processes (the binary's code) counts 1/n in each. */
    static long pssKb(long pid) {
        return procField("/proc/" + pid + "/smaps_rollup", "Pss:");
    }

    static long procField(String file, String key) {
        try {
            for (String l : Files.readAllLines(Path.of(file))) {
                if (l.startsWith(key)) return Long.parseLong(l.replaceAll("[^0-9]", ""));
            }
        } catch (IOException e) {
            return 0;
        }
        return 0;
    }

    /** {RSS, PSS} in kB of the supervisor and every node. */
    static long[] brookMemoryKb(Brook brook) {
        long[] m = {rssKb(brook.supervisorPid()), pssKb(brook.supervisorPid())};
        for (Map<String, Object> n : brook.nodes()) {
            long pid = ((Number) n.get("pid")).longValue();
            m[0] += rssKb(pid);
            m[1] += pssKb(pid);
        }
        return m;
    }

    static long firstAck(String bootstrap) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            return prod.send(new ProducerRecord<>("bench", "v")).get(FIRST_ACK_TIMEOUT_S, TimeUnit.SECONDS).offset();
        }
    }

    /** {start ms, first ack ms, RSS kB, PSS kB, close ms}: start is the line that starts the broker returning. */
    static long[] brook(int nodes, boolean topicAtStart) throws Exception {
        long t0 = System.nanoTime();
        Brook.Builder b = Brook.cluster().nodes(nodes);
        if (topicAtStart) b.topic("bench", 1, nodes);
        else b.withConfig("auto.create.topics.enable", "true");
        Brook brook = b.start();
        long started = (System.nanoTime() - t0) / 1_000_000;
        long ms;
        long[] mem;
        try {
            firstAck(brook.bootstrapServers());
            ms = (System.nanoTime() - t0) / 1_000_000;
            mem = brookMemoryKb(brook);
        } finally {
            long c0 = System.nanoTime();
            brook.close();
            closeMs = (System.nanoTime() - c0) / 1_000_000;
        }
        return new long[] {started, ms, mem[0], mem[1], closeMs};
    }

    /** The last close's duration, for the result line. */
    static long closeMs;

    static long[] spring(int brokers) throws Exception {
        long t0 = System.nanoTime();
        EmbeddedKafkaKraftBroker k = new EmbeddedKafkaKraftBroker(brokers, 1, "bench");
        k.afterPropertiesSet();
        try {
            long started = (System.nanoTime() - t0) / 1_000_000;
            firstAck(k.getBrokersAsString());
            return new long[] {started, (System.nanoTime() - t0) / 1_000_000, 0, 0, 0};
        } finally {
            long c0 = System.nanoTime();
            k.destroy();
            closeMs = (System.nanoTime() - c0) / 1_000_000;
        }
    }

    static void print(String what, int round, long[] r) {
        System.out.printf("RESULT %-40s round %d: started %6d ms, first ack %6d ms, RSS %7d kB, PSS %7d kB, "
            + "close %5d ms%n", what, round, r[0], r[1], r[2], r[3], closeMs);
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

    /**
     * Where the kit's time to the first ack goes, step by step (ms from the test's first line): start() returned, the
     * producer constructed, its first metadata (partitionsFor), the first acks=all acknowledgement; then close().
     * {@code -Dbench.nodes=3} for three nodes. Run it in a fresh JVM to see round 1's class loading.
     */
    @Test
    void phases() throws Exception {
        int nodes = Integer.getInteger("bench.nodes", 1);
        for (int r = 0; r < ROUNDS; r++) {
            long t0 = System.nanoTime();
            Brook brook = Brook.cluster().nodes(nodes).topic("bench", 1, nodes).start();
            long started = System.nanoTime();
            Properties p = new Properties();
            p.put("bootstrap.servers", brook.bootstrapServers());
            p.put("acks", "all");
            long made;
            long metadata;
            long acked;
            try (KafkaProducer<String, String> prod =
                     new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
                made = System.nanoTime();
                prod.partitionsFor("bench");
                metadata = System.nanoTime();
                prod.send(new ProducerRecord<>("bench", "v")).get();
                acked = System.nanoTime();
            }
            long c0 = System.nanoTime();
            brook.close();
            long closed = System.nanoTime();
            System.out.printf("RESULT phases, %d node(s), round %d: start() %d, producer made +%d, metadata +%d, "
                + "first ack +%d = %d ms; close() %d ms%n", nodes, r + 1, ms(started - t0), ms(made - started),
                ms(metadata - made), ms(acked - metadata), ms(acked - t0), ms(closed - c0));
        }
    }

    static long ms(long nanos) {
        return nanos / 1_000_000;
    }

    /** The embedded broker alone in a fresh JVM: its whole RSS at the first ack; the same for a producer-only JVM. */
    @Test
    void memoryInOwnJvm() throws Exception {
        for (int nodes : new int[] {1, 3}) {
            for (int r = 0; r < ROUNDS; r++) {
                System.out.println("RESULT own JVM, embedded " + nodes + ": " + child(Alone.class, "embedded", nodes));
                try (Brook b = Brook.cluster().nodes(nodes).topic("bench", 1, nodes).start()) {
                    String jvm = child(Alone.class, "producer:" + b.bootstrapServers(), nodes);
                    long[] mem = brookMemoryKb(b);
                    System.out.println("RESULT own JVM, producer only against brook " + nodes + ": " + jvm
                        + "; brook processes RSS " + mem[0] + " kB, PSS " + mem[1] + " kB (supervisor RSS "
                        + rssKb(b.supervisorPid()) + " kB, PSS " + pssKb(b.supervisorPid()) + " kB)");
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

    /** The JVM's RSS and PSS, then its heap in use after a full collection (the live objects). */
    static String jvmMemory(long self) {
        long rss = rssKb(self);
        long pss = pssKb(self);
        System.gc();
        Runtime rt = Runtime.getRuntime();
        long heapKb = (rt.totalMemory() - rt.freeMemory()) / 1024;
        return "JVM RSS " + rss + " kB, PSS " + pss + " kB, heap used after GC " + heapKb + " kB";
    }

    /** Child JVM main: {@code embedded N} starts the embedded broker; {@code producer:BOOTSTRAP} only produces. */
    public static final class Alone {
        public static void main(String[] args) {
            try {
                run(args);
            } catch (Exception e) {
                // The embedded brokers' threads would keep this JVM, and the benchmark reading its output, alive.
                System.out.println("ALONE failed: " + e);
            }
            System.exit(0);
        }

        static void run(String[] args) throws Exception {
            long self = ProcessHandle.current().pid();
            long t0 = System.nanoTime();
            if (args[0].equals("embedded")) {
                EmbeddedKafkaKraftBroker k = new EmbeddedKafkaKraftBroker(Integer.parseInt(args[1]), 1, "bench");
                k.afterPropertiesSet();
                firstAck(k.getBrokersAsString());
                long ms = (System.nanoTime() - t0) / 1_000_000;
                System.out.println("ALONE first ack " + ms + " ms, " + jvmMemory(self));
                k.destroy();
            } else {
                firstAck(args[0].substring("producer:".length()));
                long ms = (System.nanoTime() - t0) / 1_000_000;
                System.out.println("ALONE first ack " + ms + " ms, " + jvmMemory(self));
            }
        }
    }
}

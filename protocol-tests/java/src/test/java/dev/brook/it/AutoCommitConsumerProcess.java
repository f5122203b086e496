package dev.brook.it;

import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * A group consumer with enable.auto.commit=true in a JVM of its own, so that a test can crash it with SIGKILL: an
 * in-process consumer cannot crash, since its close() commits. It consumes partition 0 of a topic and says on stdout
 * what it did, one line per step, for the test to follow:
 * <ul>
 *   <li>{@code processed N} for every record;</li>
 *   <li>{@code committed N} once the group's committed offset is the end of the first {@code first} records (an
 *       auto-commit inside a later poll());</li>
 *   <li>{@code stopped} after {@code total} records: it polls no more, so no auto-commit can follow, and waits to be
 *       killed (stdin closing ends it too).</li>
 * </ul>
 * Arguments: bootstrap, topic, group, first, total.
 */
public final class AutoCommitConsumerProcess {
    /** How long the process runs at most, whatever happens. */
    static final Duration RUN_MAX = Duration.ofSeconds(90);
    /** Auto-commit interval: short, so the first commit comes within a second. */
    static final int AUTO_COMMIT_INTERVAL_MS = 1000;

    private AutoCommitConsumerProcess() {}

    public static void main(String[] args) throws IOException {
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        long first = Long.parseLong(args[3]);
        long total = Long.parseLong(args[4]);
        TopicPartition tp = new TopicPartition(topic, 0);
        long processed = 0;
        boolean saidCommitted = false;
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, group)) {
            c.subscribe(List.of(topic));
            long deadline = System.nanoTime() + RUN_MAX.toNanos();
            while (System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    say("processed " + r.offset());
                    processed++;
                }
                if (processed == total) {
                    say("stopped");
                    // Killed here by the test; the read returns only if the test is gone.
                    System.in.read();
                    Runtime.getRuntime().halt(3);
                }
                if (!saidCommitted && processed == first) {
                    OffsetAndMetadata om = c.committed(Set.of(tp), Duration.ofSeconds(10)).get(tp);
                    if (om != null && om.offset() == first) {
                        say("committed " + om.offset());
                        saidCommitted = true;
                    }
                }
            }
        }
        System.exit(2);
    }

    /** The group consumer of the suite, with auto-commit on and five records per poll. */
    private static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String group) {
        return GroupSupport.groupConsumer(bootstrap, group, Map.of(
            ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "true",
            ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, String.valueOf(AUTO_COMMIT_INTERVAL_MS),
            ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5",
            // The lowest the broker accepts (group.min.session.timeout.ms): the dead member leaves the group soon.
            ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000"));
    }

    private static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}

package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Produced;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A Kafka Streams 4.4 application on the streams rebalance protocol ({@code group.protocol=streams},
 * KIP-1071): the broker initializes the group's topology, creates its repartition and changelog
 * topics, and assigns its tasks. A word count with a repartition runs on two instances; one is
 * closed (it leaves the group) and the other takes over its tasks. The counts read from the output
 * topic are exact, and the group seen through {@code Admin.describeStreamsGroups} and Kafka's own
 * {@code kafka-streams-groups.sh --describe} shows the members and their tasks. Runs against Kafka
 * 4.4 too ({@code scripts/differential}).
 */
@ExtendWith(BrokerLogOnFailure.class)
class StreamsGroupsTest {
    static final Duration WAIT = Duration.ofSeconds(60);

    @Test
    void wordCountMovesToTheRemainingInstance() throws Exception {
        String bootstrap = TestBrokers.bootstrap();
        String app = Clients.uniqueTopic("wordcount");
        String input = app + "-in";
        String output = app + "-out";
        Clients.createTopic(bootstrap, input, 3);
        Clients.createTopic(bootstrap, output, 1);
        Map<String, Long> counts = new ConcurrentHashMap<>();
        try (Admin admin = Clients.admin(bootstrap);
             KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap);
             KafkaConsumer<byte[], byte[]> reader = Clients.consumer(bootstrap)) {
            reader.assign(List.of(new TopicPartition(output, 0)));
            reader.seekToBeginning(reader.assignment());
            KafkaStreams a = start(bootstrap, app, input, output, "a");
            KafkaStreams b = start(bootstrap, app, input, output, "b");
            try {
                awaitRunning(a, b);
                // Both instances hold tasks: 3 of the source subtopology and 3 of the counting one.
                StreamsGroupDescription d = awaitGroup(admin, app,
                    g -> g.members().size() == 2 && g.groupState() == GroupState.STABLE
                        && g.members().stream().allMatch(m -> activeTasks(m.assignment()) > 0));
                assertEquals(6, d.members().stream().mapToInt(m -> activeTasks(m.assignment())).sum());
                assertEquals(2, d.subtopologies().size(), d.toString());

                Map<String, Long> expected = new HashMap<>();
                send(producer, input, expected, "apple banana cherry", "banana cherry", "cherry date");
                awaitCounts(reader, counts, expected);

                KafkaTool.Run described = KafkaTool.tool("streams.StreamsGroupCommand", bootstrap,
                    "--describe", "--group", app, "--members");
                assertTrue(described.out().contains(app), described.out());

                b.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                    .withTimeout(WAIT));
                d = awaitGroup(admin, app, g -> g.members().size() == 1 && g.groupState() == GroupState.STABLE
                    && activeTasks(g.members().iterator().next().assignment()) == 6);
                send(producer, input, expected, "date apple", "elderberry apple banana");
                awaitCounts(reader, counts, expected);
            } finally {
                a.close(WAIT);
                b.close(WAIT);
            }
        }
    }

    static KafkaStreams start(String bootstrap, String app, String input, String output, String name)
            throws Exception {
        Path stateDir = Files.createTempDirectory("brook-streams-" + name);
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        p.put(StreamsConfig.CLIENT_ID_CONFIG, app + "-" + name);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(input)
            .flatMapValues(line -> Arrays.asList(line.split(" ")))
            .groupBy((key, word) -> word)
            .count()
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.start();
        return streams;
    }

    static int activeTasks(StreamsGroupMemberAssignment a) {
        return a.activeTasks().stream().mapToInt(t -> t.partitions().size()).sum();
    }

    static void send(KafkaProducer<byte[], byte[]> producer, String topic, Map<String, Long> expected,
            String... lines) throws Exception {
        for (String line : lines) {
            producer.send(new ProducerRecord<>(topic, line.getBytes(UTF_8), line.getBytes(UTF_8))).get();
            for (String w : line.split(" ")) expected.merge(w, 1L, Long::sum);
        }
    }

    /** Reads the output until every word's latest count is the expected one. */
    static void awaitCounts(KafkaConsumer<byte[], byte[]> reader, Map<String, Long> counts,
            Map<String, Long> expected) {
        await(() -> {
            for (ConsumerRecord<byte[], byte[]> r : reader.poll(Duration.ofMillis(200))) {
                counts.put(new String(r.key(), UTF_8), java.nio.ByteBuffer.wrap(r.value()).getLong());
            }
            return counts.equals(expected);
        }, () -> "counts " + counts + ", expected " + expected);
    }

    static void awaitRunning(KafkaStreams... all) {
        await(() -> Arrays.stream(all).allMatch(s -> s.state() == KafkaStreams.State.RUNNING),
            () -> "states " + Arrays.stream(all).map(KafkaStreams::state).toList());
    }

    static StreamsGroupDescription awaitGroup(Admin admin, String group,
            java.util.function.Predicate<StreamsGroupDescription> ok) {
        StreamsGroupDescription[] last = new StreamsGroupDescription[1];
        await(() -> {
            last[0] = admin.describeStreamsGroups(Set.of(group)).describedGroups().get(group).get();
            return ok.test(last[0]);
        }, () -> "group " + last[0]);
        return last[0];
    }

    static void await(ThrowingSupplier condition, java.util.function.Supplier<String> what) {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            try {
                if (condition.get()) return;
                Thread.sleep(100);
            } catch (Exception e) {
                if (e instanceof InterruptedException) Thread.currentThread().interrupt();
            }
        }
        fail("timed out: " + what.get());
    }

    interface ThrowingSupplier {
        boolean get() throws Exception;
    }
}

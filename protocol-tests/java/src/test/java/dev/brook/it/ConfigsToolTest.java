package dev.brook.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Kafka 4.4's own {@code kafka-configs.sh} against a broker: {@code org.apache.kafka.tools.ConfigCommand} from
 * {@code kafka-tools} 4.4.0, run as a child process with the test classpath as the script runs it. It describes a
 * broker and a topic with {@code --all} (every key with its source and synonyms, as Kafka's {@code ConfigHelper}
 * lists them) and alters a topic and a dynamic broker key with {@code --add-config}.
 */
@ExtendWith(BrokerLogOnFailure.class)
class ConfigsToolTest {
    /** Bound on one run of the tool (a JVM start and a few admin requests). */
    static final long TOOL_RUN_MS_MAX = 60_000;

    static BrookBroker broker;
    static String bootstrap;

    @BeforeAll
    static void start() {
        assumeFalse(TestBrokers.isExternal(), "the config tests set server.properties of their own broker");
        broker = BrookBroker.start("configs-tool", Map.of("log.retention.hours", "24"));
        bootstrap = broker.bootstrap();
    }

    @AfterAll
    static void stop() {
        if (broker != null) broker.close();
    }

    /** Runs {@code kafka-configs.sh --bootstrap-server <broker> args...}; its standard output. */
    static String tool(String... args) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("-cp");
        cmd.add(System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")));
        cmd.add("org.apache.kafka.tools.ConfigCommand");
        cmd.add("--bootstrap-server");
        cmd.add(bootstrap);
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).start();
        CompletableFuture<String> out = drain(p.getInputStream());
        CompletableFuture<String> err = drain(p.getErrorStream());
        if (!p.waitFor(TOOL_RUN_MS_MAX, TimeUnit.MILLISECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("kafka-configs " + String.join(" ", args) + " did not finish in "
                + TOOL_RUN_MS_MAX + " ms");
        }
        String o = out.get(10, TimeUnit.SECONDS);
        String e = err.get(10, TimeUnit.SECONDS);
        System.out.println("kafka-configs " + String.join(" ", args) + " printed:\n" + o);
        assertEquals(0, p.exitValue(), "kafka-configs " + String.join(" ", args) + "\nstdout:\n" + o
            + "\nstderr:\n" + e);
        return o;
    }

    private static CompletableFuture<String> drain(InputStream in) {
        return CompletableFuture.supplyAsync(() -> {
            try (in) {
                ByteArrayOutputStream buf = new ByteArrayOutputStream();
                in.transferTo(buf);
                return buf.toString(StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
    }

    /** The line the tool prints for {@code key}, trimmed. */
    static String line(String out, String key) {
        return out.lines().map(String::strip).filter(l -> l.startsWith(key + "=")).findFirst()
            .orElseThrow(() -> new AssertionError(key + " not listed in\n" + out));
    }

    @Test
    void describesABrokerWithSourcesAndSynonyms() throws Exception {
        String node = broker.readyFields().get("node.id");
        String out = tool("--describe", "--entity-type", "brokers", "--entity-name", node, "--all");
        assertTrue(out.contains("All configs for broker " + node + " are:"), out);
        assertEquals("log.retention.hours=24 sensitive=false synonyms={STATIC_BROKER_CONFIG:log.retention.hours=24, "
            + "DEFAULT_CONFIG:log.retention.hours=168}", line(out, "log.retention.hours"));
        assertEquals("log.retention.ms=null sensitive=false synonyms={}", line(out, "log.retention.ms"));
    }

    @Test
    void describesEveryTopicKeyAndAltersOne() throws Exception {
        String t = Clients.uniqueTopic("configs-tool");
        Clients.createTopic(bootstrap, t, 1);
        String out = tool("--describe", "--entity-type", "topics", "--entity-name", t, "--all");
        assertTrue(out.contains("All configs for topic " + t + " are:"), out);
        assertEquals("retention.ms=86400000 sensitive=false synonyms={}", line(out, "retention.ms"));
        assertEquals("delete.retention.ms=86400000 sensitive=false "
            + "synonyms={DEFAULT_CONFIG:log.cleaner.delete.retention.ms=86400000}", line(out, "delete.retention.ms"));
        line(out, "min.cleanable.dirty.ratio");
        line(out, "local.retention.bytes");

        tool("--alter", "--entity-type", "topics", "--entity-name", t, "--add-config",
            "min.compaction.lag.ms=5000,retention.ms=3600000");
        out = tool("--describe", "--entity-type", "topics", "--entity-name", t, "--all");
        assertEquals("min.compaction.lag.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:min.compaction.lag.ms=5000, "
            + "DEFAULT_CONFIG:log.cleaner.min.compaction.lag.ms=0}", line(out, "min.compaction.lag.ms"));
        assertEquals("retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}",
            line(out, "retention.ms"));
    }

    @Test
    void altersADynamicBrokerKey() throws Exception {
        String node = broker.readyFields().get("node.id");
        tool("--alter", "--entity-type", "brokers", "--entity-name", node, "--add-config", "log.retention.bytes=5000000");
        String out = tool("--describe", "--entity-type", "brokers", "--entity-name", node, "--all");
        assertEquals("log.retention.bytes=5000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.bytes=5000000, "
            + "DEFAULT_CONFIG:log.retention.bytes=-1}", line(out, "log.retention.bytes"));
        out = tool("--describe", "--entity-type", "brokers", "--entity-name", node);
        assertTrue(out.contains("log.retention.bytes=5000000"), out);
    }
}

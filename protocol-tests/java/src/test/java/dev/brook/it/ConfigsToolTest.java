package dev.brook.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Kafka 4.4's own {@code kafka-configs.sh} against a broker: {@code org.apache.kafka.tools.ConfigCommand} from
 * {@code kafka-tools} 4.4.0, run as a child process with the test classpath as the script runs it. It describes a
 * broker, a group and a topic with {@code --all} (every key with its source and synonyms, as Kafka's {@code ConfigHelper}
 * lists them) and alters a topic and a dynamic broker key with {@code --add-config}.
 */
@ExtendWith(BrokerLogOnFailure.class)
class ConfigsToolTest {

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
        return KafkaTool.tool("ConfigCommand", bootstrap, args).out();
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
        // Every broker key Kafka 4.4 declares is listed, those Brook does not act on with Kafka's default.
        assertEquals("background.threads=10 sensitive=false synonyms={DEFAULT_CONFIG:background.threads=10}",
            line(out, "background.threads"));
        assertEquals("num.replica.fetchers=1 sensitive=false synonyms={DEFAULT_CONFIG:num.replica.fetchers=1}",
            line(out, "num.replica.fetchers"));
        assertEquals("ssl.keystore.password=null sensitive=true synonyms={}", line(out, "ssl.keystore.password"));
        long listed = out.lines().filter(l -> l.contains(" sensitive=")).count();
        assertTrue(listed >= 340, listed + " keys listed:\n" + out);
    }

    @Test
    void describesEveryGroupKey() throws Exception {
        String out = tool("--describe", "--entity-type", "groups", "--entity-name", "configs-tool-group", "--all");
        assertTrue(out.contains("All configs for group configs-tool-group are:"), out);
        // A key's default comes from its broker synonym, or from the group key itself when it has none.
        assertEquals("consumer.session.timeout.ms=45000 sensitive=false "
            + "synonyms={DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}", line(out, "consumer.session.timeout.ms"));
        assertEquals("share.delivery.count.limit=5 sensitive=false "
            + "synonyms={DEFAULT_CONFIG:group.share.delivery.count.limit=5}", line(out, "share.delivery.count.limit"));
        assertEquals("streams.assignor.name=sticky sensitive=false "
            + "synonyms={DEFAULT_CONFIG:group.streams.assignors=sticky}", line(out, "streams.assignor.name"));
        assertEquals("share.isolation.level=read_uncommitted sensitive=false "
            + "synonyms={DEFAULT_CONFIG:share.isolation.level=read_uncommitted}", line(out, "share.isolation.level"));
        assertEquals("errors.deadletterqueue.topic.name= sensitive=false "
            + "synonyms={DEFAULT_CONFIG:errors.deadletterqueue.topic.name=}", line(out, "errors.deadletterqueue.topic.name"));
        assertEquals("streams.rack.aware.assignment.tags= sensitive=false "
            + "synonyms={DEFAULT_CONFIG:group.streams.rack.aware.assignment.tags=}",
            line(out, "streams.rack.aware.assignment.tags"));
        assertEquals(21, out.lines().filter(l -> l.contains(" sensitive=")).count(), out);
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

    /**
     * Group overrides as Kafka's {@code GroupConfig} takes them: stored and described with their source, and the
     * resulting set checked against the broker's bounds (a session timeout below
     * {@code group.consumer.min.session.timeout.ms} is refused with Kafka's message).
     */
    @Test
    void altersAGroupKeyWithinTheBrokersBounds() throws Exception {
        String g = Clients.uniqueTopic("configs-tool-group");
        tool("--alter", "--entity-type", "groups", "--entity-name", g, "--add-config",
            "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000");
        String out = tool("--describe", "--entity-type", "groups", "--entity-name", g, "--all");
        assertEquals("consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
            + "consumer.session.timeout.ms=50000, DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}",
            line(out, "consumer.session.timeout.ms"));
        out = tool("--describe", "--entity-type", "groups", "--entity-name", g);
        assertTrue(out.contains("consumer.heartbeat.interval.ms=6000"), out);

        KafkaTool.Run refused = KafkaTool.run("ConfigCommand", bootstrap, "--alter", "--entity-type", "groups",
            "--entity-name", g, "--add-config", "consumer.session.timeout.ms=40000");
        String said = refused.out() + refused.err();
        assertTrue(refused.exit() != 0
            && said.contains("consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."), said);

        tool("--alter", "--entity-type", "groups", "--entity-name", g, "--delete-config",
            "consumer.session.timeout.ms,consumer.heartbeat.interval.ms");
        out = tool("--describe", "--entity-type", "groups", "--entity-name", g, "--all");
        assertEquals("consumer.session.timeout.ms=45000 sensitive=false synonyms={DEFAULT_CONFIG:"
            + "group.consumer.session.timeout.ms=45000}", line(out, "consumer.session.timeout.ms"));
    }
    /**
     * Client quotas as {@code kafka-configs --entity-type clients|users} sets and describes them (AlterClientQuotas,
     * DescribeClientQuotas): a client-id's byte rates, a user's quota for the default client-id, a key Kafka does not
     * know refused, and a deleted key gone.
     */
    @Test
    void altersAndDescribesClientAndUserQuotas() throws Exception {
        String client = Clients.uniqueTopic("quota-client");
        tool("--alter", "--entity-type", "clients", "--entity-name", client, "--add-config",
            "producer_byte_rate=1048576,consumer_byte_rate=2097152");
        String out = tool("--describe", "--entity-type", "clients", "--entity-name", client);
        assertTrue(out.contains("client-id '" + client + "'") && out.contains("producer_byte_rate=1048576.0")
            && out.contains("consumer_byte_rate=2097152.0"), out);

        tool("--alter", "--entity-type", "users", "--entity-name", "quota-user", "--entity-type", "clients",
            "--entity-default", "--add-config", "request_percentage=50");
        out = tool("--describe", "--entity-type", "users", "--entity-name", "quota-user", "--entity-type", "clients",
            "--entity-default");
        assertTrue(out.contains("user-principal 'quota-user'") && out.contains("request_percentage=50.0"), out);

        KafkaTool.Run refused = KafkaTool.run("ConfigCommand", bootstrap, "--alter", "--entity-type", "clients",
            "--entity-name", client, "--add-config", "producer_byte_rate=1.5");
        String said = refused.out() + refused.err();
        assertTrue(refused.exit() != 0 && said.contains("producer_byte_rate cannot be a fractional value."), said);

        tool("--alter", "--entity-type", "clients", "--entity-name", client, "--delete-config", "producer_byte_rate");
        out = tool("--describe", "--entity-type", "clients", "--entity-name", client);
        assertTrue(!out.contains("producer_byte_rate") && out.contains("consumer_byte_rate=2097152.0"), out);
    }
}

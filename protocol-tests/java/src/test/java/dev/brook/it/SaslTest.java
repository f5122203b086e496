package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.errors.UnsupportedSaslMechanismException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * kafka-clients over SASL_PLAINTEXT: PLAIN users from the listener's JAAS config, SCRAM users
 * created with Admin.alterUserScramCredentials (over PLAIN as the admin user), producer,
 * consumer and admin on each mechanism, and Kafka's exceptions for a wrong password and an
 * unknown mechanism. The broker's server.properties is a Kafka one.
 */
@ExtendWith(BrokerLogOnFailure.class)
class SaslTest {
    static BrookBroker broker;
    static String sasl;

    static final String PLAIN_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required "
        + "username=\"admin\" password=\"admin-secret\" user_admin=\"admin-secret\" user_alice=\"alice-secret\";";
    static final String SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;";

    @BeforeAll
    static void start() {
        Map<String, String> props = new HashMap<>();
        props.put("listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0");
        props.put("listener.name.sasl_plaintext.sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512");
        props.put("listener.name.sasl_plaintext.plain.sasl.jaas.config", PLAIN_JAAS);
        props.put("listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", SCRAM_JAAS);
        props.put("listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config", SCRAM_JAAS);
        broker = BrookBroker.start("sasl", props);
        for (String l : broker.readyFields().get("listeners").split(",")) {
            if (l.startsWith("SASL_PLAINTEXT://")) sasl = l.substring("SASL_PLAINTEXT://".length());
        }
    }

    @AfterAll
    static void stop() {
        if (broker != null) broker.close();
    }

    static Map<String, Object> client(String mechanism, String user, String password) {
        String module = mechanism.equals("PLAIN")
            ? "org.apache.kafka.common.security.plain.PlainLoginModule"
            : "org.apache.kafka.common.security.scram.ScramLoginModule";
        Map<String, Object> p = new HashMap<>();
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
        p.put(SaslConfigs.SASL_MECHANISM, mechanism);
        p.put(SaslConfigs.SASL_JAAS_CONFIG,
            module + " required username=\"" + user + "\" password=\"" + password + "\";");
        return p;
    }

    static Admin admin(Map<String, Object> security) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, sasl);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 15_000);
        p.putAll(security);
        return Admin.create(p);
    }

    /** Produces one record and reads it back, both over SASL with {@code security}. */
    static void roundTrip(Map<String, Object> security) throws Exception {
        String topic = Clients.uniqueTopic("sasl");
        try (Admin a = admin(security)) {
            Clients.createTopic(a, topic, 1, Map.of());
        }
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(sasl, security)) {
            p.send(new ProducerRecord<>(topic, "k".getBytes(UTF_8), "v".getBytes(UTF_8))).get(30, TimeUnit.SECONDS);
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(sasl, security)) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            List<ConsumerRecord<byte[], byte[]>> got = Clients.pollExactly(c, 1, Duration.ofSeconds(30));
            assertEquals("v", new String(got.get(0).value(), UTF_8));
        }
    }

    @Test
    void plainUsersProduceConsumeAndAdminister() throws Exception {
        roundTrip(client("PLAIN", "alice", "alice-secret"));
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"SCRAM-SHA-256", "SCRAM-SHA-512"})
    void scramUsersCreatedWithTheAdminClient(String mechanism) throws Exception {
        ScramMechanism m = ScramMechanism.fromMechanismName(mechanism);
        String user = "bob-" + m.type();
        try (Admin a = admin(client("PLAIN", "admin", "admin-secret"))) {
            a.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(
                user, new ScramCredentialInfo(m, 8192), "bob-secret"))).all().get(30, TimeUnit.SECONDS);
            var described = a.describeUserScramCredentials(List.of(user)).all().get(30, TimeUnit.SECONDS);
            assertEquals(List.of(new ScramCredentialInfo(m, 8192)), described.get(user).credentialInfos());
        }
        roundTrip(client(mechanism, user, "bob-secret"));
        try (Admin a = admin(client(mechanism, user, "wrong"))) {
            ExecutionException e = assertThrows(ExecutionException.class,
                () -> a.describeCluster().nodes().get(30, TimeUnit.SECONDS));
            assertInstanceOf(SaslAuthenticationException.class, e.getCause());
        }
    }

    @Test
    void wrongPasswordAndUnknownMechanism() {
        try (Admin a = admin(client("PLAIN", "alice", "wrong"))) {
            ExecutionException e = assertThrows(ExecutionException.class,
                () -> a.describeCluster().nodes().get(30, TimeUnit.SECONDS));
            assertInstanceOf(SaslAuthenticationException.class, e.getCause());
            assertEquals("Authentication failed: Invalid username or password", e.getCause().getMessage());
        }
        Map<String, Object> oauth = new HashMap<>();
        oauth.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
        oauth.put(SaslConfigs.SASL_MECHANISM, "OAUTHBEARER");
        oauth.put(SaslConfigs.SASL_JAAS_CONFIG,
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"alice\";");
        try (Admin a = admin(oauth)) {
            ExecutionException e = assertThrows(ExecutionException.class,
                () -> a.describeCluster().nodes().get(30, TimeUnit.SECONDS));
            assertInstanceOf(UnsupportedSaslMechanismException.class, e.getCause());
        }
    }
}

package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerTokenCallback;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * kafka-clients over SASL_PLAINTEXT: PLAIN users from the listener's JAAS config, SCRAM users
 * created with Admin.alterUserScramCredentials (over PLAIN as the admin user), OAUTHBEARER with
 * Kafka's unsecured tokens, producer, consumer and admin on each mechanism, and Kafka's
 * exceptions for a wrong password and refused tokens. Sessions last
 * {@code connections.max.reauth.ms} (2 s), so clients re-authenticate (KIP-368) while they
 * work, and a SCRAM user whose credential is deleted is refused at its next re-authentication.
 * StandardAuthorizer with {@code allow.everyone.if.no.acl.found} lets everyone reach what no
 * ACL names, and an ACL shows that a token's subject is the principal. The broker's
 * server.properties is a Kafka one. (An unknown mechanism: protocol-tests/tests/sasl.rs.)
 */
@ExtendWith(BrokerLogOnFailure.class)
class SaslTest {
    static BrookBroker broker;
    static String sasl;

    static final String PLAIN_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required "
        + "username=\"admin\" password=\"admin-secret\" user_admin=\"admin-secret\" user_alice=\"alice-secret\";";
    static final String SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;";
    static final String OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
    /** The broker's OAUTHBEARER login module: Kafka's unsecured validator, requiring scope "kafka". */
    static final String OAUTH_JAAS = OAUTH_MODULE + " required unsecuredLoginStringClaim_sub=\"admin\" "
        + "unsecuredValidatorRequiredScope=\"kafka\";";
    static final long MAX_REAUTH_MS = 2000;
    static final Duration WAIT = Duration.ofSeconds(30);

    @BeforeAll
    static void start() {
        Map<String, String> props = new HashMap<>();
        props.put("listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0");
        props.put("listener.name.sasl_plaintext.sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER");
        props.put("listener.name.sasl_plaintext.plain.sasl.jaas.config", PLAIN_JAAS);
        props.put("listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", SCRAM_JAAS);
        props.put("listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config", SCRAM_JAAS);
        props.put("listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config", OAUTH_JAAS);
        props.put("connections.max.reauth.ms", String.valueOf(MAX_REAUTH_MS));
        props.put("authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer");
        props.put("allow.everyone.if.no.acl.found", "true");
        props.put("super.users", "User:admin");
        props.put("admin.listener", "127.0.0.1:0");
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
    void wrongPassword() {
        try (Admin a = admin(client("PLAIN", "alice", "wrong"))) {
            ExecutionException e = assertThrows(ExecutionException.class,
                () -> a.describeCluster().nodes().get(30, TimeUnit.SECONDS));
            assertInstanceOf(SaslAuthenticationException.class, e.getCause());
            assertEquals("Authentication failed: Invalid username or password", e.getCause().getMessage());
        }
    }

    /** OAUTHBEARER with Kafka's unsecured login callback handler: a token for {@code sub}, with {@code scope} if not null. */
    static Map<String, Object> oauth(String sub, String scope) {
        Map<String, Object> p = new HashMap<>();
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
        p.put(SaslConfigs.SASL_MECHANISM, "OAUTHBEARER");
        p.put(SaslConfigs.SASL_JAAS_CONFIG, OAUTH_MODULE + " required unsecuredLoginStringClaim_sub=\"" + sub + "\""
            + (scope == null ? "" : " unsecuredLoginStringClaim_scope=\"" + scope + "\"") + ";");
        return p;
    }

    /** OAUTHBEARER sending {@code token} as it is ({@link FixedTokenLoginHandler}). */
    static Map<String, Object> oauthToken(String token) {
        Map<String, Object> p = new HashMap<>();
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
        p.put(SaslConfigs.SASL_MECHANISM, "OAUTHBEARER");
        p.put(SaslConfigs.SASL_JAAS_CONFIG, OAUTH_MODULE + " required token=\"" + token + "\";");
        p.put(SaslConfigs.SASL_LOGIN_CALLBACK_HANDLER_CLASS, FixedTokenLoginHandler.class.getName());
        return p;
    }

    /** A client login callback handler whose token is its JAAS option {@code token}, unchecked. */
    public static class FixedTokenLoginHandler implements AuthenticateCallbackHandler {
        private String token;

        @Override
        public void configure(Map<String, ?> configs, String mechanism, List<AppConfigurationEntry> entries) {
            token = (String) entries.get(0).getOptions().get("token");
        }

        @Override
        public void handle(Callback[] callbacks) throws UnsupportedCallbackException {
            for (Callback c : callbacks) {
                if (!(c instanceof OAuthBearerTokenCallback)) throw new UnsupportedCallbackException(c);
                long expires = System.currentTimeMillis() + 3_600_000L;
                ((OAuthBearerTokenCallback) c).token(new OAuthBearerToken() {
                    @Override public String value() { return token; }
                    @Override public Set<String> scope() { return Set.of(); }
                    @Override public long lifetimeMs() { return expires; }
                    @Override public String principalName() { return "fixed"; }
                    @Override public Long startTimeMs() { return null; }
                });
            }
        }

        @Override
        public void close() {}
    }

    /** An unsecured JWS of these JSON header and claims, and signature part. */
    static String jws(String header, String claims, String signature) {
        Base64.Encoder b64 = Base64.getUrlEncoder().withoutPadding();
        return b64.encodeToString(header.getBytes(UTF_8)) + "." + b64.encodeToString(claims.getBytes(UTF_8)) + "."
            + signature;
    }

    /** The SaslAuthenticationException message a client with {@code security} gets. */
    static String refusal(Map<String, Object> security) {
        try (Admin a = admin(security)) {
            ExecutionException e = assertThrows(ExecutionException.class,
                () -> a.describeCluster().nodes().get(30, TimeUnit.SECONDS));
            assertInstanceOf(SaslAuthenticationException.class, e.getCause());
            return e.getCause().getMessage();
        }
    }

    @Test
    void oauthbearerUnsecuredTokensProduceAndConsume() throws Exception {
        roundTrip(oauth("alice", "kafka"));
    }

    @Test
    void oauthbearerTokensRefusedAsKafkaRefusesThem() {
        long now = System.currentTimeMillis() / 1000;
        String none = "{\"alg\":\"none\"}";
        String expired = jws(none, "{\"sub\":\"alice\",\"scope\":\"kafka\",\"exp\":" + (now - 60) + "}", "");
        assertEquals("{\"status\":\"invalid_token\"}", refusal(oauthToken(expired)));
        assertEquals("{\"status\":\"invalid_token\"}", refusal(oauthToken("not-a-jws")));
        String signed = jws("{\"alg\":\"RS256\"}", "{\"sub\":\"alice\",\"scope\":\"kafka\",\"exp\":" + (now + 600) + "}",
            "c2lnbmF0dXJl");
        assertEquals("{\"status\":\"invalid_token\"}", refusal(oauthToken(signed)));
        assertEquals("{\"status\":\"insufficient_scope\", \"scope\":\"[kafka]\"}", refusal(oauth("alice", null)));
    }

    /** The token's subject is the principal ACLs are matched against. */
    @Test
    void oauthbearerSubjectIsThePrincipalAclsSee() throws Exception {
        String topic = Clients.uniqueTopic("sasl-acl");
        AclBinding aliceWrites = new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
            new AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW));
        try (Admin a = admin(client("PLAIN", "admin", "admin-secret"))) {
            Clients.createTopic(a, topic, 1, Map.of());
            a.createAcls(List.of(aliceWrites)).all().get(30, TimeUnit.SECONDS);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (a.describeAcls(aliceWrites.toFilter()).values().get(30, TimeUnit.SECONDS).isEmpty()) {
                if (System.nanoTime() > deadline) throw new AssertionError("the ACL never showed");
                Thread.sleep(50);
            }
        }
        try {
            Map<String, Object> mallory = new HashMap<>(oauth("mallory", "kafka"));
            mallory.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 10_000);
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(sasl, mallory)) {
                ExecutionException e = assertThrows(ExecutionException.class,
                    () -> p.send(new ProducerRecord<>(topic, "v".getBytes(UTF_8))).get(30, TimeUnit.SECONDS));
                assertInstanceOf(TopicAuthorizationException.class, e.getCause());
            }
            try (KafkaProducer<byte[], byte[]> p = Clients.producer(sasl, oauth("alice", "kafka"))) {
                p.send(new ProducerRecord<>(topic, "v".getBytes(UTF_8))).get(30, TimeUnit.SECONDS);
            }
        } finally {
            try (Admin a = admin(client("PLAIN", "admin", "admin-secret"))) {
                a.deleteAcls(List.of(aliceWrites.toFilter())).all().get(30, TimeUnit.SECONDS);
            }
        }
    }

    /** A client metric's value (producer-metrics, which counts every connection's authentications). */
    static double clientMetric(KafkaProducer<byte[], byte[]> p, String name) {
        for (Map.Entry<MetricName, ? extends Metric> e : p.metrics().entrySet()) {
            if (e.getKey().name().equals(name) && e.getKey().group().equals("producer-metrics")) {
                return ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        throw new AssertionError("no producer-metrics " + name);
    }

    /** Brook's /metrics sample {@code name{listener="SASL_PLAINTEXT"}}; -1 on a broker without it (Kafka). */
    static long brokerMetric(String name) throws Exception {
        String adminAddr = broker.readyFields().get("admin");
        if (adminAddr == null) return -1;
        HttpRequest req = HttpRequest.newBuilder(URI.create("http://" + adminAddr + "/metrics"))
            .timeout(Duration.ofSeconds(10)).build();
        String body = HttpClient.newHttpClient().send(req, HttpResponse.BodyHandlers.ofString()).body();
        String prefix = name + "{listener=\"SASL_PLAINTEXT\"} ";
        for (String line : body.split("\n")) {
            if (line.startsWith(prefix)) return (long) Double.parseDouble(line.substring(prefix.length()));
        }
        return 0;
    }

    /** Sends one record and waits for it; the pause paces the load (about 10 records a second). */
    static void sendOne(KafkaProducer<byte[], byte[]> p, String topic) throws Exception {
        p.send(new ProducerRecord<>(topic, "v".getBytes(UTF_8))).get(30, TimeUnit.SECONDS);
        Thread.sleep(100);
    }

    /**
     * KIP-368: with sessions of {@code connections.max.reauth.ms}, a producer keeps producing across
     * re-authentications, which both it and (on Brook) the broker count.
     */
    @Test
    void producersKeepProducingAcrossReauthentications() throws Exception {
        String topic = Clients.uniqueTopic("sasl-reauth");
        try (Admin a = admin(client("PLAIN", "admin", "admin-secret"))) {
            Clients.createTopic(a, topic, 1, Map.of());
        }
        long brokerBefore = brokerMetric("brook_successful_reauthentication_total");
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(sasl, oauth("alice", "kafka"))) {
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (clientMetric(p, "successful-reauthentication-total") < 3) {
                if (System.nanoTime() > deadline) throw new AssertionError("fewer than 3 re-authentications");
                sendOne(p, topic);
            }
            assertEquals(0.0, clientMetric(p, "failed-reauthentication-total"));
        }
        long brokerAfter = brokerMetric("brook_successful_reauthentication_total");
        if (brokerBefore >= 0) {
            assertTrue(brokerAfter - brokerBefore >= 3,
                "broker counted " + (brokerAfter - brokerBefore) + " re-authentications");
        }
    }

    /** A SCRAM user whose credential is deleted is refused at its next re-authentication. */
    @Test
    void deletedScramCredentialsFailTheNextReauthentication() throws Exception {
        String topic = Clients.uniqueTopic("sasl-revoked");
        String user = "carol";
        try (Admin a = admin(client("PLAIN", "admin", "admin-secret"))) {
            Clients.createTopic(a, topic, 1, Map.of());
            a.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(
                user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "carol-secret")))
                .all().get(30, TimeUnit.SECONDS);
        }
        long brokerBefore = brokerMetric("brook_failed_reauthentication_total");
        Map<String, Object> carol = new HashMap<>(client("SCRAM-SHA-256", user, "carol-secret"));
        carol.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 10_000);
        carol.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 10_000);
        carol.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 5_000);
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(sasl, carol)) {
            sendOne(p, topic);
            try (Admin a = admin(client("PLAIN", "admin", "admin-secret"))) {
                a.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)))
                    .all().get(30, TimeUnit.SECONDS);
            }
            // Records keep the connections busy; once refused, their sends fail (not awaited).
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (clientMetric(p, "failed-reauthentication-total") < 1) {
                if (System.nanoTime() > deadline) throw new AssertionError("no re-authentication was refused");
                p.send(new ProducerRecord<>(topic, "v".getBytes(UTF_8)));
                Thread.sleep(100);
            }
            p.close(Duration.ZERO);
        }
        if (brokerBefore >= 0) {
            assertTrue(
                brokerMetric("brook_failed_reauthentication_total") - brokerBefore >= 1);
        }
    }
}


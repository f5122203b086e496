package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import java.io.InputStream;
import java.io.OutputStream;
import java.math.BigInteger;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.Signature;
import java.security.interfaces.ECPublicKey;
import java.security.interfaces.RSAPublicKey;
import java.security.spec.ECGenParameterSpec;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * OAUTHBEARER with signed tokens, as Kafka's OAuthBearerValidatorCallbackHandler checks them: the
 * broker's listener reads a JWKS from a {@code file:} URL (allowed by the JVM system property
 * {@code org.apache.kafka.sasl.oauthbearer.allowed.urls}, given in KAFKA_OPTS), expects an audience
 * and an issuer. The producers log in with Kafka's own OAuthBearerLoginCallbackHandler reading
 * their token from a {@code file:} token endpoint (FileJwtRetriever). The tokens are signed here
 * with Java's crypto (RS256 and ES256); a valid one produces, and wrong audience, wrong issuer,
 * expired, unknown key id and bad signature are refused with {@code {"status":"invalid_token"}}.
 * A second broker reads its JWKS over https from a server of the test's own ({@link #httpsJwksIsRefreshedWhenKeysRotate}).
 */
@ExtendWith(BrokerLogOnFailure.class)
class OAuthJwksTest {
    static final String ALLOWED_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls";
    static final String AUDIENCE = "brook-cluster";
    static final String ISSUER = "https://idp.example.test/";
    static final String INVALID_TOKEN = "{\"status\":\"invalid_token\"}";

    static BrookBroker broker;
    static String sasl;
    static Path dir;
    static KeyPair rsa;
    static KeyPair ec;
    static String previousAllowedUrls;
    static final List<String> tokenUrls = new ArrayList<>();

    @BeforeAll
    static void start() throws Exception {
        dir = Files.createTempDirectory(Paths.get("target").toAbsolutePath(), "jwks-");
        KeyPairGenerator r = KeyPairGenerator.getInstance("RSA");
        r.initialize(2048);
        rsa = r.generateKeyPair();
        KeyPairGenerator e = KeyPairGenerator.getInstance("EC");
        e.initialize(new ECGenParameterSpec("secp256r1"));
        ec = e.generateKeyPair();
        Path jwks = dir.resolve("jwks.json");
        Files.writeString(jwks, "{\"keys\":[" + rsaJwk("rsa-1", (RSAPublicKey) rsa.getPublic()) + ","
            + ecJwk("ec-1", (ECPublicKey) ec.getPublic()) + "]}");
        String jwksUrl = jwks.toUri().toString();

        broker = BrookBroker.start("jwks", brokerProps(jwksUrl, ""),
            Map.of("KAFKA_OPTS", "-D" + ALLOWED_URLS + "=" + jwksUrl));
        sasl = saslListener(broker);
        previousAllowedUrls = System.getProperty(ALLOWED_URLS);
    }

    /** A broker whose SASL_PLAINTEXT listener checks signed tokens against the JWKS at {@code jwksUrl}. */
    static Map<String, String> brokerProps(String jwksUrl, String loginModuleOptions) {
        Map<String, String> props = new HashMap<>();
        props.put("listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0");
        String l = "listener.name.sasl_plaintext.";
        props.put(l + "sasl.enabled.mechanisms", "OAUTHBEARER");
        props.put(l + "oauthbearer.sasl.jaas.config",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required" + loginModuleOptions + ";");
        props.put(l + "oauthbearer.sasl.server.callback.handler.class",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler");
        props.put(l + "sasl.oauthbearer.jwks.endpoint.url", jwksUrl);
        props.put(l + "sasl.oauthbearer.expected.audience", AUDIENCE);
        props.put(l + "sasl.oauthbearer.expected.issuer", ISSUER);
        return props;
    }

    static String saslListener(BrookBroker b) {
        for (String listener : b.readyFields().get("listeners").split(",")) {
            if (listener.startsWith("SASL_PLAINTEXT://")) return listener.substring("SASL_PLAINTEXT://".length());
        }
        throw new IllegalStateException("no SASL_PLAINTEXT listener in " + b.readyFields());
    }

    @AfterAll
    static void stop() {
        if (broker != null) broker.close();
        if (previousAllowedUrls == null) System.clearProperty(ALLOWED_URLS);
        else System.setProperty(ALLOWED_URLS, previousAllowedUrls);
    }

    static String b64(byte[] b) {
        return Base64.getUrlEncoder().withoutPadding().encodeToString(b);
    }

    /** A big-endian unsigned integer of exactly {@code len} bytes (0 for its minimal length). */
    static byte[] unsigned(BigInteger v, int len) {
        byte[] b = v.toByteArray();
        if (b.length > 1 && b[0] == 0) b = Arrays.copyOfRange(b, 1, b.length);
        if (len == 0 || b.length == len) return b;
        byte[] out = new byte[len];
        System.arraycopy(b, 0, out, len - b.length, b.length);
        return out;
    }

    static String rsaJwk(String kid, RSAPublicKey k) {
        return "{\"kty\":\"RSA\",\"kid\":\"" + kid + "\",\"use\":\"sig\",\"alg\":\"RS256\",\"n\":\""
            + b64(unsigned(k.getModulus(), 0)) + "\",\"e\":\"" + b64(unsigned(k.getPublicExponent(), 0)) + "\"}";
    }

    static String ecJwk(String kid, ECPublicKey k) {
        return "{\"kty\":\"EC\",\"kid\":\"" + kid + "\",\"use\":\"sig\",\"crv\":\"P-256\",\"x\":\""
            + b64(unsigned(k.getW().getAffineX(), 32)) + "\",\"y\":\"" + b64(unsigned(k.getW().getAffineY(), 32)) + "\"}";
    }

    /** A compact JWS of these claims, signed by {@code key} with {@code alg} (RS256 or ES256). */
    static String jwt(String alg, String kid, PrivateKey key, String claims) throws Exception {
        String signed = b64(("{\"alg\":\"" + alg + "\",\"typ\":\"JWT\",\"kid\":\"" + kid + "\"}").getBytes(UTF_8))
            + "." + b64(claims.getBytes(UTF_8));
        Signature s = Signature.getInstance(alg.equals("RS256") ? "SHA256withRSA" : "SHA256withECDSAinP1363Format");
        s.initSign(key);
        s.update(signed.getBytes(UTF_8));
        return signed + "." + b64(s.sign());
    }

    static String claims(String sub, String aud, String iss, long iatSeconds, long expSeconds) {
        return "{\"sub\":\"" + sub + "\",\"aud\":\"" + aud + "\",\"iss\":\"" + iss + "\",\"iat\":" + iatSeconds
            + ",\"exp\":" + expSeconds + ",\"scope\":\"kafka\"}";
    }

    static long now() {
        return System.currentTimeMillis() / 1000;
    }

    /** Client settings: Kafka's OAuthBearerLoginCallbackHandler with a file: token endpoint holding {@code token}. */
    static Map<String, Object> client(String token) throws Exception {
        Path file = Files.createTempFile(dir, "token-", ".jwt");
        Files.writeString(file, token);
        String url = file.toUri().toString();
        synchronized (tokenUrls) {
            tokenUrls.add(url);
            System.setProperty(ALLOWED_URLS, String.join(",", tokenUrls));
        }
        Map<String, Object> p = new HashMap<>();
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
        p.put(SaslConfigs.SASL_MECHANISM, "OAUTHBEARER");
        p.put(SaslConfigs.SASL_JAAS_CONFIG,
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;");
        p.put(SaslConfigs.SASL_LOGIN_CALLBACK_HANDLER_CLASS,
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler");
        p.put(SaslConfigs.SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL, url);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 15_000);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 15_000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        return p;
    }

    static void produce(String token) throws Exception {
        produce(sasl, token);
    }

    static void produce(String bootstrap, String token) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, client(token))) {
            p.send(new ProducerRecord<>(Clients.uniqueTopic("jwks"), "v".getBytes(UTF_8))).get(30, TimeUnit.SECONDS);
        }
    }

    /** The SaslAuthenticationException message a producer sending {@code token} gets. */
    static String refusal(String token) throws Exception {
        return refusal(sasl, token);
    }

    static String refusal(String bootstrap, String token) throws Exception {
        Map<String, Object> security = client(token);
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, security)) {
            Throwable t = assertThrows(Exception.class,
                () -> p.send(new ProducerRecord<>("jwks-refused", "v".getBytes(UTF_8))).get(30, TimeUnit.SECONDS));
            while (t != null && !(t instanceof SaslAuthenticationException)) t = t.getCause();
            assertNotNull(t, "no SaslAuthenticationException");
            return t.getMessage();
        }
    }

    @Test
    void rs256AndEs256TokensProduce() throws Exception {
        produce(jwt("RS256", "rsa-1", rsa.getPrivate(), claims("alice", AUDIENCE, ISSUER, now(), now() + 3600)));
        produce(jwt("ES256", "ec-1", ec.getPrivate(), claims("bob", AUDIENCE, ISSUER, now(), now() + 3600)));
    }

    @Test
    void tokensRefusedAsKafkaRefusesThem() throws Exception {
        PrivateKey key = rsa.getPrivate();
        assertEquals(INVALID_TOKEN,
            refusal(jwt("RS256", "rsa-1", key, claims("alice", "other-cluster", ISSUER, now(), now() + 3600))),
            "wrong audience");
        assertEquals(INVALID_TOKEN,
            refusal(jwt("RS256", "rsa-1", key, claims("alice", AUDIENCE, "https://evil.test/", now(), now() + 3600))),
            "wrong issuer");
        assertEquals(INVALID_TOKEN,
            refusal(jwt("RS256", "rsa-1", key, claims("alice", AUDIENCE, ISSUER, now() - 7200, now() - 3600))),
            "expired");
        assertEquals(INVALID_TOKEN,
            refusal(jwt("RS256", "rsa-2", key, claims("alice", AUDIENCE, ISSUER, now(), now() + 3600))),
            "unknown kid");
        KeyPairGenerator g = KeyPairGenerator.getInstance("RSA");
        g.initialize(2048);
        PrivateKey other = g.generateKeyPair().getPrivate();
        assertEquals(INVALID_TOKEN,
            refusal(jwt("RS256", "rsa-1", other, claims("alice", AUDIENCE, ISSUER, now(), now() + 3600))),
            "bad signature");
    }

    /**
     * The JWKS over https, as identity providers serve it: the test serves it with the JDK's HttpsServer and a
     * certificate of the test's CA, which the broker trusts through the {@code ssl.truststore.*} options of its
     * login module (Kafka's JaasOptionsUtils.createSSLSocketFactory). The broker refreshes it every 500 ms
     * ({@code sasl.oauthbearer.jwks.endpoint.refresh.ms}). A token of the served key produces; once the set is
     * rotated to a new key id, a token of the new key produces after a refresh (the first may be refused: its
     * unknown kid asks for an early refresh) and a token of the retired key is refused.
     */
    @Test
    void httpsJwksIsRefreshedWhenKeysRotate() throws Exception {
        Pki pki = Pki.shared();
        AtomicReference<String> served = new AtomicReference<>(
            "{\"keys\":[" + rsaJwk("rsa-1", (RSAPublicKey) rsa.getPublic()) + "]}");
        HttpsServer server = HttpsServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.setHttpsConfigurator(new HttpsConfigurator(serverTls(pki)));
        server.createContext("/jwks.json", exchange -> {
            byte[] body = served.get().getBytes(UTF_8);
            exchange.getResponseHeaders().set("Content-Type", "application/json");
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        });
        server.start();
        String url = "https://127.0.0.1:" + server.getAddress().getPort() + "/jwks.json";
        // With any option, Kafka's default login callback handler (the unsecured one) makes the broker's own
        // token at start-up and requires its subject.
        Map<String, String> props = brokerProps(url, " unsecuredLoginStringClaim_sub=\"broker\""
            + " ssl.truststore.location=\"" + pki.truststore() + "\" ssl.truststore.password=\"" + Pki.PASSWORD
            + "\" ssl.truststore.type=\"PKCS12\"");
        props.put("listener.name.sasl_plaintext.sasl.oauthbearer.jwks.endpoint.refresh.ms", "500");
        try (BrookBroker b = BrookBroker.start("jwks-https", props, Map.of("KAFKA_OPTS", "-D" + ALLOWED_URLS + "=" + url))) {
            String bootstrap = saslListener(b);
            String retired = jwt("RS256", "rsa-1", rsa.getPrivate(), claims("alice", AUDIENCE, ISSUER, now(), now() + 3600));
            produce(bootstrap, retired);
            KeyPairGenerator g = KeyPairGenerator.getInstance("EC");
            g.initialize(new ECGenParameterSpec("secp256r1"));
            KeyPair next = g.generateKeyPair();
            served.set("{\"keys\":[" + ecJwk("ec-2", (ECPublicKey) next.getPublic()) + "]}");
            String rotated = jwt("ES256", "ec-2", next.getPrivate(), claims("carol", AUDIENCE, ISSUER, now(), now() + 3600));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (true) {
                try {
                    produce(bootstrap, rotated);
                    break;
                } catch (Exception refused) {
                    if (System.nanoTime() > deadline) throw refused;
                }
            }
            assertEquals(INVALID_TOKEN, refusal(bootstrap, retired), "the retired key");
        } finally {
            server.stop(0);
        }
    }

    /** TLS for the JWKS server: the PKI's broker certificate (it names 127.0.0.1). */
    static SSLContext serverTls(Pki pki) throws Exception {
        KeyStore store = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(pki.keystore("broker"))) {
            store.load(in, Pki.PASSWORD.toCharArray());
        }
        KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keys.init(store, Pki.PASSWORD.toCharArray());
        SSLContext tls = SSLContext.getInstance("TLS");
        tls.init(keys.getKeyManagers(), null, null);
        return tls;
    }
}

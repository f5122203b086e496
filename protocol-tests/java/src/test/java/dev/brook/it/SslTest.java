package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.SslConfigs;
import org.apache.kafka.common.errors.SslAuthenticationException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * kafka-clients over an SSL listener, with stores made by the JDK's keytool: PKCS12 and PEM trust stores,
 * {@code ssl.client.auth=required} (no client certificate, no connection), and host name verification refusing a
 * broker certificate that does not name 127.0.0.1. The broker's one listener is named PLAINTEXT and mapped to SSL
 * ({@code listener.security.protocol.map}), so the same test runs against Kafka 4.4 through kafka-as-brook.sh.
 */
@ExtendWith(BrokerLogOnFailure.class)
class SslTest {
    static final long CALL_MS = 20_000;
    static Pki pki;

    @BeforeAll
    static void makePki() throws Exception {
        pki = Pki.shared();
    }

    /** Broker properties: its one listener speaks SSL with {@code keystore}. */
    static Map<String, String> sslBroker(String keystore, String clientAuth) {
        Map<String, String> p = new HashMap<>();
        p.put("listener.security.protocol.map", "PLAINTEXT:SSL,CONTROLLER:PLAINTEXT");
        p.put("ssl.keystore.type", "PKCS12");
        p.put("ssl.keystore.location", pki.keystore(keystore).toString());
        p.put("ssl.keystore.password", Pki.PASSWORD);
        p.put("ssl.truststore.type", "PKCS12");
        p.put("ssl.truststore.location", pki.truststore().toString());
        p.put("ssl.truststore.password", Pki.PASSWORD);
        p.put("ssl.client.auth", clientAuth);
        return p;
    }

    static Map<String, Object> pemTrust() {
        Map<String, Object> c = new HashMap<>();
        c.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SSL");
        c.put(SslConfigs.SSL_TRUSTSTORE_TYPE_CONFIG, "PEM");
        c.put(SslConfigs.SSL_TRUSTSTORE_LOCATION_CONFIG, pki.caPem().toString());
        return c;
    }

    static Map<String, Object> pkcs12Trust() {
        Map<String, Object> c = new HashMap<>();
        c.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SSL");
        c.put(SslConfigs.SSL_TRUSTSTORE_TYPE_CONFIG, "PKCS12");
        c.put(SslConfigs.SSL_TRUSTSTORE_LOCATION_CONFIG, pki.truststore().toString());
        c.put(SslConfigs.SSL_TRUSTSTORE_PASSWORD_CONFIG, Pki.PASSWORD);
        return c;
    }

    /** DescribeCluster's node count, or the cause of its failure. */
    static Object describeCluster(String bootstrap, Map<String, Object> ssl) throws Exception {
        Map<String, Object> c = new HashMap<>(ssl);
        c.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) CALL_MS);
        c.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) CALL_MS);
        try (Admin admin = Admin.create(c)) {
            return admin.describeCluster().nodes().get(CALL_MS, TimeUnit.MILLISECONDS).size();
        } catch (ExecutionException e) {
            return e.getCause();
        }
    }

    /** Writes one record and reads it back over {@code ssl}. */
    static void roundTrip(String bootstrap, Map<String, Object> ssl) throws Exception {
        String topic = Clients.uniqueTopic("ssl");
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap, ssl)) {
            producer.send(new ProducerRecord<>(topic, 0, null, "over-tls".getBytes(UTF_8)))
                .get(CALL_MS, TimeUnit.MILLISECONDS);
        }
        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap, ssl)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            var records = Clients.pollExactly(consumer, 1, Clients.WAIT);
            assertEquals("over-tls", new String(records.get(0).value(), UTF_8));
        }
    }

    @Test
    void pkcs12AndPemTruststoresReachAnSslListener() throws Exception {
        try (BrookBroker b = BrookBroker.start("ssl", sslBroker("broker", "none"))) {
            roundTrip(b.bootstrap(), pemTrust());
            roundTrip(b.bootstrap(), pkcs12Trust());
        }
    }

    @Test
    void requiredClientAuthRefusesClientsWithoutACertificate() throws Exception {
        try (BrookBroker b = BrookBroker.start("mtls", sslBroker("broker", "required"))) {
            Object refused = describeCluster(b.bootstrap(), pkcs12Trust());
            assertInstanceOf(SslAuthenticationException.class, refused, "no client certificate: " + refused);
            Map<String, Object> withCert = pkcs12Trust();
            withCert.put(SslConfigs.SSL_KEYSTORE_TYPE_CONFIG, "PKCS12");
            withCert.put(SslConfigs.SSL_KEYSTORE_LOCATION_CONFIG, pki.keystore("client").toString());
            withCert.put(SslConfigs.SSL_KEYSTORE_PASSWORD_CONFIG, Pki.PASSWORD);
            assertEquals(1, describeCluster(b.bootstrap(), withCert));
            roundTrip(b.bootstrap(), withCert);
        }
    }

    @Test
    void hostNameVerificationRefusesACertificateForAnotherHost() throws Exception {
        try (BrookBroker b = BrookBroker.start("wrong-host", sslBroker("wrong-host", "none"))) {
            Object refused = describeCluster(b.bootstrap(), pemTrust());
            assertInstanceOf(SslAuthenticationException.class, refused, "wrong SAN: " + refused);
            Map<String, Object> unverified = pemTrust();
            unverified.put(SslConfigs.SSL_ENDPOINT_IDENTIFICATION_ALGORITHM_CONFIG, "");
            assertEquals(1, describeCluster(b.bootstrap(), unverified));
        }
    }
}

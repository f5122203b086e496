package dev.brook.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.ClusterAuthorizationException;
import org.apache.kafka.common.errors.GroupAuthorizationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.errors.TransactionalIdAuthorizationException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * ACLs with Kafka's StandardAuthorizer, as a client sees them: AdminClient creates, describes and
 * deletes them (and Kafka 4.4's own {@code kafka-acls.sh}, {@code org.apache.kafka.tools.AclCommand}),
 * and a producer, a consumer, a transactional producer and an admin are refused with Kafka's exceptions,
 * then served once the ACL is gone or an ALLOW applies.
 *
 * <p>The broker's own server.properties: {@code authorizer.class.name} set to StandardAuthorizer,
 * {@code allow.everyone.if.no.acl.found=true}, no {@code super.users}. On PLAINTEXT every connection is
 * {@code User:ANONYMOUS}, the broker's own controller and inter-broker traffic too; with the no-ACL default
 * open, a resource is denied only once a test puts ACLs on it, and the cluster resource (which that traffic
 * needs CLUSTER_ACTION on) gets ACLs only together with an ALLOW ALL for {@code User:ANONYMOUS}. So the same
 * class runs against Kafka 4.4 from the same properties ({@code scripts/differential}). A broker applies
 * committed ACLs asynchronously in Kafka: each test waits until DescribeAcls lists what it created (the
 * authorizer answering DescribeAcls is the one enforcing) before it expects a refusal.
 */
@ExtendWith(BrokerLogOnFailure.class)
class AclsTest {
    static final String STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
    static final String ANONYMOUS = "User:ANONYMOUS";
    static final Duration WAIT = Duration.ofSeconds(30);

    static BrookBroker broker;
    static String bootstrap;
    static Admin admin;

    @BeforeAll
    static void start() {
        assumeFalse(TestBrokers.isExternal(), "the ACL tests set server.properties of their own broker");
        broker = BrookBroker.start("acls", Map.of(
            "authorizer.class.name", STANDARD_AUTHORIZER,
            "allow.everyone.if.no.acl.found", "true"));
        bootstrap = broker.bootstrap();
        admin = Clients.admin(bootstrap);
    }

    @AfterAll
    static void stop() {
        if (admin != null) admin.close();
        if (broker != null) broker.close();
    }

    /** Every test leaves no ACL behind (waiting until the broker's authorizer has none). */
    @AfterEach
    void deleteAllAcls() {
        awaitAcls(() -> {
            admin.deleteAcls(List.of(AclBindingFilter.ANY)).all().get();
            return admin.describeAcls(AclBindingFilter.ANY).values().get().isEmpty();
        }, "every ACL deleted");
    }

    interface Check {
        boolean ok() throws Exception;
    }

    /** Polls {@code check} (bounded) until it holds; an authorization error counts as "not yet". */
    static void awaitAcls(Check check, String what) {
        long deadline = System.nanoTime() + WAIT.toNanos();
        Throwable last = null;
        while (System.nanoTime() < deadline) {
            try {
                if (check.ok()) return;
            } catch (Exception e) {
                last = e;
            }
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        }
        throw new AssertionError("not reached within " + WAIT + ": " + what, last);
    }

    static AclBinding acl(ResourceType type, String name, PatternType pattern, String principal, String host,
                          AclOperation op, AclPermissionType permission) {
        return new AclBinding(new ResourcePattern(type, name, pattern),
            new AccessControlEntry(principal, host, op, permission));
    }

    /** Creates the ACLs and waits until the broker's authorizer lists them all. */
    static void create(AclBinding... acls) throws Exception {
        admin.createAcls(List.of(acls)).all().get();
        awaitAcls(() -> admin.describeAcls(AclBindingFilter.ANY).values().get().containsAll(List.of(acls)),
            "ACLs listed: " + List.of(acls));
    }

    static void delete(AclBinding... acls) throws Exception {
        List<AclBindingFilter> filters = new ArrayList<>();
        for (AclBinding a : acls) filters.add(a.toFilter());
        admin.deleteAcls(filters).all().get();
        awaitAcls(() -> {
            Collection<AclBinding> left = admin.describeAcls(AclBindingFilter.ANY).values().get();
            return List.of(acls).stream().noneMatch(left::contains);
        }, "ACLs gone: " + List.of(acls));
    }

    static Throwable cause(ThrowingRunnable r) {
        Throwable t = assertThrows(Throwable.class, r::run);
        return t instanceof ExecutionException ? t.getCause() : t;
    }

    interface ThrowingRunnable {
        void run() throws Exception;
    }

    @Test
    void adminCreatesDescribesAndDeletesAcls() throws Exception {
        String topic = Clients.uniqueTopic("acl-admin");
        AclBinding literal = acl(ResourceType.TOPIC, topic, PatternType.LITERAL, "User:alice", "*",
            AclOperation.READ, AclPermissionType.ALLOW);
        AclBinding prefixed = acl(ResourceType.TOPIC, topic.substring(0, 8), PatternType.PREFIXED, "User:*",
            "127.0.0.1", AclOperation.WRITE, AclPermissionType.DENY);
        AclBinding group = acl(ResourceType.GROUP, "g-" + topic, PatternType.LITERAL, "User:bob", "*",
            AclOperation.ALL, AclPermissionType.ALLOW);
        create(literal, prefixed, group);
        // MATCH selects the ACLs that apply to the named topic: its literal and the prefix covering it.
        AclBindingFilter match = new AclBindingFilter(
            new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.MATCH), AccessControlEntryFilter.ANY);
        assertEquals(Set2.of(literal, prefixed), Set2.copy(admin.describeAcls(match).values().get()));
        AclBindingFilter bobs = new AclBindingFilter(ResourcePatternFilter.ANY,
            new AccessControlEntryFilter("User:bob", null, AclOperation.ANY, AclPermissionType.ANY));
        assertEquals(Set2.of(group), Set2.copy(admin.describeAcls(bobs).values().get()));
        Collection<AclBinding> deleted = admin.deleteAcls(List.of(match)).all().get();
        assertEquals(Set2.of(literal, prefixed), Set2.copy(deleted));
        awaitAcls(() -> Set2.copy(admin.describeAcls(AclBindingFilter.ANY).values().get()).equals(Set2.of(group)),
            "only the group's ACL left");
    }

    @Test
    void aDenyOverridesAnAllowUntilItIsDeleted() throws Exception {
        String topic = Clients.uniqueTopic("acl-produce");
        Clients.createTopic(bootstrap, topic, 1);
        AclBinding allowAll = acl(ResourceType.TOPIC, topic, PatternType.LITERAL, "User:*", "*",
            AclOperation.ALL, AclPermissionType.ALLOW);
        AclBinding denyWrite = acl(ResourceType.TOPIC, topic.substring(0, 10), PatternType.PREFIXED, ANONYMOUS,
            "127.0.0.1", AclOperation.WRITE, AclPermissionType.DENY);
        create(allowAll, denyWrite);
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of(
            ProducerConfig.MAX_BLOCK_MS_CONFIG, 20_000))) {
            Throwable t = cause(() -> p.send(new ProducerRecord<>(topic, "v".getBytes())).get());
            assertInstanceOf(TopicAuthorizationException.class, t);
        }
        delete(denyWrite);
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap)) {
            assertEquals(0, p.send(new ProducerRecord<>(topic, "v".getBytes())).get().partition());
        }
    }

    @Test
    void aConsumerNeedsReadOnItsTopicAndItsGroupFromItsHost() throws Exception {
        String topic = Clients.uniqueTopic("acl-consume");
        String group = "g-" + topic;
        Clients.createTopic(bootstrap, topic, 1);
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap)) {
            p.send(new ProducerRecord<>(topic, "v".getBytes())).get();
        }
        // An ACL on the topic for another host only: this host is denied (the topic has ACLs now).
        AclBinding otherHost = acl(ResourceType.TOPIC, topic, PatternType.LITERAL, ANONYMOUS, "10.9.9.9",
            AclOperation.READ, AclPermissionType.ALLOW);
        create(otherHost);
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap)) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            assertInstanceOf(TopicAuthorizationException.class, cause(() -> pollOnce(c)));
        }
        create(acl(ResourceType.TOPIC, topic, PatternType.LITERAL, ANONYMOUS, "127.0.0.1",
            AclOperation.READ, AclPermissionType.ALLOW));
        AclBinding denyGroup = acl(ResourceType.GROUP, group, PatternType.LITERAL, "User:*", "*",
            AclOperation.READ, AclPermissionType.DENY);
        create(denyGroup);
        Map<String, Object> grouped = Map.of(ConsumerConfig.GROUP_ID_CONFIG, group,
            ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest", ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap, grouped)) {
            c.subscribe(List.of(topic));
            assertInstanceOf(GroupAuthorizationException.class, cause(() -> pollOnce(c)));
        }
        delete(denyGroup);
        try (KafkaConsumer<byte[], byte[]> c = Clients.consumer(bootstrap, grouped)) {
            c.subscribe(List.of(topic));
            assertEquals(1, Clients.pollAtLeast(c, 1, WAIT).size());
            c.commitSync();
        }
    }

    /** Polls until a record or an exception arrives (bounded). */
    static void pollOnce(KafkaConsumer<byte[], byte[]> c) {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            if (!c.poll(Duration.ofMillis(200)).isEmpty()) return;
        }
        throw new AssertionError("neither records nor an error within " + WAIT);
    }

    @Test
    void aTransactionalProducerNeedsWriteOnItsTransactionalId() throws Exception {
        String txnId = Clients.uniqueTopic("acl-txn");
        create(acl(ResourceType.TRANSACTIONAL_ID, txnId, PatternType.LITERAL, ANONYMOUS, "*",
            AclOperation.WRITE, AclPermissionType.DENY));
        try (KafkaProducer<byte[], byte[]> p = Clients.producer(bootstrap, Map.of(
            ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId, ProducerConfig.MAX_BLOCK_MS_CONFIG, 20_000))) {
            assertInstanceOf(TransactionalIdAuthorizationException.class, cause(p::initTransactions));
        }
    }

    @Test
    void anAdminWithoutDescribeOnTheClusterCannotListAcls() throws Exception {
        // ALLOW ALL keeps the cluster open to this principal (and to the broker's own traffic); the DENY wins
        // for DESCRIBE alone.
        AclBinding all = acl(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, ANONYMOUS, "*",
            AclOperation.ALL, AclPermissionType.ALLOW);
        AclBinding deny = acl(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, ANONYMOUS, "*",
            AclOperation.DESCRIBE, AclPermissionType.DENY);
        admin.createAcls(List.of(all, deny)).all().get();
        awaitAcls(() -> {
            try {
                admin.describeAcls(AclBindingFilter.ANY).values().get();
                return false;
            } catch (ExecutionException e) {
                return e.getCause() instanceof ClusterAuthorizationException;
            }
        }, "DescribeAcls refused with ClusterAuthorizationException");
        Throwable t = cause(() -> admin.describeAcls(AclBindingFilter.ANY).values().get());
        assertInstanceOf(ClusterAuthorizationException.class, t);
        // ALTER still allowed: the DENY can be deleted.
        admin.deleteAcls(List.of(deny.toFilter())).all().get();
        awaitAcls(() -> admin.describeAcls(AclBindingFilter.ANY).values().get().size() == 1, "the DENY gone");
    }

    @Test
    void kafkaAclsToolAddsListsAndRemoves() throws Exception {
        String topic = Clients.uniqueTopic("acl-tool");
        KafkaTool.tool("AclCommand", bootstrap, "--add", "--allow-principal", "User:alice", "--allow-host",
            "127.0.0.1", "--operation", "Read", "--operation", "Write", "--topic", topic);
        awaitAcls(() -> admin.describeAcls(AclBindingFilter.ANY).values().get().size() == 2, "two ACLs");
        String out = KafkaTool.tool("AclCommand", bootstrap, "--list", "--topic", topic).out();
        assertTrue(out.contains("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=" + topic
            + ", patternType=LITERAL)`:"), out);
        assertTrue(out.contains("(principal=User:alice, host=127.0.0.1, operation=READ, permissionType=ALLOW)"), out);
        assertTrue(out.contains("(principal=User:alice, host=127.0.0.1, operation=WRITE, permissionType=ALLOW)"), out);
        KafkaTool.tool("AclCommand", bootstrap, "--remove", "--force", "--topic", topic);
        awaitAcls(() -> admin.describeAcls(AclBindingFilter.ANY).values().get().isEmpty(), "no ACL left");
    }

    /** Order-free comparison of bindings. */
    static final class Set2 {
        static java.util.Set<AclBinding> of(AclBinding... b) {
            return java.util.Set.of(b);
        }

        static java.util.Set<AclBinding> copy(Collection<AclBinding> c) {
            return java.util.Set.copyOf(c);
        }
    }
}

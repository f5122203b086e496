package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicIdException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Topic auto-creation and the Admin topic calls. */
@ExtendWith(BrokerLogOnFailure.class)
class TopicAdminTest {
    static final long T = Clients.WAIT.toMillis();

    static <V> V get(KafkaFuture<V> f) throws Exception {
        return f.get(T, TimeUnit.MILLISECONDS);
    }

    /** The exception a failed admin future carries. */
    static Throwable failureOf(KafkaFuture<?> f) throws Exception {
        ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(T, TimeUnit.MILLISECONDS));
        return e.getCause();
    }

    /**
     * A producer writing to an unknown topic creates it with num.partitions partitions. Against Brook this starts
     * its own broker with num.partitions=2 so that the default of 1 cannot pass by accident; against an external
     * broker the expected count is -Dexpected.num.partitions (default 1).
     */
    @Test
    void producerAutoCreatesTopicWithNumPartitions() throws Exception {
        BrookBroker own = null;
        String bootstrap;
        int expected;
        if (TestBrokers.isExternal()) {
            bootstrap = TestBrokers.bootstrap();
            expected = Integer.getInteger("expected.num.partitions", 1);
        } else {
            own = BrookBroker.start("autocreate", Map.of("num.partitions", "2"));
            bootstrap = own.bootstrap();
            expected = 2;
        }
        try {
            String topic = Clients.uniqueTopic("auto");
            try (Admin admin = Clients.admin(bootstrap)) {
                assertFalse(get(admin.listTopics().names()).contains(topic), "topic should not exist yet");
            }
            try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap)) {
                RecordMetadata md = producer.send(new ProducerRecord<>(topic, "k".getBytes(UTF_8),
                    "v".getBytes(UTF_8))).get(T, TimeUnit.MILLISECONDS);
                assertEquals(0, md.offset(), "first record of an auto-created topic");
                List<PartitionInfo> parts = producer.partitionsFor(topic);
                assertEquals(expected, parts.size(), "Metadata partitions of the auto-created topic");
            }
            try (Admin admin = Clients.admin(bootstrap)) {
                assertTrue(get(admin.listTopics().names()).contains(topic), "auto-created topic is listed");
                TopicDescription d = describeWhenVisible(admin, topic);
                assertEquals(expected, d.partitions().size(), "describeTopics partitions of the auto-created topic");
            }
        } finally {
            if (own != null) own.close();
        }
    }

    /** Creates a topic with 4 partitions and retention.ms=123456789; returns the topic id CreateTopics gave. */
    static Uuid createAdminTopic(Admin admin, String topic) throws Exception {
        CreateTopicsResult created = admin.createTopics(List.of(
            new NewTopic(topic, 4, (short) 1).configs(Map.of("retention.ms", "123456789"))));
        get(created.all());
        assertEquals(4, get(created.numPartitions(topic)), "CreateTopicsResult.numPartitions");
        assertEquals(1, get(created.replicationFactor(topic)), "CreateTopicsResult.replicationFactor");
        Uuid createdId = get(created.topicId(topic));
        assertNotNull(createdId);
        assertNotEquals(Uuid.ZERO_UUID, createdId, "CreateTopics must return a real topic id");
        return createdId;
    }

    @Test
    void createListAndDescribeByName() throws Exception {
        String topic = Clients.uniqueTopic("admin");
        try (Admin admin = Clients.admin(TestBrokers.bootstrap())) {
            Uuid createdId = createAdminTopic(admin, topic);

            Set<String> names = get(admin.listTopics().names());
            assertTrue(names.contains(topic), "listTopics should contain " + topic + ": " + names);

            TopicDescription d = describeWhenVisible(admin, topic);
            assertEquals(topic, d.name());
            assertFalse(d.isInternal());
            assertEquals(createdId, d.topicId(), "describeTopics topic id = the id CreateTopics returned");
            assertEquals(4, d.partitions().size());
            for (int i = 0; i < 4; i++) {
                TopicPartitionInfo p = d.partitions().get(i);
                assertEquals(i, p.partition());
                assertNotNull(p.leader(), "partition " + i + " has a leader");
                assertEquals(1, p.replicas().size(), "partition " + i + " replicas");
                assertEquals(1, p.isr().size(), "partition " + i + " ISR");
                assertEquals(p.leader().id(), p.replicas().get(0).id());
            }
        }
    }

    /** describeTopics by topic id: Admin sends Metadata v13 with topics=[{topicId=X, name=''}]. */
    @Test
    void describeTopicsById() throws Exception {
        String topic = Clients.uniqueTopic("admin-id");
        try (Admin admin = Clients.admin(TestBrokers.bootstrap())) {
            Uuid createdId = createAdminTopic(admin, topic);
            describeWhenVisible(admin, topic);
            Map<Uuid, TopicDescription> byId =
                get(admin.describeTopics(TopicCollection.ofTopicIds(List.of(createdId))).allTopicIds());
            assertEquals(topic, byId.get(createdId).name(), "describeTopics by id");
            assertEquals(4, byId.get(createdId).partitions().size());

            // An id that does not exist: UnknownTopicIdException.
            Uuid unknown = Uuid.randomUuid();
            Throwable e = failureOf(admin.describeTopics(TopicCollection.ofTopicIds(List.of(unknown))).allTopicIds());
            assertInstanceOf(UnknownTopicIdException.class, e, "describeTopics of an unknown id");
        }
    }

    @Test
    void describeConfigsShowsOverrideAndDefaults() throws Exception {
        String topic = Clients.uniqueTopic("admin-cfg");
        try (Admin admin = Clients.admin(TestBrokers.bootstrap())) {
            createAdminTopic(admin, topic);
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config cfg = get(admin.describeConfigs(List.of(res)).all()).get(res);
            ConfigEntry retention = cfg.get("retention.ms");
            assertNotNull(retention, "describeConfigs has retention.ms");
            assertEquals("123456789", retention.value());
            assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source(), "retention.ms source");
            assertFalse(retention.isDefault());
            ConfigEntry minIsr = cfg.get("min.insync.replicas");
            assertNotNull(minIsr, "describeConfigs has min.insync.replicas");
            assertEquals("1", minIsr.value());
            assertNotEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, minIsr.source());
            ConfigEntry cleanup = cfg.get("cleanup.policy");
            assertNotNull(cleanup, "describeConfigs has cleanup.policy");
            assertEquals("delete", cleanup.value());
            assertNotEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, cleanup.source());
            assertNotNull(cfg.get("segment.bytes"), "describeConfigs has segment.bytes");
        }
    }

    @Test
    void createErrors() throws Exception {
        String topic = Clients.uniqueTopic("admin-err");
        try (Admin admin = Clients.admin(TestBrokers.bootstrap())) {
            createAdminTopic(admin, topic);

            Throwable exists = failureOf(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all());
            assertInstanceOf(TopicExistsException.class, exists, "creating an existing topic");

            for (String bad : List.of("bad/name", "..", "x".repeat(250))) {
                Throwable invalid = failureOf(admin.createTopics(List.of(new NewTopic(bad, 1, (short) 1))).all());
                assertInstanceOf(InvalidTopicException.class, invalid, "creating topic '" + bad + "'");
            }
            Set<String> names = get(admin.listTopics().names());
            assertFalse(names.contains("bad/name") || names.contains(".."), "invalid names listed: " + names);
        }
    }

    @Test
    void deleteTopics() throws Exception {
        String topic = Clients.uniqueTopic("admin-del");
        try (Admin admin = Clients.admin(TestBrokers.bootstrap())) {
            Uuid createdId = createAdminTopic(admin, topic);
            describeWhenVisible(admin, topic);

            get(admin.deleteTopics(List.of(topic)).all());
            awaitGone(admin, topic);

            // Deleting it again: UnknownTopicOrPartitionException
            Throwable unknown = failureOf(admin.deleteTopics(List.of(topic)).all());
            assertInstanceOf(UnknownTopicOrPartitionException.class, unknown, "deleting a deleted topic");

            // The name can be used again, and gets a new id and no data.
            CreateTopicsResult again = admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1)));
            get(again.all());
            Uuid newId = get(again.topicId(topic));
            assertNotEquals(createdId, newId, "a re-created topic gets a new topic id");
            TopicDescription d2 = describeWhenVisible(admin, topic);
            assertEquals(2, d2.partitions().size());
            assertEquals(newId, d2.topicId());
            get(admin.deleteTopics(List.of(topic)).all());
        }
    }

    /** A deleted topic's data is gone: re-created under the same name, it starts empty at offset 0. */
    @Test
    void recreatedTopicStartsEmpty() throws Exception {
        String bootstrap = TestBrokers.bootstrap();
        String topic = Clients.uniqueTopic("admin-recreate");
        try (Admin admin = Clients.admin(bootstrap)) {
            Clients.createTopic(admin, topic, 1, Map.of());
            try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap)) {
                for (int i = 0; i < 5; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, null, new byte[] {(byte) i}))
                        .get(T, TimeUnit.MILLISECONDS);
                }
            }
            get(admin.deleteTopics(List.of(topic)).all());
            awaitGone(admin, topic);
            Clients.createTopic(admin, topic, 1, Map.of());
            describeWhenVisible(admin, topic);
        }
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap)) {
            assertEquals(Map.of(tp, 0L), consumer.endOffsets(List.of(tp), Clients.WAIT), "end offset after re-create");
        }
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap)) {
            assertEquals(0, producer.send(new ProducerRecord<>(topic, 0, null, new byte[] {9}))
                .get(T, TimeUnit.MILLISECONDS).offset(), "first offset after re-create");
        }
    }

    /**
     * describeTopics, retried (bounded) while it answers UNKNOWN_TOPIC_OR_PARTITION: Kafka's brokers learn about a
     * new topic from the controller asynchronously, so a describe right after CreateTopics may not see it yet.
     */
    static TopicDescription describeWhenVisible(Admin admin, String topic) throws Exception {
        long deadline = System.nanoTime() + Clients.WAIT.toNanos();
        while (true) {
            try {
                return get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException) || System.nanoTime() > deadline) {
                    throw e;
                }
            }
            Thread.sleep(100);  // poll interval of a bounded loop, not synchronisation
        }
    }

    /** Deleted topic disappears from listTopics and describeTopics (bounded poll: Kafka deletes asynchronously). */
    static void awaitGone(Admin admin, String topic) throws Exception {
        long deadline = System.nanoTime() + Clients.WAIT.toNanos();
        while (true) {
            boolean listed = get(admin.listTopics().names()).contains(topic);
            Throwable describe = null;
            if (!listed) {
                try {
                    get(admin.describeTopics(List.of(topic)).allTopicNames());
                } catch (ExecutionException e) {
                    describe = e.getCause();
                }
            }
            if (!listed && describe instanceof UnknownTopicOrPartitionException) return;
            if (System.nanoTime() > deadline) {
                fail("topic " + topic + " still visible 30 s after deleteTopics: listed=" + listed
                    + ", describeTopics error=" + describe);
            }
            Thread.sleep(100);  // poll interval of a bounded loop, not synchronisation
        }
    }
}

package dev.brook.it;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Kafka 4.4's {@code kafka-features.sh} ({@code org.apache.kafka.tools.FeatureCommand}) against a broker of its own:
 * {@code describe} reads the supported and finalized levels from ApiVersions, {@code downgrade} and {@code upgrade}
 * change {@code transaction.version} through UpdateFeatures, and a level past the supported range is refused with
 * Kafka's message. Runs against Kafka 4.4 too ({@code scripts/differential}).
 */
@ExtendWith(BrokerLogOnFailure.class)
class FeaturesToolTest {

    static BrookBroker broker;
    static String bootstrap;

    @BeforeAll
    static void start() {
        broker = BrookBroker.start("features-tool", Map.of());
        bootstrap = broker.bootstrap();
    }

    @AfterAll
    static void stop() {
        if (broker != null) broker.close();
    }

    /** The line {@code kafka-features describe} prints for {@code feature}, its column padding cut to one space. */
    static String describeLine(String feature) throws Exception {
        String out = KafkaTool.tool("FeatureCommand", bootstrap, "describe").out();
        return out.lines().map(l -> l.replaceAll("\\s+", " ").strip())
            .filter(l -> l.startsWith("Feature: " + feature + " ")).findFirst()
            .orElseThrow(() -> new AssertionError(feature + " not described in\n" + out));
    }

    @Test
    void kafkaFeaturesDescribesDowngradesAndUpgrades() throws Exception {
        String tv = describeLine("transaction.version");
        assertTrue(tv.contains("SupportedMinVersion: 0 SupportedMaxVersion: 2 FinalizedVersionLevel: 2"), tv);
        assertTrue(describeLine("metadata.version").contains("FinalizedVersionLevel: 4.4-IV2"),
            describeLine("metadata.version"));
        assertTrue(describeLine("group.version").contains("FinalizedVersionLevel: 1"));

        // An upgrade past the supported range is refused with Kafka's message.
        KafkaTool.Run refused = KafkaTool.run("FeatureCommand", bootstrap, "upgrade", "--feature",
            "transaction.version=3");
        assertTrue(refused.exit() != 0 && (refused.out() + refused.err()).contains("only supports versions 0-2"),
            refused.toString());

        KafkaTool.tool("FeatureCommand", bootstrap, "downgrade", "--feature", "transaction.version=1");
        assertTrue(describeLine("transaction.version").contains("FinalizedVersionLevel: 1"),
            describeLine("transaction.version"));
        KafkaTool.tool("FeatureCommand", bootstrap, "upgrade", "--feature", "transaction.version=2");
        assertTrue(describeLine("transaction.version").contains("FinalizedVersionLevel: 2"),
            describeLine("transaction.version"));
    }
}

package dev.brook.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.common.config.ConfigResource;
import org.junit.jupiter.api.Test;

/**
 * A cluster of the kit runs with the test timings docs/TESTING-WITH-BROOK.md lists (the supervisor's
 * {@code --test-timings}), and a caller's {@code withConfig} overrides one of them: read back from every node with
 * Admin describeConfigs, as a user's client sees them.
 */
class TestTimingsTest {
    static final Map<String, String> TIMINGS = Map.of(
        "broker.session.timeout.ms", "3000",
        "broker.heartbeat.interval.ms", "500",
        "replica.lag.time.max.ms", "3000",
        "group.initial.rebalance.delay.ms", "0");

    @Test
    void everyNodeRunsWithTheTestTimingsAndTheCallersConfigWins() throws Exception {
        try (Brook brook = Brook.cluster().nodes(2).withConfig("replica.lag.time.max.ms", "4000").start()) {
            Properties props = new Properties();
            props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, brook.bootstrapServers());
            try (Admin admin = Admin.create(props)) {
                for (int id : brook.nodeIds()) {
                    ConfigResource node = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(id));
                    Config config = admin.describeConfigs(List.of(node)).all().get().get(node);
                    for (var e : TIMINGS.entrySet()) {
                        String want = e.getKey().equals("replica.lag.time.max.ms") ? "4000" : e.getValue();
                        assertEquals(want, config.get(e.getKey()).value(), "node " + id + ": " + e.getKey());
                    }
                }
            }
        }
    }
}

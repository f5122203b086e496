package dev.brook.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.lang.reflect.Field;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/** What start() leaves done, and what it no longer spends time on. */
class StartTest {
    @Test
    @SuppressWarnings("unchecked")
    void everyNodeListsEveryNodeAtStartWithoutAnHttpCall() throws Exception {
        try (Brook brook = Brook.cluster().nodes(3).start()) {
            // start() read only the supervisor's CLUSTER READY line: its HTTP client (half a second of class loading
            // and a selector thread in a fresh JVM) is made at the first call to the supervisor, not before.
            Field http = Brook.class.getDeclaredField("http");
            http.setAccessible(true);
            assertNull(http.get(brook), "start() made the HTTP client");

            // One reading, no wait: CLUSTER READY means every node lists every node as an unfenced broker.
            Map<String, Object> view = brook.clusterView();
            for (int id : brook.nodeIds()) {
                List<Map<String, Object>> brokers =
                    (List<Map<String, Object>>) Json.at(view, String.valueOf(id), "controller", "brokers");
                Set<Integer> unfenced = new TreeSet<>();
                for (Map<String, Object> b : brokers) {
                    if (Boolean.FALSE.equals(b.get("fenced"))) unfenced.add(((Number) b.get("id")).intValue());
                }
                assertEquals(Set.of(1, 2, 3), unfenced, "node " + id + ": " + brokers);
            }
        }
    }
}

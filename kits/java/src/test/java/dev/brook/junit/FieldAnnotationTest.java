package dev.brook.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** @BrookCluster on a static field: the field, instance fields and parameters get that one cluster. */
class FieldAnnotationTest {
    @BrookCluster(config = {"num.partitions=2"}, topics = {"orders:3", "defaults"})
    static Brook brook;

    Brook alsoHere;

    @Test
    void everyInjectionPointGetsTheClassCluster(Brook param) {
        assertSame(brook, param);
        assertSame(brook, alsoHere);
        assertEquals(1, brook.liveNodeIds().size());
    }

    @Test
    @SuppressWarnings("unchecked")
    void theTopicsAreLedOnceTheClusterIsReady() {
        // Read once, no wait: the cluster counts as ready only when every partition has its leader.
        for (String[] t : new String[][] {{"orders", "3"}, {"defaults", "2"}}) {
            Map<String, Object> node1 = (Map<String, Object>) brook.partitionsView(t[0]).get("1");
            List<Map<String, Object>> ps = (List<Map<String, Object>>) node1.get("partitions");
            assertEquals(Integer.parseInt(t[1]), ps.size(), t[0] + ": " + ps);
            for (Map<String, Object> p : ps) assertEquals("leader", p.get("role"), t[0] + ": " + p);
        }
    }
}

package dev.brook.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import org.junit.jupiter.api.Test;

/** @BrookCluster on a static field: the field, instance fields and parameters get that one cluster. */
class FieldAnnotationTest {
    @BrookCluster(config = {"num.partitions=2"})
    static Brook brook;

    Brook alsoHere;

    @Test
    void everyInjectionPointGetsTheClassCluster(Brook param) {
        assertSame(brook, param);
        assertSame(brook, alsoHere);
        assertEquals(1, brook.liveNodeIds().size());
    }
}

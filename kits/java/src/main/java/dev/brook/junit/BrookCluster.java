package dev.brook.junit;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Starts a Brook cluster once for the test class and stops it after the class. The cluster is handed to fields of
 * type {@link Brook} (static or not) and to test and lifecycle method parameters of type {@link Brook}.
 *
 * <pre>{@code
 * @BrookCluster(nodes = 3, config = {"min.insync.replicas=2"})
 * class OrdersTest {
 *     static Brook brook;
 *     @Test void produce() { ... brook.bootstrapServers() ... }
 * }
 * }</pre>
 *
 * <p>On a static field of type {@link Brook} instead of the class, it configures that field's cluster.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.TYPE, ElementType.FIELD})
@ExtendWith(BrookExtension.class)
public @interface BrookCluster {
    /** Node ids 1..nodes, each a broker and a voter of the metadata quorum. */
    int nodes() default 1;

    /** Kafka broker config for every node, {@code "key=value"} as in server.properties. */
    String[] config() default {};

    /**
     * Topics created before the cluster counts as ready, {@code "name"}, {@code "name:partitions"} or
     * {@code "name:partitions:replicationFactor"} (the broker's defaults otherwise): every node then names a
     * leader for each partition, so a test's first producer needs no metadata retry.
     */
    String[] topics() default {};

    /** How long the cluster may take to be ready. */
    int readyTimeoutSeconds() default 60;
}

package dev.brook.it;

/**
 * Where the tests find a broker.
 *
 * <p>If the system property {@code bootstrap.servers} is set, tests that only need a running broker use it (a
 * differential run against a real Kafka, for instance). Otherwise one Brook broker is started for the whole JVM
 * and shared by those tests; it is killed at JVM exit. Tests that stop, kill or reconfigure a broker always start
 * their own Brook broker and cannot run against an external one.
 */
public final class TestBrokers {
    private static BrookBroker shared;

    private TestBrokers() {}

    public static String externalBootstrap() {
        String s = System.getProperty("bootstrap.servers");
        return s == null || s.isBlank() ? null : s.trim();
    }

    public static boolean isExternal() {
        return externalBootstrap() != null;
    }

    /** The bootstrap address of the external broker, or of the shared Brook broker (started on first use). */
    public static synchronized String bootstrap() {
        String ext = externalBootstrap();
        if (ext != null) return ext;
        if (shared == null || !shared.isAlive()) {
            if (shared != null) shared.close();
            shared = BrookBroker.start("shared");
            BrookBroker b = shared;
            Runtime.getRuntime().addShutdownHook(new Thread(b::close, "brook-shared-shutdown"));
        }
        return shared.bootstrap();
    }

    static synchronized BrookBroker sharedBroker() {
        return shared;
    }
}

package dev.brook.it;

import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestWatcher;

/**
 * Fails a test during which a broker process died on its own (a crash is a failure even when the client
 * recovered), and on a failed test prints the tail of the log of every broker the test used.
 */
public final class BrokerLogOnFailure implements BeforeEachCallback, AfterEachCallback, TestWatcher {
    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(BrokerLogOnFailure.class);

    @Override
    public void beforeEach(ExtensionContext ctx) {
        ctx.getStore(NS).put("firstBroker", BrookBroker.startedBrokers().size());
    }

    @Override
    public void afterEach(ExtensionContext ctx) {
        for (BrookBroker b : brokersOf(ctx)) {
            String crash = b.crashReport();
            if (crash != null) throw new AssertionError(crash);
        }
    }

    private static Set<BrookBroker> brokersOf(ExtensionContext ctx) {
        Integer first = ctx.getStore(NS).get("firstBroker", Integer.class);
        List<BrookBroker> all = BrookBroker.startedBrokers();
        Set<BrookBroker> show = new LinkedHashSet<>();
        BrookBroker shared = TestBrokers.sharedBroker();
        if (shared != null) show.add(shared);
        int from = first == null ? 0 : first;
        show.addAll(all.subList(Math.min(from, all.size()), all.size()));
        return show;
    }

    @Override
    public void testFailed(ExtensionContext ctx, Throwable cause) {
        Set<BrookBroker> show = brokersOf(ctx);
        StringBuilder sb = new StringBuilder();
        sb.append("\n######## ").append(ctx.getDisplayName()).append(" FAILED: ").append(cause).append('\n');
        for (BrookBroker b : show) {
            sb.append("# ").append(b).append('\n').append(b.logTail(40)).append('\n');
        }
        System.err.println(sb);
    }
}

package dev.brook.it;

import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestWatcher;

/** On a failed test, prints the tail of the log of every broker the test used (the shared one and its own). */
public final class BrokerLogOnFailure implements BeforeEachCallback, TestWatcher {
    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(BrokerLogOnFailure.class);

    @Override
    public void beforeEach(ExtensionContext ctx) {
        ctx.getStore(NS).put("firstBroker", BrookBroker.startedBrokers().size());
    }

    @Override
    public void testFailed(ExtensionContext ctx, Throwable cause) {
        Integer first = ctx.getStore(NS).get("firstBroker", Integer.class);
        List<BrookBroker> all = BrookBroker.startedBrokers();
        Set<BrookBroker> show = new LinkedHashSet<>();
        BrookBroker shared = TestBrokers.sharedBroker();
        if (shared != null) show.add(shared);
        // Plus the brokers the test started itself.
        int from = first == null ? 0 : first;
        show.addAll(all.subList(from, all.size()));
        StringBuilder sb = new StringBuilder();
        sb.append("\n######## ").append(ctx.getDisplayName()).append(" FAILED: ").append(cause).append('\n');
        for (BrookBroker b : show) {
            sb.append("# ").append(b).append('\n').append(b.logTail(40)).append('\n');
        }
        System.err.println(sb);
    }
}

package dev.brook.it;

import java.util.ArrayList;
import java.util.List;

/** What a test opened (clusters, clients), closed after it in reverse order, best effort. */
final class Closer {
    private final List<AutoCloseable> items = new ArrayList<>();

    /** Registers {@code c} to be closed by {@link #closeAll()}; returns it. */
    <T extends AutoCloseable> T add(T c) {
        items.add(c);
        return c;
    }

    /** Closes everything registered, newest first; a failure to close one does not stop the others. */
    void closeAll() {
        for (int i = items.size() - 1; i >= 0; i--) {
            try {
                items.get(i).close();
            } catch (Exception e) {
                // best effort: the test's own outcome is what matters
            }
        }
        items.clear();
    }
}

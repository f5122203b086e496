package dev.brook.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** close() of a 3-node cluster is prompt, and leaves no process behind; the supervisor still exits cleanly. */
class CloseTest {
    /**
     * Far below the 9 s (broker.session.timeout.ms) the last nodes waited when every node stopped with a controlled
     * shutdown at once, and far above the tens of milliseconds a kill and a reap take, so a busy machine passes.
     */
    static final Duration CLOSE_MAX = Duration.ofSeconds(3);

    @Test
    void threeNodesCloseWithinBound() throws IOException {
        // A topic led on every node, replicated on all: each node has leaderships a clean stop would hand over.
        Brook brook = Brook.cluster().nodes(3).topic("t", 3, 3).keepDir(true).start();
        Path dir = brook.directory();
        try {
            List<ProcessHandle> procs = new ArrayList<>();
            procs.add(ProcessHandle.of(brook.supervisorPid()).orElseThrow());
            for (Map<String, Object> n : brook.nodes()) {
                procs.add(ProcessHandle.of(((Number) n.get("pid")).longValue()).orElseThrow());
            }
            assertEquals(4, procs.size());

            long t0 = System.nanoTime();
            brook.close();
            Duration took = Duration.ofNanos(System.nanoTime() - t0);

            assertTrue(took.compareTo(CLOSE_MAX) < 0, "close() took " + took.toMillis() + " ms");
            for (ProcessHandle p : procs) assertFalse(p.isAlive(), "still alive: " + p.pid());
            // The supervisor reaped its nodes and finished its own stop: its last line.
            List<String> out = Files.readAllLines(dir.resolve("supervisor.out"), StandardCharsets.UTF_8);
            assertEquals("CLUSTER STOPPED", out.get(out.size() - 1), String.join("\n", out));
        } finally {
            try (Stream<Path> s = Files.walk(dir)) {
                s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }
}

package dev.brook.it;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A main class of the test sources run in a JVM of its own, on the test classpath, so that a test can kill a client
 * with SIGKILL as a crash would. Its stdout is read line by line; stderr (the client's log) goes to a file.
 */
final class ChildJvm implements AutoCloseable {
    /** Lines of stdout read ahead of the test, at most. */
    static final int LINES_QUEUED_MAX = 10_000;
    /** How long {@link #linesUntil} waits for the line it expects. */
    static final long LINE_WAIT_MS_MAX = 60_000;

    private final Process process;
    private final Path stderr;
    private final BlockingQueue<String> lines = new ArrayBlockingQueue<>(LINES_QUEUED_MAX);

    private ChildJvm(Process process, Path stderr) {
        this.process = process;
        this.stderr = stderr;
        Thread reader = new Thread(this::readStdout, "child-jvm-stdout");
        reader.setDaemon(true);
        reader.start();
    }

    static ChildJvm start(Class<?> main, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("-cp");
        // Surefire's forked JVM names its whole test classpath here (java.class.path may be a manifest-only jar).
        cmd.add(System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")));
        cmd.add(main.getName());
        cmd.addAll(List.of(args));
        Path err = Files.createTempFile(main.getSimpleName(), ".stderr");
        Process p = new ProcessBuilder(cmd).redirectError(err.toFile()).start();
        return new ChildJvm(p, err);
    }

    private void readStdout() {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(),
            StandardCharsets.UTF_8))) {
            for (String line = r.readLine(); line != null; line = r.readLine()) {
                if (!lines.offer(line)) return;
            }
        } catch (IOException ignored) {
            // the process is gone; the test sees no more lines
        }
    }

    /** The lines the child prints up to and including {@code last}; fails after {@link #LINE_WAIT_MS_MAX}. */
    List<String> linesUntil(String last) throws InterruptedException {
        List<String> out = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(LINE_WAIT_MS_MAX);
        while (true) {
            long left = deadline - System.nanoTime();
            String line = left > 0 ? lines.poll(left, TimeUnit.NANOSECONDS) : null;
            if (line == null) throw new AssertionError("no line `" + last + "` from the child within "
                + LINE_WAIT_MS_MAX + " ms; it printed " + out + "; alive " + process.isAlive() + "; stderr:\n"
                + stderrTail());
            out.add(line);
            if (line.equals(last)) return out;
        }
    }

    /** SIGKILL, and wait for the process to be gone. */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        if (!process.waitFor(30, TimeUnit.SECONDS)) throw new AssertionError("child did not die after SIGKILL");
    }

    private String stderrTail() {
        try {
            List<String> all = Files.readAllLines(stderr, StandardCharsets.UTF_8);
            return String.join("\n", all.subList(Math.max(0, all.size() - 40), all.size()));
        } catch (IOException e) {
            return "(unreadable: " + e + ")";
        }
    }

    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) kill();
        try {
            Files.deleteIfExists(stderr);
        } catch (IOException ignored) {
            // a temp file left behind
        }
    }
}

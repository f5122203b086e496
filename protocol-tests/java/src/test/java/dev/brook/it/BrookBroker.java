package dev.brook.it;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Runs one Brook broker as a child process.
 *
 * <p>The broker is started as {@code brook serve --config <dir>/server.properties}. The config file uses Kafka's own
 * property names. The first start binds port 0; the broker prints one line
 * {@code READY node.id=1 listener=127.0.0.1:40123 ...} on stdout, which gives the port. Restarts bind the same port
 * and reuse the same {@code log.dirs}, so clients can reconnect to the address they already know.
 *
 * <p>Everything the broker writes (stdout after and before READY, and stderr) goes to {@code broker.log} in the
 * broker's directory; {@link #logTail(int)} returns its end for failure messages.
 */
public final class BrookBroker implements AutoCloseable {
    public static final long READY_TIMEOUT_MS = 30_000;
    public static final long STOP_TIMEOUT_MS = 30_000;

    /** Every broker started in this JVM, in start order; used to print logs on failure. */
    private static final List<BrookBroker> STARTED = Collections.synchronizedList(new ArrayList<>());

    private final String name;
    private final Path dir;
    private final Path dataDir;
    private final Path configFile;
    private final Path logFile;
    private final Map<String, String> extraProps;
    /** Environment variables added to the broker process's (KAFKA_OPTS for JVM system properties). */
    private Map<String, String> env = Map.of();

    private Process process;
    private Thread stdoutPump;
    private String host = "127.0.0.1";
    private int port = 0;
    private Map<String, String> readyFields = Map.of();
    private int starts = 0;
    /** True after stop(), kill() or close(): the process is meant to be gone. */
    private volatile boolean expectDown = false;

    private BrookBroker(String name, Map<String, String> extraProps) {
        this.name = name;
        this.extraProps = new LinkedHashMap<>(extraProps);
        try {
            Path runRoot = Paths.get(System.getProperty("brook.run.dir", "target/brook-runs")).toAbsolutePath();
            Files.createDirectories(runRoot);
            pruneOldRuns(runRoot);
            this.dir = Files.createTempDirectory(runRoot, name + "-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        this.dataDir = dir.resolve("data");
        this.configFile = dir.resolve("server.properties");
        this.logFile = dir.resolve("broker.log");
    }

    private static boolean pruned = false;

    /** Once per JVM: deletes broker directories of earlier runs not touched for an hour, so target/ stays small. */
    private static synchronized void pruneOldRuns(Path runRoot) {
        if (pruned) return;
        pruned = true;
        long cutoff = System.currentTimeMillis() - 3_600_000L;
        try (java.util.stream.Stream<Path> dirs = Files.list(runRoot)) {
            for (Path d : (Iterable<Path>) dirs::iterator) {
                if (!Files.isDirectory(d)) continue;
                Path log = d.resolve("broker.log");
                long touched = Files.getLastModifiedTime(Files.exists(log) ? log : d).toMillis();
                if (touched < cutoff) deleteTree(d);
            }
        } catch (IOException e) {
            // Best effort only.
        }
    }

    private static void deleteTree(Path root) throws IOException {
        try (java.util.stream.Stream<Path> all = Files.walk(root)) {
            for (Path p : (Iterable<Path>) all.sorted(java.util.Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(p);
            }
        }
    }

    /** Starts a fresh broker (new temp dir, port 0). {@code extraProps} are added to server.properties. */
    public static BrookBroker start(String name, Map<String, String> extraProps) {
        BrookBroker b = new BrookBroker(name, extraProps);
        STARTED.add(b);
        b.startProcess();
        return b;
    }

    /** As {@link #start(String, Map)}, with {@code env} added to the broker process's environment. */
    public static BrookBroker start(String name, Map<String, String> extraProps, Map<String, String> env) {
        BrookBroker b = new BrookBroker(name, extraProps);
        b.env = Map.copyOf(env);
        STARTED.add(b);
        b.startProcess();
        return b;
    }

    public static BrookBroker start(String name) {
        return start(name, Map.of());
    }

    static List<BrookBroker> startedBrokers() {
        synchronized (STARTED) {
            return new ArrayList<>(STARTED);
        }
    }

    /** The broker binary: -Dbrook.bin, else $BROOK_BIN, else ../../target/debug/brook from the module dir. */
    public static Path binary() {
        String p = System.getProperty("brook.bin");
        if (p == null || p.isBlank()) p = System.getenv("BROOK_BIN");
        Path bin;
        if (p != null && !p.isBlank()) {
            bin = Paths.get(p);
        } else {
            Path module = Paths.get(System.getProperty("brook.module.dir", "."));
            bin = module.resolve("../../target/debug/brook");
        }
        bin = bin.toAbsolutePath().normalize();
        if (!Files.isExecutable(bin)) {
            throw new IllegalStateException("Brook binary not found or not executable: " + bin
                + " (build it with `cargo build --bin brook`, or set -Dbrook.bin / BROOK_BIN)");
        }
        return bin;
    }

    public String bootstrap() {
        return host + ":" + port;
    }

    public int port() {
        return port;
    }

    public Path dir() {
        return dir;
    }

    public String name() {
        return name;
    }

    /** The key=value fields of the last READY line. */
    public Map<String, String> readyFields() {
        return readyFields;
    }

    public boolean isAlive() {
        return process != null && process.isAlive();
    }

    private void writeConfig() throws IOException {
        Map<String, String> props = new LinkedHashMap<>();
        props.put("node.id", "1");
        props.put("listeners", "PLAINTEXT://127.0.0.1:" + port);
        props.put("log.dirs", dataDir.toString());
        props.put("num.partitions", "1");
        props.put("auto.create.topics.enable", "true");
        props.putAll(extraProps);
        StringBuilder sb = new StringBuilder();
        sb.append("# written by the Java client test harness, start #").append(starts + 1).append('\n');
        props.forEach((k, v) -> sb.append(k).append('=').append(v).append('\n'));
        Files.writeString(configFile, sb.toString(), StandardCharsets.UTF_8);
    }

    private synchronized void startProcess() {
        if (isAlive()) throw new IllegalStateException("broker " + name + " is already running");
        expectDown = false;
        try {
            writeConfig();
            starts++;
            appendLog("==== " + LocalDateTime.now() + " harness: start #" + starts + " " + binary()
                + " serve --config " + configFile + " (port " + (port == 0 ? "any" : port) + ")\n");
            ProcessBuilder pb = new ProcessBuilder(binary().toString(), "serve", "--config", configFile.toString());
            pb.directory(dir.toFile());
            pb.environment().putAll(env);
            pb.redirectInput(ProcessBuilder.Redirect.PIPE);
            pb.redirectError(ProcessBuilder.Redirect.appendTo(logFile.toFile()));
            pb.redirectOutput(ProcessBuilder.Redirect.PIPE);
            process = pb.start();
            process.getOutputStream().close();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start broker " + name, e);
        }

        CompletableFuture<String> ready = new CompletableFuture<>();
        Process p = process;
        stdoutPump = new Thread(() -> pumpStdout(p, ready), "brook-stdout-" + name + "-" + starts);
        stdoutPump.setDaemon(true);
        stdoutPump.start();

        String line;
        try {
            line = ready.get(READY_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            expectDown = true;  // a failed start is reported by the exception, not as a crash
            killTree(process);
            throw new IllegalStateException("broker " + name + " printed no READY line within " + READY_TIMEOUT_MS
                + " ms\n" + logTail(60));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            expectDown = true;
            killTree(process);
            throw new IllegalStateException("interrupted while waiting for READY", e);
        } catch (ExecutionException e) {
            expectDown = true;
            killTree(process);
            waitForExit(process, 5_000);
            String exit = process.isAlive() ? "still running" : "exit code " + process.exitValue();
            throw new IllegalStateException("broker " + name + " stopped before READY (" + exit + "): "
                + e.getCause().getMessage() + "\n" + logTail(60));
        }
        Map<String, String> fields = parseReady(line);
        String listener = fields.get("listener");
        if (listener == null || listener.lastIndexOf(':') < 0) {
            expectDown = true;
            killTree(process);
            throw new IllegalStateException("READY line without listener=host:port: " + line);
        }
        int colon = listener.lastIndexOf(':');
        String newHost = listener.substring(0, colon);
        int newPort = Integer.parseInt(listener.substring(colon + 1));
        if (port != 0 && newPort != port) {
            expectDown = true;
            killTree(process);
            throw new IllegalStateException("broker restarted on port " + newPort + ", expected " + port);
        }
        host = newHost;
        port = newPort;
        readyFields = fields;
    }

    static Map<String, String> parseReady(String line) {
        Map<String, String> m = new LinkedHashMap<>();
        String[] parts = line.trim().split("\\s+");
        for (int i = 1; i < parts.length; i++) {
            int eq = parts[i].indexOf('=');
            if (eq > 0) m.put(parts[i].substring(0, eq), parts[i].substring(eq + 1));
        }
        return m;
    }

    /** Copies stdout to the log file; completes {@code ready} with the READY line, or exceptionally at EOF. */
    private void pumpStdout(Process p, CompletableFuture<String> ready) {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
             OutputStream out = Files.newOutputStream(logFile, StandardOpenOption.CREATE, StandardOpenOption.APPEND)) {
            String line;
            while ((line = r.readLine()) != null) {
                out.write(("[stdout] " + line + "\n").getBytes(StandardCharsets.UTF_8));
                out.flush();
                if (!ready.isDone() && (line.equals("READY") || line.startsWith("READY "))) {
                    ready.complete(line);
                }
            }
        } catch (IOException e) {
            ready.completeExceptionally(e);
            return;
        }
        ready.completeExceptionally(new IOException("stdout closed without a READY line"));
    }

    private void appendLog(String s) {
        try {
            Files.writeString(logFile, s, StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void waitForExit(Process p, long timeoutMs) {
        try {
            p.waitFor(timeoutMs, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void joinPump() {
        if (stdoutPump == null) return;
        try {
            stdoutPump.join(5_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * SIGKILL to the process and its descendants. Brook has none; a wrapper script given as brook.bin (to run
     * another broker behind the same command line) would otherwise leave its broker running.
     */
    private static void killTree(Process p) {
        List<ProcessHandle> children = p.descendants().collect(java.util.stream.Collectors.toList());
        children.forEach(ProcessHandle::destroyForcibly);
        p.destroyForcibly();
        for (ProcessHandle c : children) {
            try {
                c.onExit().get(STOP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            } catch (Exception e) {
                throw new AssertionError("process " + c.pid() + " under the broker survived SIGKILL", e);
            }
        }
    }

    /** SIGTERM, then wait (bounded) for the process to exit. Fails if it does not exit in time. */
    public synchronized void stop() {
        if (!isAlive()) return;
        expectDown = true;
        appendLog("==== " + LocalDateTime.now() + " harness: SIGTERM\n");
        process.destroy();
        waitForExit(process, STOP_TIMEOUT_MS);
        if (process.isAlive()) {
            killTree(process);
            waitForExit(process, 10_000);
            joinPump();
            throw new AssertionError("broker " + name + " did not exit within " + STOP_TIMEOUT_MS
                + " ms of SIGTERM; killed it\n" + logTail(40));
        }
        joinPump();
        appendLog("==== " + LocalDateTime.now() + " harness: exited with code " + process.exitValue() + "\n");
    }

    /** SIGKILL, then wait for the process to be gone. */
    public synchronized void kill() {
        if (!isAlive()) return;
        expectDown = true;
        appendLog("==== " + LocalDateTime.now() + " harness: SIGKILL\n");
        killTree(process);
        waitForExit(process, STOP_TIMEOUT_MS);
        if (process.isAlive()) throw new AssertionError("broker " + name + " survived SIGKILL for 30 s");
        joinPump();
    }

    /** Starts the broker again on the same port with the same log.dirs (after stop() or kill()). */
    public synchronized void startAgain() {
        startProcess();
    }

    /** stop() (SIGTERM) followed by startAgain(). */
    public synchronized void restart() {
        stop();
        startAgain();
    }

    /** Null while the broker runs or was stopped on purpose; otherwise a description of the crash. */
    public String crashReport() {
        Process p = process;
        if (p == null || expectDown || p.isAlive()) return null;
        expectDown = true;  // report a crash once
        return "broker " + name + " exited on its own with code " + p.exitValue() + "\n" + logTail(40);
    }

    /** Panic messages (Rust) in the log, with the line after each, so a crash's cause is not lost in a backtrace. */
    public String panics() {
        List<String> lines;
        try {
            lines = Files.exists(logFile) ? Files.readAllLines(logFile, StandardCharsets.ISO_8859_1) : List.of();
        } catch (IOException e) {
            return "";
        }
        StringBuilder sb = new StringBuilder();
        int found = 0;
        for (int i = 0; i < lines.size() && found < 5; i++) {
            if (lines.get(i).contains("panicked at")) {
                found++;
                sb.append("PANIC: ").append(lines.get(i));
                if (i + 1 < lines.size()) sb.append(" | ").append(lines.get(i + 1));
                sb.append('\n');
            }
        }
        return sb.toString();
    }

    /** The last {@code n} lines of the broker log, framed for an error message. */
    public String logTail(int n) {
        List<String> lines;
        try {
            lines = Files.exists(logFile) ? Files.readAllLines(logFile, StandardCharsets.ISO_8859_1) : List.of();
        } catch (IOException e) {
            return "(cannot read " + logFile + ": " + e + ")";
        }
        int from = Math.max(0, lines.size() - n);
        StringBuilder sb = new StringBuilder();
        sb.append(panics());
        sb.append("---- last ").append(lines.size() - from).append(" of ").append(lines.size())
            .append(" lines of ").append(logFile).append(" ----\n");
        for (String l : lines.subList(from, lines.size())) sb.append(l).append('\n');
        sb.append("---- end of broker log ----");
        return sb.toString();
    }

    @Override
    public synchronized void close() {
        expectDown = true;
        if (isAlive()) {
            appendLog("==== " + LocalDateTime.now() + " harness: close (SIGKILL)\n");
            killTree(process);
            waitForExit(process, STOP_TIMEOUT_MS);
            joinPump();
        }
        assertNoEncodeFailures(logFile, "broker " + name);
    }

    /**
     * What a node logs, at error level, when it closes a connection because a response could not be encoded at
     * the request's version (the broker's {@code net::connection}, which also counts it in
     * {@code brook_response_encode_failures_total}). The log outlives restarts; the count does not.
     */
    static final String ENCODE_FAILURE_LOG = "a response could not be encoded";

    /** Fails the test whose node could not encode an answer: its client saw a closed connection. */
    static void assertNoEncodeFailures(Path log, String what) {
        List<String> failures;
        try {
            failures = Files.exists(log)
                ? new String(Files.readAllBytes(log), StandardCharsets.UTF_8).lines()
                    .filter(l -> l.contains(ENCODE_FAILURE_LOG)).toList()
                : List.of();
        } catch (IOException e) {
            throw new UncheckedIOException("read " + log, e);
        }
        if (!failures.isEmpty()) {
            throw new AssertionError(what + " could not encode " + failures.size() + " response(s); see " + log
                + ":\n" + String.join("\n", failures));
        }
    }

    @Override
    public String toString() {
        return "BrookBroker[" + name + " " + bootstrap() + " dir=" + dir + "]";
    }
}

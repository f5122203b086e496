package dev.brook.junit;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * A Brook cluster for a test: {@code brook cluster} (the supervisor, tools/src/supervisor in the Brook repository)
 * started as a child process on free loopback ports in a temp directory, driven through its HTTP API.
 *
 * <pre>{@code
 * try (Brook brook = Brook.cluster().nodes(3).withConfig("min.insync.replicas", "2").start()) {
 *     props.put("bootstrap.servers", brook.bootstrapServers());
 *     brook.kill(brook.leader("orders", 0));
 * }
 * }</pre>
 *
 * <p>The supervisor runs with {@code --exit-on-stdin-eof}: it watches its stdin, a pipe this JVM holds, and stops the
 * cluster when the pipe closes, so the nodes go with the JVM even when it is killed.
 */
public final class Brook implements AutoCloseable {
    /** Pause between two readings of a view in the waits; the condition decides, not this. */
    public static final long POLL_INTERVAL_MS = 20;
    /** Bound on one call to the supervisor (node restarts wait for READY: up to the ready timeout). */
    static final Duration CALL_TIMEOUT = Duration.ofSeconds(90);
    /** How long close() lets the supervisor reap its killed nodes and exit before it kills the supervisor. */
    static final long STOP_TIMEOUT_MS = 20_000;
    /** How long close() waits for the last of the supervisor's output to reach supervisor.out. */
    static final long PUMP_JOIN_MS = 2_000;
    /** Lines of the supervisor's output an error message repeats. */
    static final int TAIL_LINES = 30;

    private final Process process;
    /** Copies the supervisor's stdout to {@code supervisor.out}; ends at the supervisor's exit. */
    private final Thread pump;
    private final Path dir;
    private final boolean keepDir;
    private final String bootstrap;
    private final String supervisor;
    private final Set<Integer> ids;
    /**
     * Made at the first call to the supervisor, not at start: a JVM's first {@code HttpClient} loads its classes and
     * starts a selector thread, about half a second in a fresh JVM, and a test that only produces and consumes never
     * needs it ({@code CLUSTER READY} already means every node lists every node as an unfenced broker).
     */
    private HttpClient http;
    private final Thread shutdownHook;

    public static Builder cluster() {
        return new Builder();
    }

    /** How to start a cluster; {@link #start()} starts it. */
    public static final class Builder {
        int nodes = 1;
        int basePort = 0;
        Duration readyTimeout = Duration.ofSeconds(60);
        Path binary;
        boolean keepDir = Boolean.getBoolean("brook.keep");
        final Map<String, String> config = new LinkedHashMap<>();
        final List<String> topics = new ArrayList<>();

        /** Node ids 1..n, every one a broker and a voter of the metadata quorum (default 1). */
        public Builder nodes(int n) {
            if (n < 1) throw new IllegalArgumentException("nodes must be at least 1, not " + n);
            this.nodes = n;
            return this;
        }

        /** A Kafka broker config key for every node, as in server.properties; an unknown key fails start(). */
        public Builder withConfig(String key, String value) {
            config.put(key, value);
            return this;
        }

        /**
         * A topic created before {@link #start()} returns, with the broker's default partitions and replication
         * factor; {@code "name:partitions"} and {@code "name:partitions:replicationFactor"} set them. Every node
         * then names a leader for each partition, so a first producer finds it at once (no auto-creation round).
         */
        public Builder topic(String spec) {
            topics.add(spec);
            return this;
        }

        /** A topic of {@code partitions} partitions and {@code replicationFactor} replicas, as {@link #topic(String)}. */
        public Builder topic(String name, int partitions, int replicationFactor) {
            return topic(name + ":" + partitions + ":" + replicationFactor);
        }

        /** Node 1's client port (node i: port + i - 1, controller ports +100, admin +552); 0 (default): free ports. */
        public Builder basePort(int port) {
            this.basePort = port;
            return this;
        }

        /** How long the cluster may take to be ready (default 60 s). */
        public Builder readyTimeout(Duration timeout) {
            this.readyTimeout = timeout;
            return this;
        }

        /** The brook binary to run (default: -Dbrook.bin, $BROOK_BIN, else the jar's own). */
        public Builder binary(Path path) {
            this.binary = path;
            return this;
        }

        /** Keep the temp directory (data and logs) after close (default: -Dbrook.keep=true). */
        public Builder keepDir(boolean keep) {
            this.keepDir = keep;
            return this;
        }

        public Brook start() {
            Path bin = binary;
            if (bin != null) BrookBinary.check(bin.toAbsolutePath(), "binary(...)");
            else bin = BrookBinary.resolve();
            return Brook.start(this, bin.toAbsolutePath());
        }
    }

    private Brook(Process process, Thread pump, Path dir, boolean keepDir, Map<String, String> ready, int nodes) {
        this.process = process;
        this.pump = pump;
        this.dir = dir;
        this.keepDir = keepDir;
        this.bootstrap = ready.get("bootstrap");
        this.supervisor = ready.get("supervisor");
        this.ids = Stream.iterate(1, i -> i + 1).limit(nodes).collect(Collectors.toCollection(TreeSet::new));
        this.shutdownHook = new Thread(this::stopProcess, "brook-cluster-shutdown");
        Runtime.getRuntime().addShutdownHook(shutdownHook);
    }

    private static List<String> command(Builder b, Path bin, Path dir) {
        List<String> cmd = new ArrayList<>(List.of(bin.toString(), "cluster", "--nodes", String.valueOf(b.nodes),
            "--base-port", String.valueOf(b.basePort), "--supervisor-listener", "127.0.0.1:0",
            "--data-dir", dir.toString(), "--exit-on-stdin-eof",
            // The test timings every kit sets (the supervisor's one list; withConfig wins).
            "--test-timings",
            "--ready-timeout-secs", String.valueOf(Math.max(1, b.readyTimeout.toSeconds()))));
        b.config.forEach((k, v) -> {
            cmd.add("--override");
            cmd.add(k + "=" + v);
        });
        for (String t : b.topics) {
            cmd.add("--topic");
            cmd.add(t);
        }
        return cmd;
    }

    private static Brook start(Builder b, Path bin) {
        long deadline = System.nanoTime() + b.readyTimeout.toNanos();
        Path dir;
        Process p;
        try {
            dir = Files.createTempDirectory("brook-");
            ProcessBuilder pb = new ProcessBuilder(command(b, bin, dir)).directory(dir.toFile());
            pb.redirectError(ProcessBuilder.Redirect.appendTo(dir.resolve("supervisor.log").toFile()));
            p = pb.start();
        } catch (IOException e) {
            throw new BrookException("cannot start " + bin + " cluster: " + e.getMessage(), e);
        }
        CompletableFuture<String> ready = new CompletableFuture<>();
        Thread pump = new Thread(() -> pump(p, dir.resolve("supervisor.out"), ready), "brook-cluster-stdout");
        pump.setDaemon(true);
        pump.start();
        Map<String, String> fields;
        try {
            fields = parseReady(awaitReadyLine(p, ready, deadline, dir, b.readyTimeout));
        } catch (BrookException e) {
            killTree(p);
            if (!b.keepDir) deleteTree(dir);
            throw e;
        }
        // The supervisor prints CLUSTER READY once every node lists every node as an unfenced broker (Kafka's
        // TestUtils.waitUntilBrokerMetadataIsPropagated) and each --topic has its leader: nothing is left to wait for.
        return new Brook(p, pump, dir, b.keepDir, fields, b.nodes);
    }

    /** Copies the supervisor's stdout to a file and hands over its CLUSTER READY line. */
    private static void pump(Process p, Path out, CompletableFuture<String> ready) {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
             OutputStream o = Files.newOutputStream(out, StandardOpenOption.CREATE, StandardOpenOption.APPEND)) {
            String line;
            while ((line = r.readLine()) != null) {
                o.write((line + "\n").getBytes(StandardCharsets.UTF_8));
                o.flush();
                if (line.startsWith("CLUSTER READY ")) ready.complete(line);
            }
        } catch (IOException e) {
            // The process is gone; the waiter learns it from the exit.
        }
        ready.completeExceptionally(new IOException("the supervisor's stdout closed"));
    }

    private static String awaitReadyLine(Process p, CompletableFuture<String> ready, long deadline, Path dir,
                                         Duration timeout) {
        try {
            return ready.get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            throw new BrookException("brook cluster not ready within " + timeout.toMillis() + " ms; "
                + tail(dir.resolve("supervisor.log")));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new BrookException("interrupted while brook cluster started", e);
        } catch (Exception e) {
            try {
                p.waitFor(5, TimeUnit.SECONDS);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
            }
            String code = p.isAlive() ? "still running" : "exit code " + p.exitValue();
            throw new BrookException("brook cluster failed to start (" + code + "): " + cause(dir));
        }
    }

    /** The supervisor's own error lines ("brook: ..."), else the tail of its stderr. */
    private static String cause(Path dir) {
        Path log = dir.resolve("supervisor.log");
        try {
            List<String> lines = Files.exists(log) ? Files.readAllLines(log, StandardCharsets.UTF_8) : List.of();
            String own = lines.stream().filter(l -> l.startsWith("brook: ")).map(l -> l.substring(7))
                .collect(Collectors.joining("; "));
            return own.isEmpty() ? tail(log) : own;
        } catch (IOException e) {
            return "(cannot read " + log + ": " + e + ")";
        }
    }

    static String tail(Path file) {
        try {
            List<String> lines = Files.exists(file) ? Files.readAllLines(file, StandardCharsets.UTF_8) : List.of();
            int from = Math.max(0, lines.size() - TAIL_LINES);
            return "last lines of " + file + ":\n" + String.join("\n", lines.subList(from, lines.size()));
        } catch (IOException e) {
            return "(cannot read " + file + ": " + e + ")";
        }
    }

    static Map<String, String> parseReady(String line) {
        Map<String, String> m = new LinkedHashMap<>();
        for (String part : line.trim().split("\\s+")) {
            int eq = part.indexOf('=');
            if (eq > 0) m.put(part.substring(0, eq), part.substring(eq + 1));
        }
        if (!m.containsKey("bootstrap") || !m.containsKey("supervisor")) {
            throw new BrookException("unexpected CLUSTER READY line: " + line);
        }
        return m;
    }

    // -------------------------------------------------------------------------------------------------------------
    // Addresses and nodes
    // -------------------------------------------------------------------------------------------------------------

    /** Every node's client address, comma-separated: {@code bootstrap.servers}. */
    public String bootstrapServers() {
        return bootstrap;
    }

    /** {@code host:port} of the supervisor's HTTP API (docs: tools/src/supervisor). */
    public String supervisorAddress() {
        return supervisor;
    }

    /** The temp directory: {@code node-N/} data, {@code node-N.log}, {@code supervisor.log}. */
    public Path directory() {
        return dir;
    }

    /** The supervisor's process id ({@code brook cluster}); each node's is in {@link #nodes()}. */
    public long supervisorPid() {
        return process.pid();
    }

    public Set<Integer> nodeIds() {
        return new TreeSet<>(ids);
    }

    /** Node {@code id}'s client address. */
    public String bootstrapServers(int id) {
        return (String) Json.at(node(id), "client");
    }

    /** {@code GET /nodes}: each node's id, pid, alive, paused, ports, log file and last exit. */
    @SuppressWarnings("unchecked")
    public List<Map<String, Object>> nodes() {
        return (List<Map<String, Object>>) Json.at(get("/nodes"), "nodes");
    }

    private Map<String, Object> node(int id) {
        return nodes().stream().filter(n -> ((Number) n.get("id")).intValue() == id).findFirst()
            .orElseThrow(() -> new IllegalArgumentException("no node " + id + "; nodes are " + ids));
    }

    public Set<Integer> liveNodeIds() {
        return nodes().stream().filter(n -> Boolean.TRUE.equals(n.get("alive")))
            .map(n -> ((Number) n.get("id")).intValue()).collect(Collectors.toCollection(TreeSet::new));
    }

    /** SIGKILL; returns once the process is gone. The node stays down until {@link #start(int)}. */
    public void kill(int id) {
        post("/nodes/" + id + "/kill", null);
    }

    /** SIGTERM (a clean shutdown); returns once the process is gone. */
    public void stop(int id) {
        post("/nodes/" + id + "/kill?signal=term", null);
    }

    /** Starts a stopped node with its data and ports, and waits until every live node lists it as a broker. */
    public void start(int id) {
        post("/nodes/" + id + "/start", null);
        awaitBrokersRegistered(CALL_TIMEOUT);
    }

    /** Stops the node (SIGTERM) if it runs and starts it again, then waits as {@link #start(int)}. */
    public void restart(int id) {
        post("/nodes/" + id + "/restart", null);
        awaitBrokersRegistered(CALL_TIMEOUT);
    }

    /** SIGSTOP: the node keeps its connections but answers nothing, as a stalled process. */
    public void pause(int id) {
        post("/nodes/" + id + "/pause", null);
    }

    /** SIGCONT after {@link #pause(int)}. */
    public void resume(int id) {
        post("/nodes/" + id + "/resume", null);
    }

    // -------------------------------------------------------------------------------------------------------------
    // Faults (docs/FAULTS.md): rules on one node, through the supervisor
    // -------------------------------------------------------------------------------------------------------------

    /** Installs a fault rule (JSON, e.g. {@code {"action":"error","api":"produce","error":"NOT_ENOUGH_REPLICAS"}}) on
     *  node {@code id}; returns the rule id. A refused rule throws with the broker's reason. */
    public long addFault(int id, String ruleJson) {
        return ((Number) Json.at(post("/nodes/" + id + "/faults", ruleJson), "id")).longValue();
    }

    /** Node {@code id}'s rules, each with how often it {@code fired}. */
    @SuppressWarnings("unchecked")
    public List<Map<String, Object>> faults(int id) {
        return (List<Map<String, Object>>) Json.at(get("/nodes/" + id + "/faults"), "rules");
    }

    public void removeFault(int id, long rule) {
        send("DELETE", "/nodes/" + id + "/faults/" + rule, null);
    }

    public void clearFaults(int id) {
        send("DELETE", "/nodes/" + id + "/faults", null);
    }

    // -------------------------------------------------------------------------------------------------------------
    // State views (docs/STATE-VIEWS.md), every node's under its id, and waits on them
    // -------------------------------------------------------------------------------------------------------------

    /** {@code GET /v1/cluster}: {@code {"nodes": {"1": view, ...}}}. */
    public Map<String, Object> clusterView() {
        return view("/v1/cluster");
    }

    /** {@code GET /v1/partitions?topic=T} on every node. */
    public Map<String, Object> partitionsView(String topic) {
        return view("/v1/partitions?topic=" + URLEncoder.encode(topic, StandardCharsets.UTF_8));
    }

    /** {@code GET /v1/groups} on every node (a group shows on its coordinator). */
    public Map<String, Object> groupsView() {
        return view("/v1/groups");
    }

    /** {@code GET /v1/producers?topic=T&partition=P} on every node. */
    public Map<String, Object> producersView(String topic, int partition) {
        return view("/v1/producers?topic=" + URLEncoder.encode(topic, StandardCharsets.UTF_8)
            + "&partition=" + partition);
    }

    @SuppressWarnings("unchecked")
    private Map<String, Object> view(String path) {
        return (Map<String, Object>) Json.at(get(path), "nodes");
    }

    /** The partition's entry on the node that leads it, or null when no live node leads it. */
    @SuppressWarnings("unchecked")
    public Map<String, Object> leaderEntry(String topic, int partition) {
        for (Object nodeView : partitionsView(topic).values()) {
            Object ps = Json.at(nodeView, "partitions");
            if (!(ps instanceof List<?> list)) continue;
            for (Object p : list) {
                Map<String, Object> e = (Map<String, Object>) p;
                if (((Number) e.get("partition")).intValue() == partition && "leader".equals(e.get("role"))) return e;
            }
        }
        return null;
    }

    /** The id of the node leading the partition, -1 if none does now. */
    public int leader(String topic, int partition) {
        Map<String, Object> e = leaderEntry(topic, partition);
        return e == null ? -1 : ((Number) e.get("leader")).intValue();
    }

    /** Waits until a live node leads the partition; returns its id. */
    public int awaitLeader(String topic, int partition, Duration timeout) {
        return await(topic + "-" + partition + " has a leader", timeout, () -> leaderEntry(topic, partition),
            e -> e == null ? null : ((Number) e.get("leader")).intValue());
    }

    /** Waits until the partition's leader has an ISR of {@code size}; returns the leader's entry. */
    public Map<String, Object> awaitIsrSize(String topic, int partition, int size, Duration timeout) {
        return await(topic + "-" + partition + ": an ISR of " + size, timeout, () -> leaderEntry(topic, partition),
            e -> e != null && ((List<?>) e.get("isr")).size() == size ? e : null);
    }

    /** Waits until the partition's leader has a high watermark of at least {@code offset}; returns it. */
    public long awaitHighWatermark(String topic, int partition, long offset, Duration timeout) {
        return await(topic + "-" + partition + ": a high watermark of at least " + offset, timeout,
            () -> leaderEntry(topic, partition), e -> {
                if (e == null) return null;
                long hw = ((Number) e.get("high_watermark")).longValue();
                return hw >= offset ? hw : null;
            });
    }

    /** Waits until the group is Stable on its coordinator (any generation); returns the group's entry. */
    public Map<String, Object> awaitStableGroup(String groupId, Duration timeout) {
        return awaitStableGroup(groupId, 0, timeout);
    }

    /** Waits until the group is Stable at generation (classic) or group epoch (consumer) {@code generation} or later. */
    @SuppressWarnings("unchecked")
    public Map<String, Object> awaitStableGroup(String groupId, long generation, Duration timeout) {
        return await("group " + groupId + ": Stable at generation " + generation + " or later", timeout,
            this::groupsView, v -> {
                for (Object nodeView : v.values()) {
                    Object gs = Json.at(nodeView, "groups");
                    if (!(gs instanceof List<?> list)) continue;
                    for (Object g : list) {
                        Map<String, Object> e = (Map<String, Object>) g;
                        if (groupId.equals(e.get("group_id")) && "Stable".equals(e.get("state"))
                            && e.get("generation") instanceof Number n && n.longValue() >= generation) return e;
                    }
                }
                return null;
            });
    }

    /** Waits until every live node lists every live node as a registered, unfenced broker. */
    public void awaitBrokersRegistered(Duration timeout) {
        await("every live node lists every live node as an unfenced broker", timeout, this::clusterView, v -> {
            Set<Integer> live = liveNodeIds();
            for (int id : live) {
                Object brokers = Json.at(v, String.valueOf(id), "controller", "brokers");
                if (!(brokers instanceof List<?> list)) return null;
                Set<Integer> seen = list.stream().filter(b -> Boolean.FALSE.equals(Json.at(b, "fenced")))
                    .map(b -> ((Number) Json.at(b, "id")).intValue()).collect(Collectors.toSet());
                if (!seen.containsAll(live)) return null;
            }
            return Boolean.TRUE;
        });
    }

    /**
     * Reads with {@code read} until {@code accept} gives non-null, or {@code timeout} passes: then throws with the
     * last reading.
     */
    public <V, T> T await(String what, Duration timeout, java.util.function.Supplier<V> read, Function<V, T> accept) {
        long deadline = System.nanoTime() + timeout.toNanos();
        String last;
        while (true) {
            try {
                V v = read.get();
                T t = accept.apply(v);
                if (t != null) return t;
                last = String.valueOf(v);
            } catch (BrookException | ClassCastException | NullPointerException e) {
                last = e.toString();
            }
            if (System.nanoTime() >= deadline) {
                if (last.length() > 2000) last = last.substring(0, 2000) + "...";
                throw new BrookException(what + ": not reached within " + timeout.toMillis() + " ms; last seen: "
                    + last);
            }
            try {
                Thread.sleep(POLL_INTERVAL_MS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new BrookException("interrupted while waiting for " + what, e);
            }
        }
    }

    // -------------------------------------------------------------------------------------------------------------
    // HTTP
    // -------------------------------------------------------------------------------------------------------------

    public Object get(String path) {
        return send("GET", path, null);
    }

    public Object post(String path, String json) {
        return send("POST", path, json);
    }

    private synchronized HttpClient client() {
        if (http == null) {
            http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5))
                .build();
        }
        return http;
    }

    private Object send(String method, String path, String json) {
        HttpRequest.Builder rb = HttpRequest.newBuilder(URI.create("http://" + supervisor + path))
            .timeout(CALL_TIMEOUT);
        if (json != null) {
            rb.header("Content-Type", "application/json").method(method, HttpRequest.BodyPublishers.ofString(json));
        } else {
            rb.method(method, HttpRequest.BodyPublishers.noBody());
        }
        HttpResponse<String> r;
        try {
            r = client().send(rb.build(), HttpResponse.BodyHandlers.ofString());
        } catch (IOException e) {
            throw new BrookException(method + " " + path + " on the supervisor " + supervisor + ": " + e, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new BrookException("interrupted: " + method + " " + path, e);
        }
        if (r.statusCode() / 100 != 2) {
            throw new BrookException(method + " " + path + ": status " + r.statusCode() + ": " + r.body());
        }
        return r.body().isEmpty() ? null : Json.parse(r.body());
    }

    // -------------------------------------------------------------------------------------------------------------
    // Stopping
    // -------------------------------------------------------------------------------------------------------------

    /** Stops every node and the supervisor, and deletes the temp directory (unless kept). */
    @Override
    public void close() {
        stopProcess();
        try {
            Runtime.getRuntime().removeShutdownHook(shutdownHook);
        } catch (IllegalStateException shuttingDown) {
            // close() from the hook itself, or during shutdown: nothing to remove.
        }
        if (!keepDir) deleteTree(dir);
    }

    /**
     * Kills every node (SIGKILL), then closes the supervisor's stdin, which stops it ({@code --exit-on-stdin-eof}):
     * it reaps the nodes and exits; bounded, then SIGKILL. The cluster is being thrown away, as Testcontainers kills
     * its containers: a clean stop of every node at once cannot complete, since each node's controlled shutdown
     * (Kafka's {@code BrokerServer.shutdown}) waits for the controller to commit it, and once a majority of the voters
     * has gone no commit can happen, so the last nodes waited their {@code broker.session.timeout.ms} (9 s) before
     * they gave up. What a node acknowledged is on disk either way (Brook's log survives SIGKILL); {@link #stop(int)}
     * is the clean shutdown of one node.
     */
    private void stopProcess() {
        if (!process.isAlive()) return;
        // The supervisor's children are the nodes; it starts no other process.
        process.children().forEach(ProcessHandle::destroyForcibly);
        try {
            process.getOutputStream().close();
            if (!process.waitFor(STOP_TIMEOUT_MS, TimeUnit.MILLISECONDS)) killTree(process);
            // Its last lines ("CLUSTER STOPPED") are in supervisor.out when close() returns.
            pump.join(PUMP_JOIN_MS);
        } catch (IOException e) {
            killTree(process);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            killTree(process);
        }
    }

    private static void killTree(Process p) {
        p.descendants().forEach(ProcessHandle::destroyForcibly);
        p.destroyForcibly();
        try {
            p.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void deleteTree(Path dir) {
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException e) {
            // Best effort: a temp directory.
        }
    }

    @Override
    public String toString() {
        return "Brook[" + ids.size() + " nodes, bootstrap " + bootstrap + ", supervisor " + supervisor + ", " + dir
            + "]";
    }
}

package dev.brook.it;

import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.message.MetadataResponseData;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.MetadataRequest;
import org.apache.kafka.common.requests.MetadataResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestWatcher;

/**
 * A cluster of Brook nodes, each a {@code brook serve} child process with {@code process.roles=broker,controller}:
 * a voter of the metadata quorum and a broker.
 *
 * <p>Every node gets fixed ports, chosen once (free ports found by binding port 0), because
 * {@code controller.quorum.voters} names them and a restarted node must come back on the same ones. Each node has
 * its own data dir and log file ({@code node-N.log}: the harness's own lines, stdout and stderr). Nodes can be
 * stopped (SIGTERM), killed (SIGKILL), frozen (SIGSTOP / SIGCONT) and started again with the same command line.
 *
 * <p>Wait helpers poll the cluster through the Admin client ({@code describeTopics}: leader, ISR) or a raw
 * Metadata request (which also carries the leader epoch and the controller id), always with a deadline.
 * {@link LogOnFailure} prints the tail of every node's log of every cluster started during a failed test.
 */
public final class BrookCluster implements AutoCloseable {
    public static final long READY_TIMEOUT_MS = 30_000;
    public static final long STOP_TIMEOUT_MS = 30_000;
    /** Bound on one Admin call or one raw Metadata exchange. */
    public static final Duration CALL = Duration.ofSeconds(10);

    private static final List<BrookCluster> STARTED = Collections.synchronizedList(new ArrayList<>());

    private final String name;
    private final Path dir;
    private final Map<Integer, NodeProc> nodes = new LinkedHashMap<>();
    private final Map<String, String> overrides;
    private Admin admin;

    /** The properties every node of the scenarios' clusters gets, before a test's own overrides. */
    public static Map<String, String> defaults() {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("default.replication.factor", "3");
        m.put("min.insync.replicas", "2");
        m.put("replica.lag.time.max.ms", "3000");
        m.put("broker.session.timeout.ms", "3000");
        m.put("broker.heartbeat.interval.ms", "500");
        m.put("num.partitions", "1");
        m.put("auto.create.topics.enable", "false");
        return m;
    }

    private BrookCluster(String name, int size, Map<String, String> overrides) {
        this.name = name;
        this.overrides = new LinkedHashMap<>(defaults());
        this.overrides.putAll(overrides);
        try {
            Path runRoot = Paths.get(System.getProperty("brook.run.dir", "target/brook-runs")).toAbsolutePath();
            Files.createDirectories(runRoot);
            this.dir = Files.createTempDirectory(runRoot, "cluster-" + name + "-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        int[] ports = freePorts(2 * size);
        for (int id = 1; id <= size; id++) {
            nodes.put(id, new NodeProc(id, ports[2 * (id - 1)], ports[2 * (id - 1) + 1]));
        }
    }

    /** Starts {@code size} nodes (ids 1..size, all voters) and waits for every READY line. */
    public static BrookCluster start(String name, int size, Map<String, String> overrides) {
        BrookCluster c = new BrookCluster(name, size, overrides);
        STARTED.add(c);
        // Start them all, then wait: a node only becomes ready once the quorum has a leader.
        List<CompletableFuture<Void>> starts = new ArrayList<>();
        for (NodeProc n : c.nodes.values()) starts.add(CompletableFuture.runAsync(n::start));
        try {
            CompletableFuture.allOf(starts.toArray(new CompletableFuture[0]))
                .get(READY_TIMEOUT_MS + 10_000, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            c.close();
            throw new IllegalStateException("cluster " + name + " did not start: " + e.getCause().getMessage(), e);
        } catch (InterruptedException | TimeoutException e) {
            c.close();
            throw new IllegalStateException("cluster " + name + " did not start", e);
        }
        // READY comes before the broker's registration commits: wait until every node serves every broker.
        try {
            c.awaitBrokersListed(c.ids(), Duration.ofSeconds(30));
        } catch (InterruptedException | AssertionError e) {
            String tails = c.logTails(40);
            c.close();
            throw new IllegalStateException("cluster " + name + " did not register every broker: " + e + "\n" + tails);
        } 
        return c;
    }

    public static BrookCluster start(String name, int size) {
        return start(name, size, Map.of());
    }

    /** Forgets the clusters of earlier tests, so {@link LogOnFailure} prints only the current test's. */
    public static void resetStarted() {
        STARTED.clear();
    }

    static List<BrookCluster> started() {
        synchronized (STARTED) {
            return new ArrayList<>(STARTED);
        }
    }

    /**
     * Fixed ports from {@link #CLUSTER_PORTS_FIRST} to {@link #CLUSTER_PORTS_LAST}, below the kernel's ephemeral
     * range (32768-60999 by default): a port probed with port 0 comes from the ephemeral range, and between the
     * probe's close and the node's bind an outgoing connection (a client, a follower's fetch) can take it, so the
     * node fails with "Address already in use". The Rust harness uses 21000-27999; this range is apart from it.
     * Each probe is held until all are found so one call never answers the same port twice.
     */
    private static final int CLUSTER_PORTS_FIRST = 28000;
    private static final int CLUSTER_PORTS_LAST = 31999;

    private static int[] freePorts(int n) {
        int span = CLUSTER_PORTS_LAST - CLUSTER_PORTS_FIRST + 1;
        int start = Math.floorMod((int) (ProcessHandle.current().pid() * 7919 + System.nanoTime()), span);
        List<ServerSocket> held = new ArrayList<>();
        int[] ports = new int[n];
        try {
            // Bounded: one pass over the range at most.
            for (int i = 0; i < span && held.size() < n; i++) {
                int port = CLUSTER_PORTS_FIRST + (start + i) % span;
                try {
                    ServerSocket s = new ServerSocket(port, 1, java.net.InetAddress.getLoopbackAddress());
                    ports[held.size()] = port;
                    held.add(s);
                } catch (IOException inUse) {
                    // taken: try the next one
                }
            }
        } finally {
            for (ServerSocket s : held) {
                try {
                    s.close();
                } catch (IOException ignored) {
                    // closing a probe socket
                }
            }
        }
        if (held.size() < n) {
            throw new IllegalStateException("no " + n + " free ports in " + CLUSTER_PORTS_FIRST + "-" + CLUSTER_PORTS_LAST);
        }
        return ports;
    }

    // ---------------------------------------------------------------------------------------------------------
    // Nodes
    // ---------------------------------------------------------------------------------------------------------

    public Set<Integer> ids() {
        return new TreeSet<>(nodes.keySet());
    }

    public NodeProc node(int id) {
        NodeProc n = nodes.get(id);
        if (n == null) throw new IllegalArgumentException("no node " + id + " in " + this);
        return n;
    }

    public void kill(int id) {
        node(id).kill();
    }

    /**
     * Starts node {@code id} as a controller that joins the running quorum (KIP-853): {@code
     * controller.quorum.bootstrap.servers} names the voters' controller listeners and it has no {@code
     * controller.quorum.voters}, so it starts as an observer. Waits until every live node lists it as a broker.
     * The cluster's nodes need an explicit {@code cluster.id} override (the joining node has no voters to derive one).
     */
    public NodeProc addJoiningNode(int id) throws InterruptedException {
        if (nodes.containsKey(id)) throw new IllegalArgumentException("node " + id + " exists in " + this);
        int[] ports = freePorts(2);
        NodeProc n = new NodeProc(id, ports[0], ports[1], true);
        nodes.put(id, n);
        n.start();
        awaitBrokersListed(Set.of(id), Duration.ofSeconds(30));
        return n;
    }

    public void stop(int id) {
        node(id).stop();
    }

    /**
     * Starts node {@code id} again (same ports, same data dir), after stop() or kill(), and waits until every live
     * node lists it as a (registered, unfenced) broker.
     */
    public void startNode(int id) throws InterruptedException {
        node(id).start();
        awaitBrokersListed(Set.of(id), Duration.ofSeconds(30));
    }

    /** The broker ids in node {@code id}'s Metadata answer (unfenced brokers), or null if it does not answer. */
    public Set<Integer> brokersSeenBy(int id) {
        try {
            return metadata(id, List.of()).brokers().stream().map(b -> b.nodeId())
                .collect(Collectors.toCollection(TreeSet::new));
        } catch (IOException e) {
            return null;
        }
    }

    /** Waits until every live node's Metadata answer lists each of {@code ids} as a broker. */
    public void awaitBrokersListed(Set<Integer> ids, Duration timeout) throws InterruptedException {
        await(timeout, "every live node lists brokers " + ids, () -> {
            for (int n : liveIds()) {
                Set<Integer> seen = brokersSeenBy(n);
                if (seen == null || !seen.containsAll(ids)) return false;
            }
            return true;
        }, () -> liveIds().stream().map(n -> n + " sees " + brokersSeenBy(n)).collect(Collectors.toList())
            .toString());
    }

    public boolean isAlive(int id) {
        return node(id).isAlive();
    }

    public Set<Integer> liveIds() {
        return nodes.values().stream().filter(NodeProc::isAlive).map(n -> n.id)
            .collect(Collectors.toCollection(TreeSet::new));
    }

    /** Every node's client address, comma-separated (clients skip the dead ones). */
    public String bootstrap() {
        return nodes.values().stream().map(NodeProc::clientAddress).collect(Collectors.joining(","));
    }

    public String bootstrap(int id) {
        return node(id).clientAddress();
    }

    /** {@code host:port} of node {@code id}'s admin HTTP API (from its last READY line). */
    public String adminAddress(int id) {
        String a = node(id).readyFields.get("admin");
        if (a == null) throw new IllegalStateException("node " + id + " READY line has no admin=: "
            + node(id).readyFields);
        return a;
    }

    public Path dataDir(int id) {
        return node(id).dataDir;
    }

    public Path partitionDir(int id, String topic, int partition) {
        return dataDir(id).resolve(topic + "-" + partition);
    }

    /** A shared Admin client bootstrapped on every node. */
    public synchronized Admin admin() {
        if (admin == null) {
            Properties p = new Properties();
            p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
            p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) CALL.toMillis());
            p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) CALL.toMillis());
            admin = Admin.create(p);
        }
        return admin;
    }

    // ---------------------------------------------------------------------------------------------------------
    // Topics and partition state
    // ---------------------------------------------------------------------------------------------------------

    /** Creates a topic and waits until every partition has a leader and a full ISR (bounded). */
    public void createTopic(String topic, int partitions, int rf, Map<String, String> configs) throws Exception {
        admin().createTopics(List.of(new NewTopic(topic, partitions, (short) rf).configs(configs)))
            .all().get(CALL.toMillis(), TimeUnit.MILLISECONDS);
        for (int p = 0; p < partitions; p++) {
            int part = p;
            await(Duration.ofSeconds(30), "topic " + topic + "-" + p + " has a leader and a full ISR",
                () -> {
                    PartitionState s = partitionState(topic, part);
                    return s != null && s.leader >= 0 && s.isr.size() == rf;
                },
                () -> String.valueOf(partitionStateOrError(topic, part)));
            // Metadata comes from the quorum's image; the leader may apply that image a moment
            // later. Until it does it answers UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER, which a
            // producer with retries=0 would report as a failure: wait until the leader serves.
            TopicPartition tp = new TopicPartition(topic, part);
            await(Duration.ofSeconds(30), "the leader of " + tp + " serves it",
                () -> {
                    try {
                        admin().listOffsets(Map.of(tp, OffsetSpec.latest())).all()
                            .get(5, TimeUnit.SECONDS);
                        return true;
                    } catch (Exception e) {
                        return false;
                    }
                },
                () -> String.valueOf(partitionStateOrError(topic, part)));
        }
    }

    /** Leader, ISR and replicas of one partition as the Admin client sees them; null when unknown. */
    public TopicPartitionInfo describe(String topic, int partition) {
        try {
            TopicDescription d = admin().describeTopics(List.of(topic)).allTopicNames()
                .get(CALL.toMillis(), TimeUnit.MILLISECONDS).get(topic);
            if (d == null) return null;
            for (TopicPartitionInfo i : d.partitions()) if (i.partition() == partition) return i;
            return null;
        } catch (Exception e) {
            return null;
        }
    }

    /** The ISR (node ids, sorted) as Admin describeTopics reports it, or null. */
    public Set<Integer> isrViaAdmin(String topic, int partition) {
        TopicPartitionInfo i = describe(topic, partition);
        if (i == null) return null;
        return i.isr().stream().map(Node::id).collect(Collectors.toCollection(TreeSet::new));
    }

    /** Waits until Admin describeTopics reports exactly {@code expected} as the ISR. */
    public void awaitIsr(String topic, int partition, Set<Integer> expected, Duration timeout)
        throws InterruptedException {
        Set<Integer> want = new TreeSet<>(expected);
        await(timeout, "ISR of " + topic + "-" + partition + " == " + want,
            () -> want.equals(isrViaAdmin(topic, partition)),
            () -> "admin: " + describe(topic, partition) + "; metadata: " + partitionStateOrError(topic, partition));
    }

    /** The leader as Admin describeTopics reports it; -1 when none or unknown. */
    public int leaderOf(String topic, int partition) {
        TopicPartitionInfo i = describe(topic, partition);
        return i == null || i.leader() == null || i.leader().isEmpty() ? -1 : i.leader().id();
    }

    /** A partition's state from a raw Metadata answer: leader, leader epoch, replicas, ISR. */
    public static final class PartitionState {
        public final int answeredBy;
        public final int leader;
        public final int leaderEpoch;
        public final List<Integer> replicas;
        public final Set<Integer> isr;
        public final int controllerId;
        public final int errorCode;

        PartitionState(int answeredBy, int leader, int leaderEpoch, List<Integer> replicas, Set<Integer> isr,
                       int controllerId, int errorCode) {
            this.answeredBy = answeredBy;
            this.leader = leader;
            this.leaderEpoch = leaderEpoch;
            this.replicas = replicas;
            this.isr = isr;
            this.controllerId = controllerId;
            this.errorCode = errorCode;
        }

        @Override
        public String toString() {
            return "leader=" + leader + " epoch=" + leaderEpoch + " replicas=" + replicas + " isr=" + isr
                + " controller=" + controllerId + " error=" + errorCode + " (answered by node " + answeredBy + ")";
        }
    }

    /** A raw Metadata v12 exchange with one node. */
    public MetadataResponseData metadata(int id, List<String> topics) throws IOException {
        NodeProc n = node(id);
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", n.clientPort), (int) CALL.toMillis());
            s.setSoTimeout((int) CALL.toMillis());
            DataOutputStream out = new DataOutputStream(s.getOutputStream());
            DataInputStream in = new DataInputStream(s.getInputStream());
            short v = 12;
            MetadataRequest req = new MetadataRequest.Builder(topics, false).build(v);
            RequestHeader header = new RequestHeader(req.apiKey(), v, "brook-cluster-harness", 1);
            ByteBuffer buf = req.serializeWithHeader(header);
            byte[] bytes = new byte[buf.remaining()];
            buf.get(bytes);
            out.writeInt(bytes.length);
            out.write(bytes);
            out.flush();
            int len = in.readInt();
            byte[] resp = new byte[len];
            in.readFully(resp);
            AbstractResponse r = AbstractResponse.parseResponse(ByteBuffer.wrap(resp), header);
            return ((MetadataResponse) r).data();
        }
    }

    /** The partition's state from the first live node that answers; null if none does or the topic is unknown. */
    public PartitionState partitionState(String topic, int partition) {
        for (int id : liveIds()) {
            PartitionState s = partitionStateFrom(id, topic, partition);
            if (s != null) return s;
        }
        return null;
    }

    /** The partition's state as node {@code id} sees it; null on I/O error or unknown topic. */
    public PartitionState partitionStateFrom(int id, String topic, int partition) {
        try {
            MetadataResponseData d = metadata(id, List.of(topic));
            for (MetadataResponseData.MetadataResponseTopic t : d.topics()) {
                for (MetadataResponseData.MetadataResponsePartition p : t.partitions()) {
                    if (p.partitionIndex() == partition) {
                        return new PartitionState(id, p.leaderId(), p.leaderEpoch(), p.replicaNodes(),
                            new TreeSet<>(p.isrNodes()), d.controllerId(), p.errorCode());
                    }
                }
            }
            return null;
        } catch (IOException e) {
            return null;
        }
    }

    private String partitionStateOrError(String topic, int partition) {
        StringBuilder sb = new StringBuilder();
        for (int id : liveIds()) {
            sb.append("\n  node ").append(id).append(": ").append(partitionStateFrom(id, topic, partition));
        }
        return sb.toString();
    }

    /** The controller id in node {@code id}'s Metadata answer (the active controller when it is live), or -1. */
    public int controllerSeenBy(int id) {
        try {
            return metadata(id, List.of()).controllerId();
        } catch (IOException e) {
            return -1;
        }
    }

    /** Waits until a live node other than {@code exclude} leads the partition and returns its state. */
    public PartitionState awaitLeaderOtherThan(String topic, int partition, int exclude, Duration timeout)
        throws InterruptedException {
        PartitionState[] found = new PartitionState[1];
        await(timeout, "a leader of " + topic + "-" + partition + " other than node " + exclude, () -> {
            PartitionState s = partitionState(topic, partition);
            if (s != null && s.leader >= 0 && s.leader != exclude && isAlive(s.leader)) {
                found[0] = s;
                return true;
            }
            return false;
        }, () -> partitionStateOrError(topic, partition));
        return found[0];
    }

    // ---------------------------------------------------------------------------------------------------------
    // Faults (admin HTTP API) and dump-log
    // ---------------------------------------------------------------------------------------------------------

    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(CALL).build();

    /** POSTs a fault rule (JSON) to node {@code id}; returns "status body". */
    public String addFault(int id, String json) {
        try {
            HttpRequest req = HttpRequest.newBuilder(URI.create("http://" + adminAddress(id) + "/faults"))
                .timeout(CALL).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(json)).build();
            HttpResponse<String> r = HTTP.send(req, HttpResponse.BodyHandlers.ofString());
            node(id).appendLog("==== " + LocalDateTime.now() + " harness: POST /faults " + json + " -> "
                + r.statusCode() + " " + r.body() + "\n");
            if (r.statusCode() != 201) {
                throw new AssertionError("node " + id + ": POST /faults " + json + " answered " + r.statusCode()
                    + " " + r.body());
            }
            return r.body();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** GET /faults on node {@code id}: the rules as JSON. */
    public String listFaults(int id) {
        try {
            HttpRequest req = HttpRequest.newBuilder(URI.create("http://" + adminAddress(id) + "/faults"))
                .timeout(CALL).GET().build();
            return HTTP.send(req, HttpResponse.BodyHandlers.ofString()).body();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** The sum of the {@code fired} counts of every rule on node {@code id}. */
    public long firedTotal(int id) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("\"fired\"\\s*:\\s*(\\d+)")
            .matcher(listFaults(id));
        long sum = 0;
        while (m.find()) sum += Long.parseLong(m.group(1));
        return sum;
    }

    /** DELETE /faults on node {@code id} (if it runs). */
    public void clearFaults(int id) {
        if (!isAlive(id)) return;
        try {
            HttpRequest req = HttpRequest.newBuilder(URI.create("http://" + adminAddress(id) + "/faults"))
                .timeout(CALL).DELETE().build();
            HttpResponse<String> r = HTTP.send(req, HttpResponse.BodyHandlers.ofString());
            node(id).appendLog("==== " + LocalDateTime.now() + " harness: DELETE /faults -> " + r.statusCode()
                + " " + r.body() + "\n");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** One batch line of {@code brook dump-log}, as key → value. */
    public static final class DumpedBatch {
        public final Map<String, String> f;
        public final String line;

        DumpedBatch(String line) {
            this.line = line;
            this.f = new LinkedHashMap<>();
            String[] parts = line.trim().split("\\s+");
            for (int i = 0; i + 1 < parts.length; i++) {
                if (parts[i].endsWith(":")) f.put(parts[i].substring(0, parts[i].length() - 1), parts[i + 1]);
            }
        }

        public long baseOffset() {
            return Long.parseLong(f.get("baseOffset"));
        }

        public long lastOffset() {
            return Long.parseLong(f.get("lastOffset"));
        }

        public long maxTimestamp() {
            String v = f.containsKey("CreateTime") ? f.get("CreateTime") : f.get("LogAppendTime");
            return Long.parseLong(v);
        }

        /** What identifies the batch's content and place: offsets, producer, sequence, leader epoch, CRC. */
        public String identity() {
            return f.get("baseOffset") + ".." + f.get("lastOffset") + " pid=" + f.get("producerId") + " seq="
                + f.get("baseSequence") + " ple=" + f.get("partitionLeaderEpoch") + " crc=" + f.get("crc");
        }

        @Override
        public String toString() {
            return line;
        }
    }

    /** {@code brook dump-log} of node {@code id}'s copy of a partition (empty if it has none). */
    public List<DumpedBatch> dumpLog(int id, String topic, int partition) {
        Path d = partitionDir(id, topic, partition);
        if (!Files.isDirectory(d)) return List.of();
        String[] r = runBrook("dump-log", d.toString());
        if (!"0".equals(r[0])) throw new AssertionError("brook dump-log " + d + " exited " + r[0] + ": " + r[2]);
        List<DumpedBatch> out = new ArrayList<>();
        for (String line : r[1].split("\n")) {
            if (line.startsWith("baseOffset:")) out.add(new DumpedBatch(line));
        }
        return out;
    }

    /** Runs the brook binary with {@code args}; returns {exit code, stdout, stderr}. Bounded by 60 s. */
    public static String[] runBrook(String... args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(binary().toString());
        cmd.addAll(List.of(args));
        try {
            Process p = new ProcessBuilder(cmd).start();
            p.getOutputStream().close();
            CompletableFuture<String> out = CompletableFuture.supplyAsync(() -> readAll(p.getInputStream()));
            CompletableFuture<String> err = CompletableFuture.supplyAsync(() -> readAll(p.getErrorStream()));
            if (!p.waitFor(60, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new AssertionError("brook " + String.join(" ", args) + " did not finish within 60 s");
            }
            return new String[] {String.valueOf(p.exitValue()), out.get(10, TimeUnit.SECONDS),
                err.get(10, TimeUnit.SECONDS)};
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        } catch (ExecutionException | TimeoutException e) {
            throw new IllegalStateException(e);
        }
    }

    private static String readAll(InputStream in) {
        try {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "(" + e + ")";
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Waiting
    // ---------------------------------------------------------------------------------------------------------

    /** Polls {@code condition} every 50 ms until it holds; fails with {@code what} and {@code state} at the deadline. */
    public static void await(Duration timeout, String what, BooleanSupplier condition, Supplier<String> state)
        throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            if (condition.getAsBoolean()) return;
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + timeout.toMillis() + " ms waiting for: " + what
                    + "\nstate: " + state.get());
            }
            Thread.sleep(50);
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Logs
    // ---------------------------------------------------------------------------------------------------------

    /** The tail of every node's log, for failure messages. */
    public String logTails(int lines) {
        StringBuilder sb = new StringBuilder();
        for (NodeProc n : nodes.values()) sb.append(n.logTail(lines)).append('\n');
        return sb.toString();
    }

    /** Lines of node {@code id}'s log containing {@code needle} (case-insensitive). */
    public List<String> logLines(int id, String needle) {
        String lower = needle.toLowerCase();
        try {
            Path f = node(id).logFile;
            if (!Files.exists(f)) return List.of();
            return Files.readAllLines(f, StandardCharsets.ISO_8859_1).stream()
                .filter(l -> l.toLowerCase().contains(lower)).collect(Collectors.toList());
        } catch (IOException e) {
            return List.of("(cannot read log: " + e + ")");
        }
    }

    /** Descriptions of nodes that exited without being stopped or killed by the harness. */
    public List<String> crashReports() {
        List<String> out = new ArrayList<>();
        for (NodeProc n : nodes.values()) {
            String r = n.crashReport();
            if (r != null) out.add(r);
        }
        return out;
    }

    public Path dir() {
        return dir;
    }

    @Override
    public synchronized void close() {
        if (admin != null) {
            admin.close(Duration.ofSeconds(5));
            admin = null;
        }
        for (NodeProc n : nodes.values()) n.close();
    }

    @Override
    public String toString() {
        return "BrookCluster[" + name + " " + bootstrap() + " dir=" + dir + "]";
    }

    // ---------------------------------------------------------------------------------------------------------
    // One node process
    // ---------------------------------------------------------------------------------------------------------

    /** One {@code brook serve} process. */
    public final class NodeProc {
        public final int id;
        public final int clientPort;
        public final int controllerPort;
        final Path dataDir;
        final Path logFile;
        private Process process;
        private Thread pump;
        private int starts = 0;
        private volatile boolean expectDown = true;
        volatile Map<String, String> readyFields = Map.of();

        /** Started with bootstrap servers instead of voters ({@link #addJoiningNode}). */
        final boolean joining;

        NodeProc(int id, int clientPort, int controllerPort) {
            this(id, clientPort, controllerPort, false);
        }

        NodeProc(int id, int clientPort, int controllerPort, boolean joining) {
            this.joining = joining;
            this.id = id;
            this.clientPort = clientPort;
            this.controllerPort = controllerPort;
            this.dataDir = dir.resolve("node-" + id);
            this.logFile = dir.resolve("node-" + id + ".log");
        }

        public String clientAddress() {
            return "127.0.0.1:" + clientPort;
        }

        public long pid() {
            return process == null ? -1 : process.pid();
        }

        public Process process() {
            return process;
        }

        /** The properties this node is started with (a tool's {@code --command-config} can take them too). */
        public Map<String, String> properties() {
            String voters = nodes.values().stream().filter(n -> !n.joining)
                .map(n -> n.id + "@127.0.0.1:" + n.controllerPort).collect(Collectors.joining(","));
            Map<String, String> props = new LinkedHashMap<>();
            props.put("node.id", String.valueOf(id));
            props.put("listeners", "PLAINTEXT://127.0.0.1:" + clientPort + ",CONTROLLER://127.0.0.1:" + controllerPort);
            props.put("controller.listener.names", "CONTROLLER");
            props.put("process.roles", "broker,controller");
            if (joining) {
                props.put("controller.quorum.bootstrap.servers", nodes.values().stream().filter(n -> !n.joining)
                    .map(n -> "127.0.0.1:" + n.controllerPort).collect(Collectors.joining(",")));
            } else {
                props.put("controller.quorum.voters", voters);
            }
            props.put("log.dirs", dataDir.toString());
            props.put("admin.listener", "127.0.0.1:0");
            props.putAll(overrides);
            return props;
        }

        List<String> command() {
            Map<String, String> props = properties();
            List<String> cmd = new ArrayList<>();
            cmd.add(binary().toString());
            cmd.add("serve");
            props.forEach((k, v) -> {
                cmd.add("--override");
                cmd.add(k + "=" + v);
            });
            return cmd;
        }

        public synchronized boolean isAlive() {
            return process != null && process.isAlive();
        }

        synchronized void start() {
            if (isAlive()) throw new IllegalStateException("node " + id + " is already running");
            starts++;
            List<String> cmd = command();
            appendLog("==== " + LocalDateTime.now() + " harness: start #" + starts + " " + String.join(" ", cmd) + "\n");
            try {
                Files.createDirectories(dataDir);
                ProcessBuilder pb = new ProcessBuilder(cmd);
                pb.directory(dir.toFile());
                pb.redirectError(ProcessBuilder.Redirect.appendTo(logFile.toFile()));
                pb.redirectOutput(ProcessBuilder.Redirect.PIPE);
                process = pb.start();
                process.getOutputStream().close();
            } catch (IOException e) {
                throw new UncheckedIOException("cannot start node " + id, e);
            }
            expectDown = false;
            CompletableFuture<String> ready = new CompletableFuture<>();
            Process p = process;
            pump = new Thread(() -> pumpStdout(p, ready), "brook-node-" + id + "-" + starts);
            pump.setDaemon(true);
            pump.start();
            String line;
            try {
                line = ready.get(READY_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            } catch (Exception e) {
                expectDown = true;
                p.destroyForcibly();
                waitFor(p, 10_000);
                throw new IllegalStateException("node " + id + " printed no READY line (" + e + ")\n" + logTail(60));
            }
            readyFields = parseReady(line);
            appendLog("==== " + LocalDateTime.now() + " harness: node " + id + " ready: " + line + "\n");
        }

        private void pumpStdout(Process p, CompletableFuture<String> ready) {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
                 OutputStream out = Files.newOutputStream(logFile, StandardOpenOption.CREATE, StandardOpenOption.APPEND)) {
                String line;
                while ((line = r.readLine()) != null) {
                    out.write(("[stdout] " + line + "\n").getBytes(StandardCharsets.UTF_8));
                    out.flush();
                    if (!ready.isDone() && (line.equals("READY") || line.startsWith("READY "))) ready.complete(line);
                }
            } catch (IOException e) {
                ready.completeExceptionally(e);
                return;
            }
            ready.completeExceptionally(new IOException("stdout closed without a READY line"));
        }

        synchronized void appendLog(String s) {
            try {
                Files.writeString(logFile, s, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
                    StandardOpenOption.APPEND);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        private void joinPump() {
            if (pump == null) return;
            try {
                pump.join(5_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        /** SIGKILL; returns once the process is gone. */
        public synchronized void kill() {
            if (!isAlive()) return;
            expectDown = true;
            appendLog("==== " + LocalDateTime.now() + " harness: SIGKILL\n");
            process.destroyForcibly();
            waitFor(process, STOP_TIMEOUT_MS);
            if (process.isAlive()) throw new AssertionError("node " + id + " survived SIGKILL for 30 s");
            joinPump();
        }

        /** SIGTERM; waits (bounded) for a clean exit, else SIGKILL and fail. */
        public synchronized void stop() {
            if (!isAlive()) return;
            expectDown = true;
            appendLog("==== " + LocalDateTime.now() + " harness: SIGTERM\n");
            process.destroy();
            waitFor(process, STOP_TIMEOUT_MS);
            if (process.isAlive()) {
                process.destroyForcibly();
                waitFor(process, 10_000);
                joinPump();
                throw new AssertionError("node " + id + " did not exit within " + STOP_TIMEOUT_MS
                    + " ms of SIGTERM; killed it\n" + logTail(40));
            }
            joinPump();
            appendLog("==== " + LocalDateTime.now() + " harness: exited with code " + process.exitValue() + "\n");
        }

        /** SIGSTOP (freeze) or SIGCONT (thaw) the process. */
        public synchronized void signal(String sig) {
            if (!isAlive()) throw new IllegalStateException("node " + id + " is not running");
            appendLog("==== " + LocalDateTime.now() + " harness: SIG" + sig + "\n");
            try {
                Process k = new ProcessBuilder("kill", "-" + sig, String.valueOf(process.pid())).start();
                if (!k.waitFor(10, TimeUnit.SECONDS) || k.exitValue() != 0) {
                    throw new IllegalStateException("kill -" + sig + " " + process.pid() + " failed");
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }

        /** Waits (bounded) for the process to exit on its own (e.g. a crash rule); returns the exit code or null. */
        public Integer awaitExit(Duration timeout) throws InterruptedException {
            Process p;
            synchronized (this) {
                p = process;
            }
            if (p == null) return null;
            if (!p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) return null;
            synchronized (this) {
                expectDown = true;
                appendLog("==== " + LocalDateTime.now() + " harness: exited on its own with code " + p.exitValue()
                    + "\n");
            }
            joinPump();
            return p.exitValue();
        }

        String crashReport() {
            Process p = process;
            if (p == null || expectDown || p.isAlive()) return null;
            expectDown = true;
            return "node " + id + " exited on its own with code " + p.exitValue() + "\n" + logTail(40);
        }

        public String logTail(int n) {
            List<String> lines;
            try {
                lines = Files.exists(logFile) ? Files.readAllLines(logFile, StandardCharsets.ISO_8859_1) : List.of();
            } catch (IOException e) {
                return "(cannot read " + logFile + ": " + e + ")";
            }
            int from = Math.max(0, lines.size() - n);
            StringBuilder sb = new StringBuilder();
            for (int i = 0, found = 0; i < lines.size() && found < 5; i++) {
                if (lines.get(i).contains("panicked at")) {
                    found++;
                    sb.append("PANIC: ").append(lines.get(i)).append('\n');
                }
            }
            sb.append("---- node ").append(id).append(": last ").append(lines.size() - from).append(" of ")
                .append(lines.size()).append(" lines of ").append(logFile).append(" ----\n");
            for (String l : lines.subList(from, lines.size())) sb.append(l).append('\n');
            sb.append("---- end of node ").append(id).append(" log ----");
            return sb.toString();
        }

        synchronized void close() {
            if (isAlive()) {
                expectDown = true;
                appendLog("==== " + LocalDateTime.now() + " harness: close (SIGKILL)\n");
                process.destroyForcibly();
                waitFor(process, STOP_TIMEOUT_MS);
                joinPump();
            }
            BrookBroker.assertNoEncodeFailures(logFile, "node " + id);
        }
    }

    /** The broker binary: -Dbrook.bin, else $BROOK_BIN, else ../../target/debug/brook from the module dir. */
    public static Path binary() {
        String p = System.getProperty("brook.bin");
        if (p == null || p.isBlank()) p = System.getenv("BROOK_BIN");
        Path bin = (p != null && !p.isBlank()) ? Paths.get(p)
            : Paths.get(System.getProperty("brook.module.dir", ".")).resolve("../../target/debug/brook");
        bin = bin.toAbsolutePath().normalize();
        if (!Files.isExecutable(bin)) {
            throw new IllegalStateException("Brook binary not found or not executable: " + bin
                + " (build it with `cargo build --bin brook`, or set -Dbrook.bin / BROOK_BIN)");
        }
        return bin;
    }

    /** The key=value fields of a READY line. */
    static Map<String, String> parseReady(String line) {
        Map<String, String> m = new LinkedHashMap<>();
        String[] parts = line.trim().split("\\s+");
        for (int i = 1; i < parts.length; i++) {
            int eq = parts[i].indexOf('=');
            if (eq > 0) m.put(parts[i].substring(0, eq), parts[i].substring(eq + 1));
        }
        return m;
    }

    private static void waitFor(Process p, long ms) {
        try {
            p.waitFor(ms, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Prints, for a failed test, the tail of every node log of every cluster started in this JVM since the test
     * began (use with {@code @ExtendWith}).
     */
    public static final class LogOnFailure implements TestWatcher {
        @Override
        public void testFailed(ExtensionContext context, Throwable cause) {
            StringBuilder sb = new StringBuilder();
            sb.append("\n======== Brook cluster logs for failed test ").append(context.getDisplayName())
                .append(" ========\n");
            for (BrookCluster c : started()) {
                sb.append("== ").append(c).append('\n');
                for (String r : c.crashReports()) sb.append("CRASH: ").append(r).append('\n');
                sb.append(c.logTails(80));
            }
            System.out.println(sb);
        }
    }
}

package dev.brook.it;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A client of a Brook node's admin HTTP API (fault rules), plus the two other out-of-band views the fault tests
 * need: {@code brook fault ...} (the CLI) and {@code brook dump-log} (what is on disk).
 *
 * <p>The broker must be started with {@code admin.listener=127.0.0.1:0}; its READY line then carries
 * {@code admin=HOST:PORT}. JSON is written and read by hand (the suite has no JSON dependency): rules are flat
 * objects, so a rule's fields can be found with simple patterns.
 */
public final class FaultAdmin {
    /** Bound on one admin HTTP call or one CLI run. */
    public static final Duration CALL_TIMEOUT = Duration.ofSeconds(10);

    private static final Pattern ID = Pattern.compile("\"id\"\\s*:\\s*(\\d+)");
    private static final Pattern RULE = Pattern.compile("\\{[^{}]*\\}");
    private static final Pattern FIRED = Pattern.compile("\"fired\"\\s*:\\s*(\\d+)");
    private static final Pattern REMOVED = Pattern.compile("\"removed\"\\s*:\\s*(\\d+)");

    /** The environment variable {@code brook fault} takes HTTP Basic credentials from: {@code user:password}. */
    public static final String CREDENTIALS_ENV = "BROOK_HTTP_CREDENTIALS";

    private final String hostPort;
    /** {@code user:password} for a node with {@code admin.basic.auth.credentials.file}, or null. */
    private final String credentials;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(CALL_TIMEOUT).build();

    public FaultAdmin(String hostPort) {
        this(hostPort, null);
    }

    public FaultAdmin(String hostPort, String credentials) {
        this.hostPort = hostPort;
        this.credentials = credentials;
    }

    /** The same node, calling with {@code user:password} (HTTP Basic, and the CLI's {@link #CREDENTIALS_ENV}). */
    public FaultAdmin withCredentials(String userColonPassword) {
        return new FaultAdmin(hostPort, userColonPassword);
    }

    /** The admin API of a broker started with {@code admin.listener=127.0.0.1:0}. */
    public static FaultAdmin of(BrookBroker broker) {
        String admin = broker.readyFields().get("admin");
        if (admin == null) {
            throw new IllegalStateException("READY line of " + broker + " has no admin=HOST:PORT (start it with "
                + "admin.listener=127.0.0.1:0): " + broker.readyFields());
        }
        return new FaultAdmin(admin);
    }

    /** The extra broker property that turns the admin listener on, on an ephemeral loopback port. */
    public static Map<String, String> adminListenerProps() {
        return Map.of("admin.listener", "127.0.0.1:0");
    }

    public String hostPort() {
        return hostPort;
    }

    // ---------------------------------------------------------------------------------------------------------
    // Rules
    // ---------------------------------------------------------------------------------------------------------

    /** A rule specification, written as the JSON body of {@code POST /faults}. */
    public static final class Rule {
        private final Map<String, Object> fields = new LinkedHashMap<>();

        private Rule(String action) {
            fields.put("action", action);
        }

        public static Rule of(String action) {
            return new Rule(action);
        }

        public Rule api(String api) { return put("api", api); }
        public Rule topic(String topic) { return put("topic", topic); }
        public Rule partition(int p) { return put("partition", p); }
        public Rule clientId(String id) { return put("client_id", id); }
        public Rule times(long n) { return put("times", n); }
        public Rule probability(double p) { return put("probability", p); }
        public Rule seed(long s) { return put("seed", s); }
        public Rule delayMs(long ms) { return put("delay_ms", ms); }
        public Rule errorCode(int code) { return put("error_code", code); }
        public Rule when(String when) { return put("when", when); }

        public Rule put(String key, Object value) {
            fields.put(key, value);
            return this;
        }

        public String json() {
            StringBuilder sb = new StringBuilder("{");
            boolean first = true;
            for (Map.Entry<String, Object> e : fields.entrySet()) {
                if (!first) sb.append(',');
                first = false;
                sb.append(quote(e.getKey())).append(':');
                Object v = e.getValue();
                sb.append(v instanceof String ? quote((String) v) : String.valueOf(v));
            }
            return sb.append('}').toString();
        }

        @Override
        public String toString() {
            return json();
        }
    }

    static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                default:
                    if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
                    else sb.append(c);
            }
        }
        return sb.append('"').toString();
    }

    /** An HTTP answer: status and body. */
    public static final class Answer {
        public final int status;
        public final String body;

        Answer(int status, String body) {
            this.status = status;
            this.body = body;
        }

        @Override
        public String toString() {
            return status + " " + body;
        }
    }

    /** Installs a rule and returns its id; fails unless the broker answered 201 with an id. */
    public long add(Rule rule) {
        Answer a = post(rule.json(), "application/json");
        if (a.status != 201) throw new AssertionError("POST /faults " + rule + " answered " + a);
        Matcher m = ID.matcher(a.body);
        if (!m.find()) throw new AssertionError("POST /faults answered no id: " + a);
        return Long.parseLong(m.group(1));
    }

    /** {@code POST /faults} with any body and content type (null: no Content-Type header). */
    public Answer post(String body, String contentType) {
        HttpRequest.Builder b = request("/faults")
            .POST(HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8));
        if (contentType != null) b.header("Content-Type", contentType);
        return call(b.build());
    }

    /** {@code GET /faults}: the raw JSON. */
    public String listJson() {
        Answer a = call(request("/faults").GET().build());
        if (a.status != 200) throw new AssertionError("GET /faults answered " + a);
        return a.body;
    }

    /** The installed rules, each as its raw JSON object. */
    public List<String> rules() {
        return rulesIn(listJson());
    }

    static List<String> rulesIn(String json) {
        int open = json.indexOf('[');
        int close = json.lastIndexOf(']');
        if (open < 0 || close < open) throw new AssertionError("no rules array in " + json);
        List<String> out = new ArrayList<>();
        Matcher m = RULE.matcher(json.substring(open + 1, close));
        while (m.find()) out.add(m.group());
        return out;
    }

    /** How often rule {@code id} fired; fails if it is not installed. */
    public long fired(long id) {
        for (String r : rules()) {
            Matcher idm = ID.matcher(r);
            if (idm.find() && Long.parseLong(idm.group(1)) == id) {
                Matcher f = FIRED.matcher(r);
                if (!f.find()) throw new AssertionError("rule without fired: " + r);
                return Long.parseLong(f.group(1));
            }
        }
        throw new AssertionError("rule " + id + " is not installed: " + listJson());
    }

    /** Waits (bounded) until rule {@code id} has fired at least {@code n} times; returns the count. */
    public long awaitFired(long id, long n, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            long f = fired(id);
            if (f >= n) return f;
            if (System.nanoTime() > deadline) {
                throw new AssertionError("rule " + id + " fired " + f + " times, expected " + n + " within "
                    + timeout + ": " + listJson());
            }
            // The broker offers no notification of a rule firing: poll, within the deadline.
            Thread.sleep(20);
        }
    }

    /** {@code DELETE /faults}: removes every rule, returns how many there were. */
    public int clear() {
        Answer a = delete("/faults");
        if (a.status != 200) throw new AssertionError("DELETE /faults answered " + a);
        return removed(a);
    }

    /** {@code DELETE /faults/{id}} as an answer (200, 404 for no such rule, 400 for a bad id). */
    public Answer delete(String path) {
        return call(request(path).DELETE().build());
    }

    private static int removed(Answer a) {
        Matcher m = REMOVED.matcher(a.body);
        if (!m.find()) throw new AssertionError("no removed count in " + a);
        return Integer.parseInt(m.group(1));
    }

    /** A request for {@code path}, with the Basic credentials when there are any. */
    private HttpRequest.Builder request(String path) {
        HttpRequest.Builder b = HttpRequest.newBuilder(uri(path)).timeout(CALL_TIMEOUT);
        if (credentials != null) {
            String encoded = Base64.getEncoder().encodeToString(credentials.getBytes(StandardCharsets.UTF_8));
            b.header("Authorization", "Basic " + encoded);
        }
        return b;
    }

    private URI uri(String path) {
        return URI.create("http://" + hostPort + path);
    }

    private Answer call(HttpRequest req) {
        try {
            HttpResponse<String> r = http.send(req, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
            return new Answer(r.statusCode(), r.body());
        } catch (IOException e) {
            throw new UncheckedIOException(req.method() + " " + req.uri(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted during " + req.method() + " " + req.uri(), e);
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // The brook binary: `brook fault ...` and `brook dump-log`
    // ---------------------------------------------------------------------------------------------------------

    /** The result of one run of the brook binary. */
    public static final class Run {
        public final int exit;
        public final String stdout;
        public final String stderr;

        Run(int exit, String stdout, String stderr) {
            this.exit = exit;
            this.stdout = stdout;
            this.stderr = stderr;
        }

        @Override
        public String toString() {
            return "exit " + exit + "\n--- stdout\n" + stdout + "--- stderr\n" + stderr;
        }
    }

    /** Runs {@code brook ARGS...} (bounded by {@link #CALL_TIMEOUT}). */
    public static Run brook(String... args) {
        return brook(Map.of(), args);
    }

    /** Runs {@code brook ARGS...} with {@code env} added to its environment. */
    public static Run brook(Map<String, String> env, String... args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(BrookBroker.binary().toString());
        cmd.addAll(List.of(args));
        try {
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectInput(ProcessBuilder.Redirect.PIPE);
            pb.environment().putAll(env);
            Process p = pb.start();
            p.getOutputStream().close();
            // Read both streams on their own threads so a full pipe cannot block the child.
            StreamReader out = new StreamReader(p.getInputStream());
            StreamReader err = new StreamReader(p.getErrorStream());
            out.start();
            err.start();
            if (!p.waitFor(CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)) {
                p.destroyForcibly();
                throw new AssertionError("`" + String.join(" ", cmd) + "` did not finish within " + CALL_TIMEOUT);
            }
            out.join(CALL_TIMEOUT.toMillis());
            err.join(CALL_TIMEOUT.toMillis());
            return new Run(p.exitValue(), out.text(), err.text());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot run " + cmd, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted running " + cmd, e);
        }
    }

    private static final class StreamReader extends Thread {
        private final InputStream in;
        private final ByteArrayOutputStream buf = new ByteArrayOutputStream();

        StreamReader(InputStream in) {
            this.in = in;
            setDaemon(true);
        }

        @Override
        public void run() {
            try (in) {
                in.transferTo(buf);
            } catch (IOException ignored) {
                // the process is gone; keep what was read
            }
        }

        /** Call after join(): the text read. */
        String text() {
            return buf.toString(StandardCharsets.UTF_8);
        }
    }

    /** {@code brook fault ARGS... --admin HOST:PORT} against this node. */
    public Run cli(String subcommand, String... args) {
        List<String> all = new ArrayList<>();
        all.add("fault");
        all.add(subcommand);
        all.add("--admin");
        all.add(hostPort);
        all.addAll(List.of(args));
        Map<String, String> env = credentials == null ? Map.of() : Map.of(CREDENTIALS_ENV, credentials);
        return brook(env, all.toArray(new String[0]));
    }

    /** One line of {@code brook dump-log}: a batch as stored. */
    public static final class Batch {
        public final long baseOffset;
        public final long lastOffset;
        public final int count;
        public final int baseSequence;
        public final int lastSequence;
        public final long producerId;
        public final short producerEpoch;
        public final boolean valid;
        public final String line;

        Batch(String line) {
            this.line = line;
            Map<String, String> f = new LinkedHashMap<>();
            // "key: value key: value ..." where keys end with ':' and values have no spaces
            String[] parts = line.trim().split("\\s+");
            for (int i = 0; i + 1 < parts.length; i++) {
                if (parts[i].endsWith(":")) f.put(parts[i].substring(0, parts[i].length() - 1), parts[i + 1]);
            }
            try {
                baseOffset = Long.parseLong(f.get("baseOffset"));
                lastOffset = Long.parseLong(f.get("lastOffset"));
                count = Integer.parseInt(f.get("count"));
                baseSequence = Integer.parseInt(f.get("baseSequence"));
                lastSequence = Integer.parseInt(f.get("lastSequence"));
                producerId = Long.parseLong(f.get("producerId"));
                producerEpoch = Short.parseShort(f.get("producerEpoch"));
                valid = Boolean.parseBoolean(f.get("isvalid"));
            } catch (RuntimeException e) {
                throw new AssertionError("cannot parse dump-log line: " + line, e);
            }
        }

        @Override
        public String toString() {
            return line;
        }
    }

    /** The partition directory of {@code topic-partition} under a broker started by the harness. */
    public static Path partitionDir(BrookBroker broker, String topic, int partition) {
        return broker.dir().resolve("data").resolve(topic + "-" + partition);
    }

    /** The batches {@code brook dump-log} prints for one partition directory (fails on anything unexpected). */
    public static List<Batch> dumpLog(BrookBroker broker, String topic, int partition) {
        Path dir = partitionDir(broker, topic, partition);
        Run r = brook("dump-log", dir.toString());
        if (r.exit != 0) throw new AssertionError("brook dump-log " + dir + " failed: " + r);
        List<Batch> out = new ArrayList<>();
        for (String line : r.stdout.split("\n")) {
            if (line.startsWith("baseOffset:")) {
                out.add(new Batch(line));
            } else if (!line.isBlank() && !line.startsWith("Dumping ")) {
                throw new AssertionError("unexpected dump-log line (torn or corrupt log?): " + line + "\n" + r);
            }
        }
        return out;
    }
}

package dev.brook.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.lang.reflect.Method;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * One lab of {@code docs/LABS.md}: the short report a lab test prints, checked against the report the document
 * quotes for it. A lab test is a {@code @Test} tagged {@code @Tag("lab")}; the document names it in a
 * {@code scripts/lab Class#method} line followed by a {@code text} block, and the test fails when its report and
 * that block differ, so the document cannot drift from what Brook does. {@code scripts/check_labs.py} checks the
 * other direction: every lab the document names is a tagged test, and every tagged test is in the document.
 *
 * <p>Reports hold only what is the same on every run: random topic names are written {@code $TOPIC}, producer ids
 * {@code P1}, {@code P2}... in order of appearance, node ids as the roles they play.
 */
final class Lab {
    static final String TAG = "lab";
    private static final Path DOC = Paths.get(System.getProperty("brook.module.dir", "."), "..", "..", "docs",
        "LABS.md");
    private static final Pattern PRODUCER_ID = Pattern.compile("producerId: (\\d+)");
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    private final String id;
    private final List<String> lines = new ArrayList<>();
    private final Map<String, String> names = new LinkedHashMap<>();
    private final Map<Long, String> producerIds = new LinkedHashMap<>();

    private Lab(String id) {
        this.id = id;
    }

    /** The lab of the calling {@code @Tag("lab")} test method (found on the stack, so the name is written once). */
    static Lab start() {
        Optional<String> found = StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE).walk(frames ->
            frames.filter(f -> isLabTest(f.getDeclaringClass(), f.getMethodName()))
                .map(f -> f.getDeclaringClass().getSimpleName() + "#" + f.getMethodName())
                .findFirst());
        return new Lab(found.orElseThrow(() -> new AssertionError("Lab.start() outside a @Tag(\"lab\") @Test")));
    }

    private static boolean isLabTest(Class<?> c, String method) {
        for (Method m : c.getDeclaredMethods()) {
            if (!m.getName().equals(method) || !m.isAnnotationPresent(Test.class)) continue;
            for (Tag t : m.getAnnotationsByType(Tag.class)) {
                if (t.value().equals(TAG)) return true;
            }
        }
        return false;
    }

    /** Writes {@code actual} as {@code shown} in every later line (a random topic name as {@code $TOPIC}). */
    Lab name(String actual, String shown) {
        names.put(actual, shown);
        return this;
    }

    /** Adds one report line. */
    Lab say(String line) {
        String l = line;
        for (Map.Entry<String, String> e : names.entrySet()) l = l.replace(e.getKey(), e.getValue());
        lines.add(l);
        return this;
    }

    /**
     * The head of a {@code brook dump-log} line, as the reader's own run prints it: offsets, count, sequences, producer
     * id (as P1, P2...) and epoch, leader epoch, transactional and control flags; the position, timestamps and CRC
     * that follow differ from run to run.
     */
    Lab dumpLogLine(FaultAdmin.Batch b) {
        int cut = b.line.indexOf(" position:");
        String head = cut < 0 ? b.line : b.line.substring(0, cut);
        Matcher m = PRODUCER_ID.matcher(head);
        StringBuilder out = new StringBuilder();
        while (m.find()) {
            long pid = Long.parseLong(m.group(1));
            String shown = producerIds.computeIfAbsent(pid, p -> "P" + (producerIds.size() + 1));
            m.appendReplacement(out, "producerId: " + shown);
        }
        m.appendTail(out);
        return say("  " + out);
    }

    /** The name a producer id has in this report (P1, P2... in order of first appearance). */
    String producerId(long pid) {
        return producerIds.computeIfAbsent(pid, p -> "P" + (producerIds.size() + 1));
    }

    /** Prints the report and fails unless it is the block {@code docs/LABS.md} quotes for this lab. */
    void finish() {
        StringBuilder printed = new StringBuilder("[lab] " + id + "\n");
        for (String l : lines) printed.append("[lab]   ").append(l).append('\n');
        System.out.print(printed);
        assertEquals(String.join("\n", documented()), String.join("\n", lines),
            "the report of " + id + " differs from the one docs/LABS.md quotes after `scripts/lab " + id + "`");
    }

    /** The lines of the first {@code text} block after the {@code scripts/lab <id>} line of the document. */
    private List<String> documented() {
        List<String> doc;
        try {
            doc = Files.readAllLines(DOC, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new AssertionError("cannot read " + DOC.toAbsolutePath().normalize(), e);
        }
        String command = "scripts/lab " + id;
        int i = 0;
        while (i < doc.size() && !doc.get(i).strip().equals(command)) i++;
        if (i == doc.size()) throw new AssertionError(DOC + " has no line `" + command + "`");
        for (i++; i < doc.size() && !doc.get(i).strip().equals("```text"); i++) {
            if (doc.get(i).strip().startsWith("scripts/lab ")) {
                throw new AssertionError(DOC + ": no ```text block between `" + command + "` and the next lab");
            }
        }
        List<String> block = new ArrayList<>();
        for (i++; i < doc.size() && !doc.get(i).strip().equals("```"); i++) block.add(doc.get(i));
        return block;
    }

    /**
     * {@code GET /v1/producers?topic=T&partition=P} as report lines: per producer its epoch, last sequence and the
     * batches the broker keeps for duplicate detection.
     */
    Lab producersView(String adminHostPort, String topic, int partition) {
        String path = "/v1/producers?topic=" + topic + "&partition=" + partition;
        say("$ curl -s http://$ADMIN" + path);
        JsonNode root = json(get(adminHostPort, path));
        for (JsonNode p : root.get("producers")) {
            StringBuilder b = new StringBuilder();
            for (JsonNode x : p.get("batches")) {
                if (b.length() > 0) b.append(", ");
                b.append("sequences ").append(x.get("first_sequence").asLong()).append("..")
                    .append(x.get("last_sequence").asLong()).append(" at offsets ")
                    .append(x.get("first_offset").asLong()).append("..").append(x.get("last_offset").asLong());
            }
            say("  producer " + producerId(p.get("producer_id").asLong()) + " epoch " + p.get("producer_epoch").asInt()
                + ": last_sequence " + p.get("last_sequence").asLong() + ", batches [" + b + "]");
        }
        return this;
    }

    /** One partition's entry of {@code GET /v1/partitions?topic=T} on a node. */
    static JsonNode partitionView(String adminHostPort, String topic, int partition) {
        for (JsonNode p : json(get(adminHostPort, "/v1/partitions?topic=" + topic)).get("partitions")) {
            if (p.get("partition").asInt() == partition) return p;
        }
        throw new AssertionError("node at " + adminHostPort + " does not list " + topic + "-" + partition);
    }

    static JsonNode json(String text) {
        try {
            return new ObjectMapper().readTree(text);
        } catch (IOException e) {
            throw new AssertionError("not JSON: " + text, e);
        }
    }

    /** {@code GET http://<admin><path>} on a node's admin listener (the state views of docs/STATE-VIEWS.md). */
    static String get(String adminHostPort, String path) {
        HttpRequest req = HttpRequest.newBuilder(URI.create("http://" + adminHostPort + path))
            .timeout(Duration.ofSeconds(10)).GET().build();
        try {
            HttpResponse<String> r = HTTP.send(req, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
            assertEquals(200, r.statusCode(), "GET " + path + ": " + r.body());
            return r.body();
        } catch (IOException e) {
            throw new AssertionError("GET " + path + " on " + adminHostPort, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted", e);
        }
    }
}

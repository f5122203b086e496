package dev.brook.it;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * Runs one of Kafka 4.4's command-line tools (a main class of {@code kafka-tools}, as its
 * {@code kafka-*.sh} script runs it) in a child JVM on the test classpath, against a bootstrap
 * address. One runner for every tool test, so each test states only the tool's arguments and
 * what it must print. The class is named relative to {@code org.apache.kafka.tools}
 * ({@code "GetOffsetShell"}, {@code "consumer.ConsoleConsumer"}); a null bootstrap runs a tool
 * that takes none ({@code DumpLogSegments}); the tool's standard input gets the bytes given (none:
 * closed at once, so a tool reading it sees end of input).
 */
final class KafkaTool {
    /** How long one tool run may take before the test fails. */
    static final long TOOL_RUN_MS_MAX = 60_000;

    /**
     * Class data sharing for tool JVMs (as {@code scripts/kafka-as-brook.sh} does for Kafka nodes):
     * the first tool run writes the classes it loaded to an archive, later runs map it instead of
     * loading them again. Keyed by the JDK and the classpath, which an archive must match (a JVM
     * given a mismatched one runs without it). Each run that writes dumps to a file of its own,
     * moved into place after it exits, so no run reads a half-written archive.
     */
    private static final Path CDS_ARCHIVE = Paths.get("target", "kafka-tool-cds",
        Integer.toHexString(Objects.hash(System.getProperty("java.home"), classpath())) + ".jsa");

    private KafkaTool() {}

    /**
     * The test classpath's jars: Kafka's tools need no test classes, and a CDS archive cannot be
     * made with a non-empty directory on the classpath.
     */
    private static String classpath() {
        // Surefire's forked JVM names its whole test classpath here (java.class.path may be a manifest-only jar).
        String all = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        return Arrays.stream(all.split(File.pathSeparator))
            .filter(e -> e.endsWith(".jar"))
            .collect(Collectors.joining(File.pathSeparator));
    }

    /** simplelogger.properties, which the tools no longer find on their classpath, as system properties. */
    private static List<String> loggingProperties() throws IOException {
        Properties props = new Properties();
        try (InputStream in = KafkaTool.class.getResourceAsStream("/simplelogger.properties")) {
            if (in != null) props.load(in);
        }
        List<String> flags = new ArrayList<>();
        for (String k : props.stringPropertyNames()) flags.add("-D" + k + "=" + props.getProperty(k));
        return flags;
    }

    record Run(int exit, String out, String err) {}

    /** Runs {@code mainClass --bootstrap-server bootstrap args...}; asserts exit status 0. */
    static Run tool(String mainClass, String bootstrap, String... args) throws Exception {
        return tool(mainClass, bootstrap, new byte[0], args);
    }

    /** As {@link #tool(String, String, String...)}, with {@code stdin} written to the tool's standard input. */
    static Run tool(String mainClass, String bootstrap, byte[] stdin, String... args) throws Exception {
        Run r = run(mainClass, bootstrap, stdin, args);
        assertEquals(0, r.exit(), mainClass + " " + String.join(" ", args) + "\nstdout:\n" + r.out()
            + "\nstderr:\n" + r.err());
        return r;
    }

    /**
     * Runs {@code org.apache.kafka.tools.<mainClass> --bootstrap-server bootstrap args...},
     * bounded by {@link #TOOL_RUN_MS_MAX}.
     */
    static Run run(String mainClass, String bootstrap, String... args) throws Exception {
        return run(mainClass, bootstrap, new byte[0], args);
    }

    /**
     * Runs {@code org.apache.kafka.tools.<mainClass> [--bootstrap-server bootstrap] args...} with {@code stdin} on
     * its standard input, then end of input; bounded by {@link #TOOL_RUN_MS_MAX}.
     */
    static Run run(String mainClass, String bootstrap, byte[] stdin, String... args) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        // A tool run lives a second or two: the quick JIT tier and the serial collector start it
        // sooner (about 0.3 to 1 s of each run here) and change nothing it does or prints.
        cmd.add("-XX:TieredStopAtLevel=1");
        cmd.add("-XX:+UseSerialGC");
        Path cdsDump = null;
        if (Files.exists(CDS_ARCHIVE)) {
            cmd.add("-XX:SharedArchiveFile=" + CDS_ARCHIVE);
        } else {
            Files.createDirectories(CDS_ARCHIVE.getParent());
            cdsDump = Paths.get(CDS_ARCHIVE + "." + ProcessHandle.current().pid() + "." + System.nanoTime());
            cmd.add("-XX:ArchiveClassesAtExit=" + cdsDump);
        }
        // The JVM's own log lines (CDS warnings among them) would land in the tool's output.
        cmd.add("-Xlog:disable");
        cmd.addAll(loggingProperties());
        cmd.add("-cp");
        cmd.add(classpath());
        cmd.add("org.apache.kafka.tools." + mainClass);
        if (bootstrap != null) {
            cmd.add("--bootstrap-server");
            cmd.add(bootstrap);
        }
        cmd.addAll(List.of(args));
        String what = mainClass + (bootstrap == null ? "" : " --bootstrap-server " + bootstrap) + " "
            + String.join(" ", args);
        Process p = new ProcessBuilder(cmd).start();
        CompletableFuture<String> out = drain(p.getInputStream());
        CompletableFuture<String> err = drain(p.getErrorStream());
        // Both outputs are drained already, so the tool cannot block on them while this writes.
        try (OutputStream in = p.getOutputStream()) {
            in.write(stdin);
        } catch (IOException e) {
            // The tool exited without reading all of it: its exit status and output tell why.
        }
        if (!p.waitFor(TOOL_RUN_MS_MAX, TimeUnit.MILLISECONDS)) {
            p.destroyForcibly();
            throw new AssertionError(what + " did not finish in " + TOOL_RUN_MS_MAX + " ms");
        }
        Run r = new Run(p.exitValue(), out.get(10, TimeUnit.SECONDS), err.get(10, TimeUnit.SECONDS));
        if (cdsDump != null && Files.exists(cdsDump)) {
            Files.move(cdsDump, CDS_ARCHIVE, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        }
        System.out.println(what + " printed:\n" + r.out() + r.err());
        return r;
    }

    private static CompletableFuture<String> drain(InputStream in) {
        return CompletableFuture.supplyAsync(() -> {
            try (in) {
                ByteArrayOutputStream buf = new ByteArrayOutputStream();
                in.transferTo(buf);
                return buf.toString(UTF_8);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
    }
}

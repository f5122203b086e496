package dev.brook.junit;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * Which {@code brook} binary runs: {@code -Dbrook.bin}, else {@code $BROOK_BIN}, else the one this jar carries for
 * the machine's platform ({@code dev/brook/bin/<os>-<arch>/brook}), extracted once per content into the temp
 * directory. Every choice is checked before it is run: present, executable, and built for this machine.
 */
final class BrookBinary {
    private static final String RESOURCE_ROOT = "dev/brook/bin/";

    private BrookBinary() {}

    /** {@code linux-x86_64}, {@code linux-aarch64}, ... as the packaging names the directories. */
    static String platform() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        String o = os.contains("linux") ? "linux" : os.contains("mac") ? "macos" : os.replace(' ', '_');
        String a = switch (arch) {
            case "amd64", "x86_64" -> "x86_64";
            case "aarch64", "arm64" -> "aarch64";
            default -> arch;
        };
        return o + "-" + a;
    }

    static Path resolve() {
        String p = System.getProperty("brook.bin");
        String from = "-Dbrook.bin";
        if (p == null || p.isBlank()) {
            p = System.getenv("BROOK_BIN");
            from = "$BROOK_BIN";
        }
        Path bin = (p != null && !p.isBlank()) ? Paths.get(p).toAbsolutePath() : extract();
        if (p == null || p.isBlank()) from = "the brook-junit jar";
        check(bin, from);
        return bin;
    }

    private static Path extract() {
        String dir = RESOURCE_ROOT + platform() + "/";
        ClassLoader cl = BrookBinary.class.getClassLoader();
        String sum;
        try (InputStream s = cl.getResourceAsStream(dir + "brook.sha256")) {
            if (s == null) {
                throw new BrookException("the brook-junit jar carries no brook binary for " + platform()
                    + " (no " + dir + "brook); set BROOK_BIN or -Dbrook.bin to a brook built for this machine");
            }
            sum = new String(s.readAllBytes(), StandardCharsets.US_ASCII).trim().split("\\s+")[0];
        } catch (IOException e) {
            throw new BrookException("cannot read " + dir + "brook.sha256 from the jar: " + e, e);
        }
        Path target = Paths.get(System.getProperty("java.io.tmpdir"), "brook-junit-" + sum, "brook");
        if (Files.isExecutable(target)) return target;
        try (InputStream in = cl.getResourceAsStream(dir + "brook")) {
            if (in == null) throw new BrookException("the brook-junit jar has " + dir + "brook.sha256 but no brook");
            Files.createDirectories(target.getParent());
            // Another JVM may extract the same file at once: each writes its own and moves it in place.
            Path tmp = Files.createTempFile(target.getParent(), "brook", ".part");
            Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
            if (!tmp.toFile().setExecutable(true)) throw new IOException("cannot make " + tmp + " executable");
            Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            return target;
        } catch (IOException e) {
            throw new BrookException("cannot extract the brook binary to " + target + ": " + e, e);
        }
    }

    /** Present, executable and (on Linux) an ELF file for this machine's architecture. */
    static void check(Path bin, String from) {
        if (!Files.exists(bin)) throw new BrookException("brook binary not found: " + bin + " (from " + from + ")");
        if (!Files.isExecutable(bin)) {
            throw new BrookException("brook binary is not executable: " + bin + " (from " + from + ")");
        }
        if (!platform().startsWith("linux-")) return;
        byte[] head = new byte[20];
        try (InputStream in = Files.newInputStream(bin)) {
            if (in.readNBytes(head, 0, head.length) < head.length || head[0] != 0x7f || head[1] != 'E'
                || head[2] != 'L' || head[3] != 'F') {
                throw new BrookException("brook binary is not a Linux executable (no ELF header): " + bin
                    + " (from " + from + ")");
            }
        } catch (IOException e) {
            throw new BrookException("cannot read the brook binary " + bin + ": " + e, e);
        }
        int machine = (head[18] & 0xff) | (head[19] & 0xff) << 8;
        String built = switch (machine) {
            case 0x3e -> "x86_64";
            case 0xb7 -> "aarch64";
            default -> "ELF machine " + machine;
        };
        if (!platform().equals("linux-" + built)) {
            throw new BrookException("brook binary " + bin + " (from " + from + ") is built for " + built
                + ", this machine is " + platform());
        }
    }
}

package dev.brook.it;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A CA and PKCS12 key stores made with the JDK's keytool, as an operator makes them for Kafka: a broker certificate
 * naming 127.0.0.1 and localhost, one naming only wrong.example, and a client certificate {@code CN=client,O=Brook};
 * the CA as a PEM file and in a PKCS12 trust store. Every store has the password {@link #PASSWORD}.
 */
final class Pki {
    static final String PASSWORD = "brook-secret";

    final Path dir;

    private Pki(Path dir) {
        this.dir = dir;
    }

    Path caPem() { return dir.resolve("ca.pem"); }
    Path truststore() { return dir.resolve("truststore.p12"); }
    Path keystore(String name) { return dir.resolve(name + ".p12"); }

    private static Pki shared;

    /**
     * One PKI for every class of the test JVM (surefire reuses one fork): keytool runs a JVM per step, some 15 s
     * for the whole set on a busy 2-core machine, so the classes that only need some CA share it.
     */
    static synchronized Pki shared() throws Exception {
        if (shared == null) shared = create(Files.createTempDirectory("brook-pki-"));
        return shared;
    }

    static Pki create(Path dir) throws Exception {
        Files.createDirectories(dir);
        Pki pki = new Pki(dir);
        Path ca = dir.resolve("ca.p12");
        keytool("-genkeypair", "-alias", "ca", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=Brook test CA",
            "-ext", "bc:c", "-validity", "30", "-keystore", ca.toString(), "-storetype", "PKCS12");
        keytool("-exportcert", "-rfc", "-alias", "ca", "-keystore", ca.toString(), "-file", pki.caPem().toString());
        keytool("-importcert", "-noprompt", "-alias", "ca", "-file", pki.caPem().toString(),
            "-keystore", pki.truststore().toString(), "-storetype", "PKCS12");
        pki.issue(ca, "broker", "CN=broker,O=Brook", "san=ip:127.0.0.1,dns:localhost");
        pki.issue(ca, "wrong-host", "CN=wrong,O=Brook", "san=dns:wrong.example");
        pki.issue(ca, "client", "CN=client,O=Brook", null);
        return pki;
    }

    /** A key pair in {@code name}.p12 whose certificate the CA signed, chain included. */
    private void issue(Path ca, String name, String dname, String san) throws Exception {
        Path store = keystore(name);
        Path csr = dir.resolve(name + ".csr");
        Path signed = dir.resolve(name + ".signed.pem");
        keytool("-genkeypair", "-alias", name, "-keyalg", "EC", "-groupname", "secp256r1", "-dname", dname,
            "-validity", "30", "-keystore", store.toString(), "-storetype", "PKCS12");
        keytool("-certreq", "-alias", name, "-keystore", store.toString(), "-file", csr.toString());
        List<String> sign = new ArrayList<>(List.of("-gencert", "-rfc", "-alias", "ca", "-keystore", ca.toString(),
            "-infile", csr.toString(), "-outfile", signed.toString(), "-validity", "30"));
        if (san != null) sign.addAll(List.of("-ext", san));
        keytool(sign.toArray(String[]::new));
        Files.writeString(signed, Files.readString(signed) + Files.readString(caPem()), StandardCharsets.US_ASCII);
        keytool("-importcert", "-noprompt", "-alias", "ca", "-file", caPem().toString(), "-keystore", store.toString());
        keytool("-importcert", "-noprompt", "-alias", name, "-file", signed.toString(), "-keystore", store.toString());
    }

    private static void keytool(String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Paths.get(System.getProperty("java.home"), "bin", "keytool").toString());
        cmd.addAll(List.of(args));
        cmd.addAll(List.of("-storepass", PASSWORD, "-keypass", PASSWORD));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IllegalStateException("keytool " + String.join(" ", args) + " failed: " + out);
        }
    }
}

package dev.brook.junit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Each bad input gives one BrookException naming its cause, promptly, and leaves no process behind. */
class BadInputTest {
    @TempDir
    Path tmp;

    @AfterEach
    void noChildLeft() throws InterruptedException {
        // The supervisor and its nodes are this JVM's descendants while they live.
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (ProcessHandle.current().descendants().anyMatch(ProcessHandle::isAlive) && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(List.of(), ProcessHandle.current().descendants().filter(ProcessHandle::isAlive)
            .map(p -> p.info().commandLine().orElse("?")).toList());
    }

    @Test
    void unknownKafkaConfigKeyIsNamed() {
        BrookException e = assertThrows(BrookException.class,
            () -> Brook.cluster().withConfig("no.such.broker.key", "1").start());
        assertTrue(e.getMessage().contains("unknown config key \"no.such.broker.key\""), e.getMessage());
    }

    @Test
    void portInUseIsNamed() throws IOException {
        try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            int port = taken.getLocalPort();
            BrookException e = assertThrows(BrookException.class, () -> Brook.cluster().basePort(port).start());
            assertTrue(e.getMessage().contains("port 127.0.0.1:" + port + " is in use"), e.getMessage());
        }
    }

    @Test
    void missingBinaryIsNamed() {
        Path missing = tmp.resolve("brook");
        BrookException e = assertThrows(BrookException.class, () -> Brook.cluster().binary(missing).start());
        assertTrue(e.getMessage().contains("brook binary not found: " + missing), e.getMessage());
    }

    @Test
    void wrongArchitectureIsNamed() throws IOException {
        // An ELF header for aarch64 (e_machine 0xB7): this kit's tests run on x86_64.
        byte[] elf = new byte[64];
        elf[0] = 0x7f;
        elf[1] = 'E';
        elf[2] = 'L';
        elf[3] = 'F';
        elf[18] = (byte) 0xb7;
        Path bin = Files.write(tmp.resolve("brook"), elf);
        Files.setPosixFilePermissions(bin, PosixFilePermissions.fromString("rwxr-xr-x"));
        BrookException e = assertThrows(BrookException.class, () -> Brook.cluster().binary(bin).start());
        assertTrue(e.getMessage().contains("is built for aarch64, this machine is linux-x86_64"), e.getMessage());
    }

    @Test
    void refusedTopicIsNamed() {
        // One node cannot hold two replicas.
        BrookException e = assertThrows(BrookException.class, () -> Brook.cluster().topic("orders", 1, 2).start());
        assertTrue(e.getMessage().contains("creating topic orders: InvalidReplicationFactor"), e.getMessage());
        e = assertThrows(BrookException.class, () -> Brook.cluster().topic("orders:0").start());
        assertTrue(e.getMessage().contains("partitions must be a number of at least 1"), e.getMessage());
    }

    @Test
    void notReadyInTimeStopsEverything() {
        long t0 = System.nanoTime();
        BrookException e = assertThrows(BrookException.class,
            () -> Brook.cluster().nodes(3).readyTimeout(Duration.ofMillis(50)).start());
        assertTrue(e.getMessage().contains("not ready within 50 ms"), e.getMessage());
        assertTrue(System.nanoTime() - t0 < Duration.ofSeconds(20).toNanos(), "gave up promptly");
    }

    @Test
    void closeStopsTheNodesAndDeletesTheDirectory() {
        Path dir;
        try (Brook brook = Brook.cluster().start()) {
            dir = brook.directory();
            assertEquals(1, brook.liveNodeIds().size());
            assertFalse(brook.bootstrapServers().isEmpty());
        }
        assertFalse(Files.exists(dir), dir + " deleted");
    }
}

package brooktest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Each bad input is one error naming its cause, never a hang.

func TestAMissingBinaryNamesWhereToGetOne(t *testing.T) {
	t.Setenv(EnvBin, "")
	t.Setenv("PATH", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	_, err := FindBin()
	if err == nil || !strings.Contains(err.Error(), "brooktest/install") {
		t.Fatalf("want the install hint, got %v", err)
	}
}

func TestANonLinuxExecutableIsRefused(t *testing.T) {
	script := filepath.Join(t.TempDir(), "brook")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvBin, script)
	_, err := FindBin()
	if err == nil || !strings.Contains(err.Error(), "not a Linux executable") {
		t.Fatalf("want a wrong-format error, got %v", err)
	}
}

// Needs a brook binary ($BROOK_BIN, PATH or the cache).
func TestAKeyKafkaDoesNotDeclareFailsStartWithItsName(t *testing.T) {
	if _, err := FindBin(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err := start(t, Config("no.such.key", "1"))
	if err == nil || !strings.Contains(err.Error(), `unknown config key "no.such.key"`) {
		t.Fatalf("want the unknown key named, got %v", err)
	}
	if waited := time.Since(began); waited > 30*time.Second {
		t.Fatalf("the error took %v", waited)
	}
}

func TestAClusterNotReadyInTimeIsOneErrorWithTheLogs(t *testing.T) {
	if _, err := FindBin(); err != nil {
		t.Fatal(err)
	}
	_, err := start(t, ReadyTimeout(time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "not ready within 1ms") ||
		!strings.Contains(err.Error(), "supervisor.log") {
		t.Fatalf("want a timeout with the logs, got %v", err)
	}
}

func TestTopicsAreLedOnceStartReturns(t *testing.T) {
	if _, err := FindBin(); err != nil {
		t.Fatal(err)
	}
	c, err := start(t, Topic("orders:3"))
	if err != nil {
		t.Fatal(err)
	}
	// Read once, no wait: the cluster counts as ready only when every partition has its leader.
	for p := 0; p < 3; p++ {
		if _, leader, err := c.partitionOnLeader("orders", p); err != nil || leader != 1 {
			t.Fatalf("orders-%d: leader %d, %v", p, leader, err)
		}
	}
}

func TestARefusedTopicIsNamed(t *testing.T) {
	if _, err := FindBin(); err != nil {
		t.Fatal(err)
	}
	// One node cannot hold two replicas.
	_, err := start(t, Topic("orders:1:2"))
	if err == nil || !strings.Contains(err.Error(), "creating topic orders: InvalidReplicationFactor") {
		t.Fatalf("want the broker's reason, got %v", err)
	}
}

// closeMax bounds the cleanup of a 3-node cluster: the nodes are killed, not shut down all
// at once (which waited out broker.session.timeout.ms, 3 s with the kit's timings).
const closeMax = 2 * time.Second

func TestCleanupOfThreeNodesIsQuickAndLeavesNoProcess(t *testing.T) {
	if _, err := FindBin(); err != nil {
		t.Fatal(err)
	}
	c, err := start(t, Nodes(3))
	if err != nil {
		t.Fatal(err)
	}
	pids := []int{c.cmd.Process.Pid}
	for _, n := range c.Nodes() {
		pid, ok := n["pid"].(float64)
		if !ok {
			t.Fatalf("no pid in %v", n)
		}
		pids = append(pids, int(pid))
	}
	t0 := time.Now()
	c.stop()
	took := time.Since(t0)
	for _, pid := range pids {
		// Reaped by the supervisor (nodes) or by the kit (supervisor): no /proc entry left.
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
			t.Errorf("process %d outlived the cleanup", pid)
		}
	}
	if took > closeMax {
		t.Fatalf("cleanup of 3 nodes took %v, more than %v", took, closeMax)
	}
}

// Package brooktest starts Brook, a Kafka-wire-compatible broker, for Go tests: a single
// node or a cluster of `brook serve` processes under one `brook cluster` supervisor, on
// free loopback ports, with its data in t.TempDir(), stopped by t.Cleanup.
//
//	func TestOrders(t *testing.T) {
//		c := brooktest.Start(t, brooktest.Nodes(3), brooktest.Config("min.insync.replicas", "2"))
//		cl, _ := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...))
//		...
//		c.KillNode(c.Leader("orders", 0))
//		c.AwaitIsrSize("orders", 0, 2, 30*time.Second)
//	}
//
// Everything beyond the Kafka protocol goes through the supervisor's HTTP API (the one
// `brook node` and the live page use): node kill, restart, pause and resume, fault rules,
// the JSON state views, and the waits built on them.
//
// The binary comes from $BROOK_BIN, else PATH, else the cache that
// `go run github.com/brook-broker/brook/kits/go/brooktest/install` fills (FindBin). The
// supervisor is started with --exit-on-stdin-eof and a pipe on its stdin, so the cluster
// dies with the test process even when that is killed with SIGKILL.
package brooktest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// DefaultReadyTimeout bounds how long Start waits for the cluster to be ready.
const DefaultReadyTimeout = 60 * time.Second

// stopTimeout bounds a clean stop at cleanup; then the supervisor is killed (its nodes
// follow it, watching its pipe).
const stopTimeout = 30 * time.Second

// logTailBytes is how much of each log an error repeats.
const logTailBytes = 4 << 10

type options struct {
	nodes        int
	config       [][2]string
	topics       []string
	readyTimeout time.Duration
	bin          string
}

// Option configures Start.
type Option func(*options)

// Nodes sets how many nodes to start (default 1). Every node is a broker and a voter of
// the metadata quorum, as `brook cluster` runs them.
func Nodes(n int) Option { return func(o *options) { o.nodes = n } }

// Config sets a broker property (Kafka's server.properties name) on every node. A key Kafka
// does not declare makes Start fail with Brook's message naming it.
func Config(key, value string) Option {
	return func(o *options) { o.config = append(o.config, [2]string{key, value}) }
}

// Topic creates a topic before Start returns: "name", "name:partitions" or
// "name:partitions:replicationFactor" (the broker's defaults otherwise). Every node then names
// each partition's leader, so a first producer needs no metadata retry; a topic the cluster
// refuses makes Start fail with the broker's reason.
func Topic(spec string) Option {
	return func(o *options) { o.topics = append(o.topics, spec) }
}

// ReadyTimeout bounds the wait for every node to be ready (default DefaultReadyTimeout).
func ReadyTimeout(d time.Duration) Option { return func(o *options) { o.readyTimeout = d } }

// Bin runs this brook binary instead of looking one up (FindBin).
func Bin(path string) Option { return func(o *options) { o.bin = path } }

// Cluster is a running Brook cluster (of one node or more).
type Cluster struct {
	t          testing.TB
	cmd        *exec.Cmd
	stdin      io.WriteCloser
	dir        string
	bootstrap  string
	supervisor string
	admins     map[int]string
	ids        []int
	exited     chan struct{}
	readyLines chan string
}

// Start starts a cluster and registers its stop with t.Cleanup; it fails the test (Fatal)
// with the cause when brook is missing or the cluster is not ready in time.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	c, err := start(t, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func start(t testing.TB, opts ...Option) (*Cluster, error) {
	o := options{nodes: 1, readyTimeout: DefaultReadyTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.bin == "" {
		bin, err := FindBin()
		if err != nil {
			return nil, err
		}
		o.bin = bin
	} else if err := checkArch(o.bin); err != nil {
		return nil, fmt.Errorf("brooktest: %s: %w", o.bin, err)
	}
	dir := t.TempDir()
	args := []string{"cluster", fmt.Sprintf("--nodes=%d", o.nodes), "--base-port=0",
		"--supervisor-listener=127.0.0.1:0", "--data-dir=" + dir, "--exit-on-stdin-eof",
		// The timings every kit sets (the supervisor's one list); Config wins.
		"--test-timings",
		fmt.Sprintf("--ready-timeout-secs=%d", int(o.readyTimeout.Seconds())+1)}
	for _, kv := range o.config {
		args = append(args, "--override="+kv[0]+"="+kv[1])
	}
	for _, spec := range o.topics {
		args = append(args, "--topic="+spec)
	}
	c := &Cluster{t: t, dir: dir, admins: map[int]string{}, exited: make(chan struct{})}
	if err := c.spawn(o.bin, args); err != nil {
		return nil, err
	}
	t.Cleanup(c.stop)
	if err := c.awaitReady(o.readyTimeout); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) spawn(bin string, args []string) error {
	c.cmd = exec.Command(bin, args...)
	stderr, err := os.Create(filepath.Join(c.dir, "supervisor.log"))
	if err != nil {
		return err
	}
	c.cmd.Stderr = stderr
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return err
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("brooktest: starting %s: %w", bin, err)
	}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // Nobody reads after READY; the pipe must not block the supervisor.
			}
		}
		close(lines)
	}()
	go func() {
		_ = c.cmd.Wait()
		stderr.Close()
		close(c.exited)
	}()
	c.readyLines = lines
	return nil
}

// awaitReady reads the supervisor's stdout until its CLUSTER READY line:
// "CLUSTER READY bootstrap=H:P,... supervisor=H:P admins=1@H:P,...".
func (c *Cluster) awaitReady(timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-c.readyLines:
			if !ok {
				<-c.exited
				return fmt.Errorf("brooktest: brook cluster exited before it was ready (%v):\n%s",
					c.cmd.ProcessState, c.logTails())
			}
			if strings.HasPrefix(line, "CLUSTER READY ") {
				return c.parseReady(line)
			}
		case <-deadline:
			return fmt.Errorf("brooktest: the cluster was not ready within %v:\n%s", timeout, c.logTails())
		}
	}
}

func (c *Cluster) parseReady(line string) error {
	for _, field := range strings.Fields(line) {
		key, value, _ := strings.Cut(field, "=")
		switch key {
		case "bootstrap":
			c.bootstrap = value
		case "supervisor":
			c.supervisor = value
		case "admins":
			for _, a := range strings.Split(value, ",") {
				var id int
				idText, addr, _ := strings.Cut(a, "@")
				if _, err := fmt.Sscan(idText, &id); err == nil {
					c.admins[id] = addr
					c.ids = append(c.ids, id)
				}
			}
		}
	}
	if c.bootstrap == "" || c.supervisor == "" {
		return fmt.Errorf("brooktest: unexpected ready line %q", line)
	}
	return nil
}

// stop kills every node (SIGKILL, through the supervisor, which answers once it has reaped
// it), then closes the supervisor's stdin (it exits), and kills it if that takes longer than
// stopTimeout. The cluster is thrown away, as the Java kit's close() and Testcontainers do: a
// clean stop of every node at once would wait, since each node's controlled shutdown (Kafka's
// BrokerServer.shutdown) needs the metadata quorum to commit it, and once most voters have
// gone the last ones give up only after broker.session.timeout.ms. What a node acknowledged
// is on disk either way; StopNode is the clean shutdown of one node.
func (c *Cluster) stop() {
	c.killNodes()
	if c.stdin != nil {
		c.stdin.Close()
	}
	select {
	case <-c.exited:
	case <-time.After(stopTimeout):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// killNodes SIGKILLs every running node; errors are left to stop's bound (a node that
// exited meanwhile answers 409, and a supervisor that does not answer is killed there).
func (c *Cluster) killNodes() {
	var answer struct {
		Nodes []struct {
			ID    int  `json:"id"`
			Alive bool `json:"alive"`
		} `json:"nodes"`
	}
	if c.call("GET", "/nodes", nil, &answer) != nil {
		return
	}
	for _, n := range answer.Nodes {
		if n.Alive {
			_ = c.call("POST", fmt.Sprintf("/nodes/%d/kill", n.ID), nil, nil)
		}
	}
}

// logTails is the end of the supervisor's stderr and of every node's log.
func (c *Cluster) logTails() string {
	var b bytes.Buffer
	logs, _ := filepath.Glob(filepath.Join(c.dir, "*.log"))
	for _, path := range logs {
		data, _ := os.ReadFile(path)
		if len(data) > logTailBytes {
			data = data[len(data)-logTailBytes:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(path), data)
	}
	return b.String()
}

// BootstrapServers is the nodes' client listeners, comma-separated (bootstrap.servers).
func (c *Cluster) BootstrapServers() string { return c.bootstrap }

// Brokers is the nodes' client listeners, one per node (kgo.SeedBrokers).
func (c *Cluster) Brokers() []string { return strings.Split(c.bootstrap, ",") }

// SupervisorAddress is the supervisor's HTTP API (host:port): GET /nodes, /v1/*, the live page.
func (c *Cluster) SupervisorAddress() string { return c.supervisor }

// AdminAddress is node id's admin listener (host:port): its own state views and fault API.
func (c *Cluster) AdminAddress(id int) string { return c.admins[id] }

// NodeIDs lists the node ids (1..N).
func (c *Cluster) NodeIDs() []int { return append([]int(nil), c.ids...) }

// Dir is the cluster's data directory: node-N/ (log.dirs) and node-N.log for each node.
func (c *Cluster) Dir() string { return c.dir }

package brooktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// callTimeout bounds one HTTP call to the supervisor; a restart answers once the node is
// ready again, so it gets the ready timeout's order of magnitude.
const callTimeout = 90 * time.Second

// pollInterval paces the waits' readings; the condition decides, not the pause.
const pollInterval = 20 * time.Millisecond

// answerBytesMax bounds an answer read from the supervisor.
const answerBytesMax = 16 << 20

var httpClient = &http.Client{Timeout: callTimeout}

// call sends method path (with a JSON body when body is not nil) to the supervisor and
// decodes its JSON answer into out (when not nil).
func (c *Cluster) call(method, path string, body, out any) error {
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, "http://"+c.supervisor+path, reader)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("brooktest: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, answerBytesMax))
	if err != nil {
		return fmt.Errorf("brooktest: %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("brooktest: %s %s: %s: %s", method, path, resp.Status, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("brooktest: %s %s: not JSON (%v): %s", method, path, err, data)
	}
	return nil
}

// must fails the test on err.
func (c *Cluster) must(err error) {
	if err != nil {
		c.t.Helper()
		c.t.Fatal(err)
	}
}

func (c *Cluster) nodeOp(id int, op string) {
	c.t.Helper()
	c.must(c.call("POST", fmt.Sprintf("/nodes/%d/%s", id, op), nil, nil))
}

// KillNode kills node id with SIGKILL (as `kill -9`) and returns once it has exited. It
// stays down until StartNode or RestartNode.
func (c *Cluster) KillNode(id int) { c.t.Helper(); c.nodeOp(id, "kill") }

// StopNode stops node id with SIGTERM (a clean shutdown) and returns once it has exited.
func (c *Cluster) StopNode(id int) { c.t.Helper(); c.nodeOp(id, "kill?signal=term") }

// StartNode starts a stopped node with its configuration and data; returns once it is ready.
func (c *Cluster) StartNode(id int) { c.t.Helper(); c.nodeOp(id, "start") }

// RestartNode stops node id if it runs and starts it again; returns once it is ready.
func (c *Cluster) RestartNode(id int) { c.t.Helper(); c.nodeOp(id, "restart") }

// PauseNode stops node id with SIGSTOP: it keeps its connections and answers nothing.
func (c *Cluster) PauseNode(id int) { c.t.Helper(); c.nodeOp(id, "pause") }

// ResumeNode resumes a paused node (SIGCONT).
func (c *Cluster) ResumeNode(id int) { c.t.Helper(); c.nodeOp(id, "resume") }

// Nodes is GET /nodes: each node's id, pid, alive, paused, listeners, log and last exit.
func (c *Cluster) Nodes() []map[string]any {
	c.t.Helper()
	var answer struct {
		Nodes []map[string]any `json:"nodes"`
	}
	c.must(c.call("GET", "/nodes", nil, &answer))
	return answer.Nodes
}

// Fault is a fault rule as the admin API takes it (docs/FAULTS.md): Action is
// drop-request, drop-response, delay, error or close for request rules; crash (with
// Point); partition or delay for link rules (with From, To, Direction, Traffic). Empty
// fields match everything.
type Fault struct {
	Kind        string   `json:"kind,omitempty"`
	Action      string   `json:"action"`
	API         string   `json:"api,omitempty"`
	Topic       string   `json:"topic,omitempty"`
	Partition   *int     `json:"partition,omitempty"`
	ClientID    string   `json:"client_id,omitempty"`
	Times       *uint64  `json:"times,omitempty"`
	Probability *float64 `json:"probability,omitempty"`
	Seed        *uint64  `json:"seed,omitempty"`
	DelayMs     *uint64  `json:"delay_ms,omitempty"`
	ErrorCode   *int16   `json:"error_code,omitempty"`
	When        string   `json:"when,omitempty"`
	Point       string   `json:"point,omitempty"`
	From        *int     `json:"from,omitempty"`
	To          any      `json:"to,omitempty"`
	Direction   string   `json:"direction,omitempty"`
	Traffic     string   `json:"traffic,omitempty"`
}

// AddFault installs a fault rule on node id and returns the rule's id.
func (c *Cluster) AddFault(id int, rule Fault) int {
	c.t.Helper()
	var answer struct {
		ID int `json:"id"`
	}
	c.must(c.call("POST", fmt.Sprintf("/nodes/%d/faults", id), rule, &answer))
	return answer.ID
}

// FaultRule is an installed rule as GET /faults lists it: its id, how often it fired,
// and every field as the node shows it.
type FaultRule struct {
	ID     int            `json:"id"`
	Fired  uint64         `json:"fired"`
	Fields map[string]any `json:"-"`
}

// Faults lists node id's rules, each with how often it fired.
func (c *Cluster) Faults(id int) []FaultRule {
	c.t.Helper()
	var answer struct {
		Rules []map[string]any `json:"rules"`
	}
	c.must(c.call("GET", fmt.Sprintf("/nodes/%d/faults", id), nil, &answer))
	rules := make([]FaultRule, 0, len(answer.Rules))
	for _, r := range answer.Rules {
		id, _ := r["id"].(float64)
		fired, _ := r["fired"].(float64)
		rules = append(rules, FaultRule{ID: int(id), Fired: uint64(fired), Fields: r})
	}
	return rules
}

// ClearFaults removes every fault rule of node id.
func (c *Cluster) ClearFaults(id int) {
	c.t.Helper()
	c.must(c.call("DELETE", fmt.Sprintf("/nodes/%d/faults", id), nil, nil))
}

// View is one of the supervisor's merged JSON views ("cluster", "partitions", "producers",
// "groups"; docs/STATE-VIEWS.md): {"nodes": {"1": node 1's view, ...}}, a node that is down
// answering {"error": ...}.
func (c *Cluster) View(name string) map[string]any {
	c.t.Helper()
	v, err := c.view(name)
	c.must(err)
	return v
}

func (c *Cluster) view(path string) (map[string]any, error) {
	var v map[string]any
	err := c.call("GET", "/v1/"+path, nil, &v)
	return v, err
}

// partitionOnLeader is topic-partition's entry on the node that leads it, and that node.
func (c *Cluster) partitionOnLeader(topic string, partition int) (map[string]any, int, error) {
	v, err := c.view("partitions?topic=" + url.QueryEscape(topic))
	if err != nil {
		return nil, 0, err
	}
	nodes, _ := v["nodes"].(map[string]any)
	for idText, nodeView := range nodes {
		ps, _ := nodeView.(map[string]any)["partitions"].([]any)
		for _, p := range ps {
			entry, _ := p.(map[string]any)
			if entry["role"] == "leader" && entry["partition"] == float64(partition) {
				var id int
				fmt.Sscan(idText, &id)
				return entry, id, nil
			}
		}
	}
	return nil, 0, fmt.Errorf("no node leads %s-%d: %v", topic, partition, v)
}

// await reads with read until it returns nil, or fails the test after timeout with what
// and the last reading's error.
func (c *Cluster) await(what string, timeout time.Duration, read func() error) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := read()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("brooktest: %s: not reached within %v; last seen: %v", what, timeout, err)
		}
		time.Sleep(pollInterval)
	}
}

// Leader is the node leading topic-partition now (waiting up to 30 s for one).
func (c *Cluster) Leader(topic string, partition int) int {
	c.t.Helper()
	var leader int
	c.await(fmt.Sprintf("%s-%d: a leader", topic, partition), 30*time.Second, func() (err error) {
		_, leader, err = c.partitionOnLeader(topic, partition)
		return err
	})
	return leader
}

// AwaitIsrSize waits until the leader of topic-partition has an ISR of size members.
func (c *Cluster) AwaitIsrSize(topic string, partition, size int, timeout time.Duration) {
	c.t.Helper()
	c.await(fmt.Sprintf("%s-%d: an ISR of %d", topic, partition, size), timeout, func() error {
		p, _, err := c.partitionOnLeader(topic, partition)
		if err != nil {
			return err
		}
		if isr, _ := p["isr"].([]any); len(isr) != size {
			return fmt.Errorf("%v", p)
		}
		return nil
	})
}

// AwaitHighWatermark waits until the leader's high watermark of topic-partition is at
// least offset.
func (c *Cluster) AwaitHighWatermark(topic string, partition int, offset int64, timeout time.Duration) {
	c.t.Helper()
	what := fmt.Sprintf("%s-%d: a high watermark of at least %d", topic, partition, offset)
	c.await(what, timeout, func() error {
		p, _, err := c.partitionOnLeader(topic, partition)
		if err != nil {
			return err
		}
		if hw, _ := p["high_watermark"].(float64); int64(hw) < offset {
			return fmt.Errorf("%v", p)
		}
		return nil
	})
}

// AwaitStableGroup waits until the group's coordinator has it Stable at a generation
// (classic) or group epoch (consumer protocol) of at least generation.
func (c *Cluster) AwaitStableGroup(group string, generation int, timeout time.Duration) {
	c.t.Helper()
	what := fmt.Sprintf("group %s: Stable at generation %d or later", group, generation)
	c.await(what, timeout, func() error {
		v, err := c.view("groups")
		if err != nil {
			return err
		}
		nodes, _ := v["nodes"].(map[string]any)
		for _, nodeView := range nodes {
			gs, _ := nodeView.(map[string]any)["groups"].([]any)
			for _, g := range gs {
				entry, _ := g.(map[string]any)
				gen, _ := entry["generation"].(float64)
				if entry["group_id"] == group && entry["state"] == "Stable" && int(gen) >= generation {
					return nil
				}
			}
		}
		return fmt.Errorf("%v", v)
	})
}

// An example project using only the brooktest kit and franz-go: one 3-node cluster for the
// whole package, each subtest on its own topic.
package example

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/brook-broker/brook/kits/go/brooktest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const wait = 30 * time.Second

func TestWithBrook(t *testing.T) {
	c := brooktest.Start(t, brooktest.Nodes(3), brooktest.Config("min.insync.replicas", "2"))
	t.Run("produce and consume in a group", func(t *testing.T) { produceConsume(t, c) })
	t.Run("a transaction commits and an abort stays invisible", func(t *testing.T) { transaction(t, c) })
	t.Run("a lost ack is retried without a duplicate", func(t *testing.T) { lostAck(t, c) })
	t.Run("a leader kill loses no acknowledged record", func(t *testing.T) { leaderKill(t, c) })
}

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

func client(t *testing.T, c *brooktest.Cluster, opts ...kgo.Opt) *kgo.Client {
	// A short metadata age: after a lost connection or a leader change franz-go refreshes
	// metadata at most this often (5 s by default), which is most of a test's wait otherwise.
	base := []kgo.Opt{kgo.SeedBrokers(c.Brokers()...), kgo.MetadataMinAge(250 * time.Millisecond)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, c *brooktest.Cluster, topic string) {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 3
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx(t), client(t, c))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create %s: error %d", topic, code)
	}
	c.AwaitIsrSize(topic, 0, 3, wait)
}

func produce(t *testing.T, cl *kgo.Client, topic string, from, to int) {
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// consumeAll reads topic from the start until it has n records; read_committed.
func consumeAll(t *testing.T, c *brooktest.Cluster, topic string, n int, opts ...kgo.Opt) []string {
	cl := client(t, c, append([]kgo.Opt{kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted())}, opts...)...)
	var values []string
	for len(values) < n {
		fetches := cl.PollFetches(ctx(t))
		if err := fetches.Err(); err != nil {
			t.Fatalf("after %d of %d records: %v", len(values), n, err)
		}
		fetches.EachRecord(func(r *kgo.Record) { values = append(values, string(r.Value)) })
	}
	return values
}

func expectExactly(t *testing.T, got []string, want []int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i] != fmt.Sprint(w) {
			t.Fatalf("record %d is %s, want %d (all: %v)", i, got[i], w, got)
		}
	}
}

func seq(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

func produceConsume(t *testing.T, c *brooktest.Cluster) {
	topic, group := "orders", "order-readers"
	createTopic(t, c, topic)
	produce(t, client(t, c), topic, 0, 100)
	c.AwaitHighWatermark(topic, 0, 100, wait)
	consumer := client(t, c, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.DisableAutoCommit())
	var values []string
	for len(values) < 100 {
		fetches := consumer.PollFetches(ctx(t))
		if err := fetches.Err(); err != nil {
			t.Fatal(err)
		}
		fetches.EachRecord(func(r *kgo.Record) { values = append(values, string(r.Value)) })
	}
	expectExactly(t, values, seq(0, 100))
	c.AwaitStableGroup(group, 1, wait)
	if err := consumer.CommitUncommittedOffsets(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

func transaction(t *testing.T, c *brooktest.Cluster) {
	topic := "payments"
	createTopic(t, c, topic)
	tx := client(t, c, kgo.TransactionalID("payments-tx"), kgo.DefaultProduceTopic(topic))
	for _, commit := range []bool{false, true} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		first := 0
		if commit {
			first = 10
		}
		produce(t, tx, topic, first, first+10)
		if err := tx.EndTransaction(ctx(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	expectExactly(t, consumeAll(t, c, topic, 10), seq(10, 20))
}

// lostAck: the leader appends a batch and closes the connection instead of answering
// (a fault rule); the idempotent producer sends it again and the log holds one copy.
func lostAck(t *testing.T, c *brooktest.Cluster) {
	topic := "lost-acks"
	createTopic(t, c, topic)
	leader := c.Leader(topic, 0)
	times := uint64(1)
	rule := c.AddFault(leader, brooktest.Fault{Action: "close", When: "after", API: "produce",
		Topic: topic, Times: &times})
	produce(t, client(t, c), topic, 0, 1)
	produce(t, client(t, c), topic, 1, 2)
	expectExactly(t, consumeAll(t, c, topic, 2), seq(0, 2))
	rules := c.Faults(leader)
	if len(rules) != 1 || rules[0].ID != rule || rules[0].Fired != 1 {
		t.Fatalf("the rule fired once: %+v", rules)
	}
	c.ClearFaults(leader)
}

// leaderKill: acks=all idempotent records before and after the partition leader is killed
// with SIGKILL, all acknowledged, all there, once each; then the node rejoins the ISR.
func leaderKill(t *testing.T, c *brooktest.Cluster) {
	topic := "ledger"
	createTopic(t, c, topic)
	producer := client(t, c, kgo.RequiredAcks(kgo.AllISRAcks()))
	produce(t, producer, topic, 0, 50)
	leader := c.Leader(topic, 0)
	c.KillNode(leader)
	produce(t, producer, topic, 50, 100)
	c.StartNode(leader)
	c.AwaitIsrSize(topic, 0, 3, wait)
	expectExactly(t, consumeAll(t, c, topic, 100), seq(0, 100))
}

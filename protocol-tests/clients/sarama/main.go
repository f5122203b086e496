// Sarama (pinned in go.mod) against a running cluster, at Sarama's default protocol version and
// at the newest it knows: an idempotent producer (acks=all), a group consumed with
// ConsumerGroup and explicit commits, and a second run of the same group that must read only
// the one record produced after the first run's commits. Every result is compared whole with
// what it must be. Run by scripts/old-clients:
//
//	go run . --bootstrap HOST:PORT[,...] --replication-factor N
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

const (
	partitions = 3
	records    = 50
	// How long one wait for records may take before the run fails.
	timeout = 30 * time.Second
)

func check(what string, got, want any) {
	if !reflect.DeepEqual(got, want) {
		fmt.Fprintf(os.Stderr, "FAIL %s:\n  got  %v\n  want %v\n", what, got, want)
		os.Exit(1)
	}
	fmt.Printf("  ok %s\n", what)
}

func must(what string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL %s: %v\n", what, err)
		os.Exit(1)
	}
}

func config(version sarama.KafkaVersion) *sarama.Config {
	c := sarama.NewConfig()
	c.Version = version
	c.ClientID = "brook-sarama-check"
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Producer.Return.Successes = true
	c.Net.MaxOpenRequests = 1
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	return c
}

// produce sends the key=value records; returns "partition/offset key=value" lines, sorted.
func produce(brokers []string, c *sarama.Config, topic string, kvs [][2]string) []string {
	producer, err := sarama.NewSyncProducer(brokers, c)
	must("NewSyncProducer", err)
	defer producer.Close()
	var written []string
	for _, kv := range kvs {
		p, o, err := producer.SendMessage(&sarama.ProducerMessage{
			Topic: topic, Key: sarama.StringEncoder(kv[0]), Value: sarama.StringEncoder(kv[1]),
		})
		must("SendMessage", err)
		written = append(written, fmt.Sprintf("%d/%d %s=%s", p, o, kv[0], kv[1]))
	}
	sort.Strings(written)
	return written
}

// handler marks every record it is given, cancels the run at `count` and commits the marked
// offsets when the session ends.
type handler struct {
	count  int
	cancel context.CancelFunc
	mu     sync.Mutex
	got    []string
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(s sarama.ConsumerGroupSession) error {
	// Auto-commit is off: the marked offsets are committed here, once per session.
	s.Commit()
	return nil
}
func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		s.MarkMessage(m, "")
		h.mu.Lock()
		h.got = append(h.got, fmt.Sprintf("%d/%d %s=%s", m.Partition, m.Offset, m.Key, m.Value))
		if len(h.got) >= h.count {
			h.cancel()
		}
		h.mu.Unlock()
	}
	return nil
}

// consumeGroup is one run of the group: `count` records, committed; returns them sorted.
func consumeGroup(brokers []string, c *sarama.Config, topic, group string, count int) []string {
	g, err := sarama.NewConsumerGroup(brokers, group, c)
	must("NewConsumerGroup", err)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	h := &handler{count: count, cancel: cancel}
	for ctx.Err() == nil {
		must("Consume", g.Consume(ctx, []string{topic}, h))
	}
	must("ConsumerGroup.Close", g.Close())
	sort.Strings(h.got)
	return h.got
}

// offsets are the group's committed offsets and the partitions' end offsets.
func offsets(brokers []string, c *sarama.Config, topic, group string) (map[int32]int64, map[int32]int64) {
	client, err := sarama.NewClient(brokers, c)
	must("NewClient", err)
	defer client.Close()
	admin, err := sarama.NewClusterAdminFromClient(client)
	must("NewClusterAdminFromClient", err)
	ids := []int32{0, 1, 2}
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: ids})
	must("ListConsumerGroupOffsets", err)
	committed, ends := map[int32]int64{}, map[int32]int64{}
	for _, p := range ids {
		committed[p] = resp.GetBlock(topic, p).Offset
		ends[p], err = client.GetOffset(topic, p, sarama.OffsetNewest)
		must("GetOffset", err)
	}
	return committed, ends
}

func run(brokers []string, rf int16, version sarama.KafkaVersion) {
	tag := make([]byte, 4)
	_, _ = rand.Read(tag)
	topic := fmt.Sprintf("sarama-%s-%s", version, hex.EncodeToString(tag))
	group := "group-" + topic
	fmt.Printf("== Sarama v1.61.1, Version %s: topic %s\n", version, topic)
	c := config(version)
	admin, err := sarama.NewClusterAdmin(brokers, c)
	must("NewClusterAdmin", err)
	must("CreateTopic", admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: rf}, false))
	fmt.Println("  ok CreateTopic")

	var kvs [][2]string
	for i := 0; i < records; i++ {
		kvs = append(kvs, [2]string{fmt.Sprintf("key%d", i), fmt.Sprintf("value%d", i)})
	}
	written := produce(brokers, c, topic, kvs)
	check("idempotent producer wrote every record once", len(written), records)
	check("group run reads exactly the records written", consumeGroup(brokers, c, topic, group, records), written)
	committed, ends := offsets(brokers, c, topic, group)
	check("committed offsets are the end offsets", committed, ends)

	late := produce(brokers, c, topic, [][2]string{{"late", "record"}})
	check("second run of the group reads only the new record", consumeGroup(brokers, c, topic, group, 1), late)
	committed, ends = offsets(brokers, c, topic, group)
	check("committed offsets after the second run", committed, ends)

	must("DeleteTopic", admin.DeleteTopic(topic))
	must("ClusterAdmin.Close", admin.Close())
}

func main() {
	bootstrap := flag.String("bootstrap", "", "HOST:PORT[,...]")
	rf := flag.Int("replication-factor", 3, "replicas of the topic")
	versions := flag.String("versions", sarama.DefaultVersion.String()+","+sarama.MaxVersion.String(),
		"the Config.Version values to run at (default: Sarama's default and the newest it knows)")
	flag.Parse()
	brokers := strings.Split(*bootstrap, ",")
	for _, name := range strings.Split(*versions, ",") {
		v, err := sarama.ParseKafkaVersion(name)
		must("--versions", err)
		run(brokers, int16(*rf), v)
	}
	fmt.Println("== Sarama: every check passed")
}

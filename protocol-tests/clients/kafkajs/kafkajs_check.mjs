// KafkaJS (pinned in package.json) against a running cluster: an idempotent producer (acks=all),
// a group consumed with consumer.run and explicit commits, and a second run of the same group
// that must read only the one record produced after the first run's commits. Every result is
// compared whole with what it must be. Run by scripts/old-clients:
//
//   node kafkajs_check.mjs --bootstrap HOST:PORT[,...] --replication-factor N
import { Kafka, logLevel } from "kafkajs";
import { parseArgs } from "node:util";
import { randomBytes } from "node:crypto";
import { isDeepStrictEqual } from "node:util";

const PARTITIONS = 3;
const RECORDS = 50;
// How long one wait for records may take before the run fails.
const TIMEOUT_MS = 30_000;
// A consumer's fetch wait (KafkaJS's default is 5 s): disconnect() waits for the fetch in
// flight, which at the end of the records waits this long on Kafka and Brook alike.
const FETCH_MAX_WAIT_MS = 500;

const { values: args } = parseArgs({
  options: { bootstrap: { type: "string" }, "replication-factor": { type: "string" } },
});
const kafka = new Kafka({
  clientId: "brook-kafkajs-check",
  brokers: args.bootstrap.split(","),
  logLevel: logLevel.ERROR,
});

function check(what, got, want) {
  if (!isDeepStrictEqual(got, want)) {
    console.error(`FAIL ${what}:\n  got  ${JSON.stringify(got)}\n  want ${JSON.stringify(want)}`);
    process.exit(1);
  }
  console.log(`  ok ${what}`);
}

// Sends the records with acks=all from an idempotent producer; returns "partition/offset key=value"
// lines, sorted.
async function produce(topic, records) {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const written = [];
  for (const [key, value] of records) {
    const [meta] = await producer.send({ topic, acks: -1, messages: [{ key, value }] });
    if (meta.errorCode !== 0) throw new Error(`produce error ${meta.errorCode}`);
    written.push(`${meta.partition}/${meta.baseOffset} ${key}=${value}`);
  }
  await producer.disconnect();
  return written.sort();
}

// One run of `group`: reads `count` records with consumer.run, commits each partition's next
// offset once they are all there, then stops. Returns the records as produce() writes them,
// sorted.
async function consumeGroup(topic, group, count) {
  const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: FETCH_MAX_WAIT_MS });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  const next = new Map();
  let done;
  const all = new Promise((resolve) => (done = resolve));
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      got.push(`${partition}/${message.offset} ${message.key}=${message.value}`);
      next.set(partition, (BigInt(message.offset) + 1n).toString());
      if (got.length >= count) done();
    },
  });
  const timer = setTimeout(done, TIMEOUT_MS);
  await all;
  clearTimeout(timer);
  await consumer.commitOffsets([...next].map(([partition, offset]) => ({ topic, partition, offset })));
  await consumer.disconnect();
  return got.sort();
}

async function groupOffsets(admin, topic, group) {
  const [{ partitions }] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  return Object.fromEntries(partitions.map((p) => [p.partition, p.offset]).sort());
}

async function endOffsets(admin, topic) {
  const parts = await admin.fetchTopicOffsets(topic);
  return Object.fromEntries(parts.map((p) => [p.partition, p.high]).sort());
}

async function main() {
  const tag = randomBytes(4).toString("hex");
  const topic = `kafkajs-${tag}`;
  const group = `kafkajs-group-${tag}`;
  console.log(`== KafkaJS ${(await import("kafkajs/package.json", { with: { type: "json" } })).default.version}: topic ${topic}`);
  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: Number(args["replication-factor"]) }],
    waitForLeaders: true,
  });
  check("createTopics", created, true);

  const records = Array.from({ length: RECORDS }, (_, i) => [`key${i}`, `value${i}`]);
  const written = await produce(topic, records);
  check("idempotent producer wrote every record once", written.length, RECORDS);
  check("group run reads exactly the records written", await consumeGroup(topic, group, RECORDS), written);
  check("committed offsets are the end offsets", await groupOffsets(admin, topic, group), await endOffsets(admin, topic));

  const late = await produce(topic, [["late", "record"]]);
  check("second run of the group reads only the new record", await consumeGroup(topic, group, 1), late);
  check("committed offsets after the second run", await groupOffsets(admin, topic, group), await endOffsets(admin, topic));

  await admin.deleteTopics({ topics: [topic] });
  await admin.disconnect();
  console.log("== KafkaJS: every check passed");
}

main().catch((e) => {
  console.error(`FAIL KafkaJS: ${e.stack || e}`);
  process.exit(1);
});

// node cluster.js PORT COUNT: ioredis' Cluster client, given one startup node (PORT),
// finds the other masters from CLUSTER SLOTS and sends each key to its slot's node:
// COUNT keys written and read back, pipelines and MULTI on {hash tagged} keys, and
// the errors a cluster gives back (CROSSSLOT, a script touching another node's key).
"use strict";

const Redis = require("ioredis");
const keySlot = require("cluster-key-slot"); // ioredis' own dependency
const { steps, settled, clusterReady } = require("./common");

const [port, count] = [Number(process.argv[2]), Number(process.argv[3])];

async function roundTrip(cluster) {
  const batch = 1000;
  for (let i = 0; i < count; i += batch) {
    const writes = [];
    for (let j = i; j < Math.min(i + batch, count); j++) {
      writes.push(cluster.set(`io:key:${j}`, `value:${j}`));
    }
    await Promise.all(writes);
  }
  let wrong = 0;
  for (let i = 0; i < count; i += batch) {
    const reads = [];
    for (let j = i; j < Math.min(i + batch, count); j++) reads.push(cluster.get(`io:key:${j}`));
    (await Promise.all(reads)).forEach((v, k) => {
      if (v !== `value:${i + k}`) wrong++;
    });
  }
  return { written: count, wrong };
}

// Which master holds each of these keys, by the slot map the client learned.
function portsOf(cluster, keys) {
  return keys.map((k) => Number(cluster.slots[keySlot(k)][0].split(":")[1]));
}

function nodeOf(cluster, key) {
  const [port] = portsOf(cluster, [key]);
  return cluster.nodes("master").find((n) => n.options.port === port);
}

async function run() {
  const cluster = new Redis.Cluster([{ host: "127.0.0.1", port }], {
    enableAutoPipelining: true,
    redisOptions: { maxRetriesPerRequest: 1, connectTimeout: 5000 },
  });
  cluster.on("error", () => {}); // surfaced through the commands' own rejections
  try {
    await clusterReady(cluster);
    const out = await steps([
      ["masters", async () => cluster.nodes("master").map((n) => n.options.port).sort()],
      ["roundtrip", () => roundTrip(cluster)],
      ["ports", async () => portsOf(cluster, ["foo", "b", "io:key:0"])],
      [
        "pipeline",
        () =>
          cluster
            .pipeline()
            .set("{io:p}a", "1")
            .incr("{io:p}n")
            .hset("{io:p}h", "f", "v")
            .hgetall("{io:p}h")
            .get("{io:p}a")
            .exec()
            .then(settled),
      ],
      [
        "multi",
        () =>
          cluster
            .multi()
            .set("{io:m}a", "x")
            .incr("{io:m}n")
            .lpush("{io:m}l", "a", "b")
            .lrange("{io:m}l", 0, -1)
            .exec()
            .then(settled),
      ],
      ["mset-one-slot", () => cluster.mset("{io:s}a", "1", "{io:s}b", "2")],
      ["mget-one-slot", () => cluster.mget("{io:s}a", "{io:s}b")],
      // b and bar: two slots of one node, sent there by a node's own client (the
      // cluster client refuses a cross-slot request itself, before sending it).
      ["crossslot", () => nodeOf(cluster, "b").mset("b", "1", "bar", "2")],
      ["script-local", () => cluster.eval("return redis.call('get', KEYS[1])", 1, "{io:s}a")],
      ["script-non-local", () => cluster.eval("return redis.call('get', 'foo')", 1, "b")],
      ["keyslot", () => cluster.cluster("KEYSLOT", "foo")],
    ]);
    return out;
  } finally {
    cluster.disconnect();
  }
}

run()
  .then((result) => process.stdout.write(JSON.stringify(result) + "\n"))
  .catch((err) => {
    process.stderr.write(`${err.stack || err}\n`);
    process.exitCode = 1;
  });

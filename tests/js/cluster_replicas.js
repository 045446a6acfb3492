// node cluster_replicas.js PORT COUNT: ioredis' Cluster client with scaleReads "slave"
// (reads go to a replica of the key's shard, which ioredis puts in READONLY mode):
// COUNT keys written through the primaries, then read back until every one reads its
// value (a replica applies a write shortly after its primary acknowledged it).
"use strict";

const Redis = require("ioredis");
const { clusterReady } = require("./common");

const [port, count] = [Number(process.argv[2]), Number(process.argv[3])];

async function run() {
  const cluster = new Redis.Cluster([{ host: "127.0.0.1", port }], {
    scaleReads: "slave",
    redisOptions: { maxRetriesPerRequest: 1, connectTimeout: 5000 },
  });
  cluster.on("error", () => {}); // surfaced through the commands' own rejections
  try {
    await clusterReady(cluster);
    const keys = Array.from({ length: count }, (_, i) => `ro:key:${i}`);
    await Promise.all(keys.map((k, i) => cluster.set(k, `value:${i}`)));
    const deadline = Date.now() + 30000;
    let wrong = keys.length;
    let rounds = 0;
    while (wrong && Date.now() < deadline) {
      rounds++;
      const got = await Promise.all(keys.map((k) => cluster.get(k)));
      wrong = got.filter((v, i) => v !== `value:${i}`).length;
      if (wrong) await new Promise((r) => setTimeout(r, 100));
    }
    const replicas = cluster.nodes("slave").map((n) => n.options.port);
    console.log(JSON.stringify({ written: count, wrong, rounds, replicas }));
  } finally {
    cluster.disconnect();
  }
}

run().catch((err) => {
  console.error(err.stack || String(err));
  process.exit(1);
});

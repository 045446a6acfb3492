// node cluster_writer.js PORT: ONE ioredis Cluster client, created once, writes
// io:w0, io:w1, ... (WRITERS at a time) until "stop" arrives on stdin, while the test
// moves slots and kills a shard's primary under it; "mark NAME" on stdin keeps the
// next index to be written under NAME (every write from it on began after the line).
// Each SET is sent again until it is acknowledged (or DEADLINE_MS passes: the script
// fails). Prints "acked N" every 100 acknowledgements (the test waits on them), then
// one JSON line: the acknowledged indices, the marks, the errors the application saw
// (by kind) and the client's node events.
"use strict";

const readline = require("readline");
const Redis = require("ioredis");
const { clusterReady } = require("./common");

const port = Number(process.argv[2]);
const WRITERS = 4;
const DEADLINE_MS = 60_000; // per write: a failover takes a few seconds here

// The options a user would set for a cluster whose slots move and whose primaries fail
// over (most are ioredis' defaults, written out so the test says what it relies on).
const cluster = new Redis.Cluster([{ host: "127.0.0.1", port }], {
  scaleReads: "master", // writes and reads to the primaries: acknowledged means stored
  retryDelayOnMoved: 0, // MOVED: the map is refreshed, the command follows at once
  retryDelayOnTryAgain: 100, // TRYAGAIN (a range being moved): wait, send again
  retryDelayOnFailover: 100, // a connection lost: refresh the map, then send again
  retryDelayOnClusterDown: 100, // CLUSTERDOWN: wait, send again
  maxRedirections: 16, // MOVED/ASK/TRYAGAIN/failover retries before the error reaches us
  enableOfflineQueue: true, // commands wait while the client reconnects
  // Every node lost: reconnect to the startup nodes after a short delay, never give up.
  clusterRetryStrategy: (times) => Math.min(100 + times * 50, 1000),
  redisOptions: {
    connectTimeout: 2000, // a killed node: fail fast, try another
    maxRetriesPerRequest: 2, // per connection; the cluster layer retries further
  },
});

const errors = {}; // what the application saw, by kind
const events = { "+node": 0, "-node": 0, "node error": 0, refresh: 0 };
cluster.on("error", () => {}); // counted through the commands' own rejections
cluster.on("+node", () => events["+node"]++);
cluster.on("-node", () => events["-node"]++);
cluster.on("node error", () => events["node error"]++);
cluster.on("refresh", () => events.refresh++);

let stopping = false;
let next = 0;
const acked = [];
const marks = {};

// "Too many Cluster redirections. Last error: ReplyError: MOVED 5045 127.0.0.1:7001":
// ioredis gave up retrying; kept by the last error the node (or the socket) gave.
function kindOf(err) {
  const message = String(err.message);
  const known = /MOVED|ASK|TRYAGAIN|CLUSTERDOWN|READONLY|Connection is closed|ECONN[A-Z]+/;
  const found = message.match(known);
  return found ? found[0] : message.slice(0, 40);
}

async function setUntilAcked(i) {
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    try {
      if ((await cluster.set(`io:w${i}`, `value:${i}`)) === "OK") return;
      throw new Error(`unexpected reply to SET io:w${i}`);
    } catch (err) {
      const kind = kindOf(err);
      errors[kind] = (errors[kind] || 0) + 1;
      if (Date.now() > deadline) throw new Error(`io:w${i} not acknowledged: ${err.message}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

async function writer() {
  while (!stopping) {
    const i = next++;
    await setUntilAcked(i);
    acked.push(i);
    if (acked.length % 100 === 0) process.stdout.write(`acked ${acked.length}\n`);
  }
}

async function run() {
  await clusterReady(cluster);
  readline.createInterface({ input: process.stdin }).on("line", (line) => {
    const [word, name] = line.split(" ");
    if (word === "mark") marks[name] = next;
    else stopping = true;
  });
  process.stdout.write("ready\n");
  await Promise.all(Array.from({ length: WRITERS }, writer));
  const masters = cluster.nodes("master").map((n) => n.options.port).sort();
  return { acked, marks, errors, events, masters };
}

run()
  .then((result) => process.stdout.write(JSON.stringify(result) + "\n"))
  .catch((err) => {
    process.stderr.write(`${err.stack || err}\n`);
    process.exitCode = 1;
  })
  .finally(() => cluster.disconnect());

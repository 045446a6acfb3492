// node drive.js OPTIONS_JSON: one ioredis client (`new Redis(OPTIONS)`: a port, or
// `sentinels` and `name`), driven over stdin one JSON line at a time:
//   ["SET", "k", "v"]                    one command (client.set("k", "v"))
//   {"pipeline": [["SET", ...], ...]}    a pipeline; {"multi": [...]}: MULTI/EXEC
// Each line is answered by one JSON line on stdout, with the port of the server the
// client is connected to: {"reply": ..., "port": N} or {"error": text, "name": class,
// "port": N}. The client is closed when stdin is.
"use strict";

const readline = require("node:readline");
const Redis = require("ioredis");
const { failure, settled } = require("./common");

const client = new Redis(JSON.parse(process.argv[2]));
client.on("error", () => {}); // surfaced through the commands' own rejections

// Through ioredis' own method when it has one (client.hgetall(...)), so its reply
// transforms apply (HGETALL gives an object), else through client.call(...).
function send(target, [name, ...args]) {
  const method = target[name.toLowerCase()];
  return typeof method === "function" ? method.apply(target, args) : target.call(name, ...args);
}

function run(request) {
  if (Array.isArray(request)) return send(client, request);
  const [kind, commands] = Object.entries(request)[0];
  if (kind !== "pipeline" && kind !== "multi") throw new Error(`unknown request ${kind}`);
  const batch = client[kind]();
  commands.forEach((args) => send(batch, args));
  return batch.exec().then(settled);
}

async function answer(line) {
  let out;
  try {
    out = { reply: await run(JSON.parse(line)) };
  } catch (err) {
    out = failure(err);
  }
  out.port = client.stream ? client.stream.remotePort : null;
  process.stdout.write(JSON.stringify(out) + "\n");
}

(async () => {
  for await (const line of readline.createInterface({ input: process.stdin })) {
    if (line.trim()) await answer(line);
  }
  client.disconnect();
})();

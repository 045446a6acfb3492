// Shared by the scripts that tests/test_ioredis.py and the cluster tests run: each
// prints one JSON object on stdout (what ioredis returned, step by step) and exits;
// the Python side compares.
"use strict";

const Redis = require("ioredis");

// A failed step is kept as what the application sees: the error's class and text
// (and, for EXECABORT, the errors of the commands that made MULTI fail).
function failure(err) {
  const out = { error: err.message, name: err.name };
  if (err.previousErrors) out.previous = err.previousErrors.map((e) => e.message);
  return out;
}

// Runs the steps in order; each step's result (or failure) is kept under its name.
async function steps(list) {
  const out = {};
  for (const [name, fn] of list) {
    try {
      out[name] = await fn();
    } catch (err) {
      out[name] = failure(err);
    }
  }
  return out;
}

// Pipeline and MULTI results are [[err, value], ...]: keep the errors as failures.
function settled(results) {
  if (results === null) return null;
  return results.map(([err, value]) => (err ? failure(err) : value));
}

function waitFor(check, timeoutMs, what) {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + timeoutMs;
    const poll = () => {
      if (check()) return resolve();
      if (Date.now() > deadline) return reject(new Error(`timed out waiting for ${what}`));
      setTimeout(poll, 10);
    };
    poll();
  });
}

// Resolves once a Cluster client has learned the slot map; rejects if it ends first.
function clusterReady(cluster) {
  return new Promise((resolve, reject) => {
    cluster.once("ready", resolve);
    cluster.once("end", () => reject(new Error("the cluster client ended")));
  });
}

// Prints the result, closes every client, and exits non-zero on an unexpected error.
function main(run) {
  const clients = [];
  const connect = (options) => {
    const client = new Redis({ maxRetriesPerRequest: 1, connectTimeout: 5000, ...options });
    client.on("error", () => {}); // surfaced through the commands' own rejections
    clients.push(client);
    return client;
  };
  run(connect)
    .then((result) => {
      process.stdout.write(JSON.stringify(result) + "\n");
      clients.forEach((c) => c.disconnect());
    })
    .catch((err) => {
      process.stderr.write(`${err.stack || err}\n`);
      clients.forEach((c) => c.disconnect());
      process.exitCode = 1;
    });
}

module.exports = { steps, settled, failure, waitFor, main, clusterReady };

// node commands.js PORT: what ioredis makes of a server's replies (RESP2) to plain
// commands, a pipeline, MULTI/EXEC and pub/sub. Run against redis-server and
// TemporalStore, the two outputs must be identical.
"use strict";

const { steps, settled, waitFor, main } = require("./common");

main(async (connect) => {
  const port = Number(process.argv[2]);
  const p = "ioredis:"; // every key the script touches
  const r = connect({ port });
  await r.del(...(await r.keys(`${p}*`)), `${p}none`);
  const sorted = async (promise) => (await promise).sort();

  const plain = await steps([
    ["set", () => r.set(`${p}s`, "v1")],
    ["get", () => r.get(`${p}s`)],
    ["get-missing", () => r.get(`${p}none`)],
    ["set-nx", () => r.set(`${p}s`, "v2", "NX")],
    ["set-get", () => r.set(`${p}s`, "v2", "GET")],
    ["set-ex", () => r.set(`${p}e`, "x", "EX", 100)],
    ["ttl", () => r.ttl(`${p}e`)],
    ["incr", () => r.incr(`${p}n`)],
    ["incrby", () => r.incrby(`${p}n`, 41)],
    ["incrbyfloat", () => r.incrbyfloat(`${p}f`, "2.5")],
    ["incr-not-integer", () => r.incr(`${p}s`)],
    ["append", () => r.append(`${p}s`, "++")],
    ["getrange", () => r.getrange(`${p}s`, 0, 2)],
    ["mset", () => r.mset(`${p}m1`, "a", `${p}m2`, "b")],
    ["mget", () => r.mget(`${p}m1`, `${p}none`, `${p}m2`)],
    ["buffer", async () => {
      await r.set(`${p}bin`, Buffer.from([0, 255, 13, 10, 1]));
      return (await r.getBuffer(`${p}bin`)).toString("hex");
    }],
    ["hset", () => r.hset(`${p}h`, { a: "1", b: "2", c: "3" })],
    ["hgetall", () => r.hgetall(`${p}h`)],
    ["hgetall-missing", () => r.hgetall(`${p}none`)],
    ["hmget", () => r.hmget(`${p}h`, "a", "zz", "c")],
    ["hincrby", () => r.hincrby(`${p}h`, "a", 10)],
    ["hdel", () => r.hdel(`${p}h`, "b", "zz")],
    ["hkeys", () => sorted(r.hkeys(`${p}h`))],
    ["hvals", () => sorted(r.hvals(`${p}h`))],
    ["hlen", () => r.hlen(`${p}h`)],
    ["hexists", () => r.hexists(`${p}h`, "b")],
    ["wrongtype", () => r.get(`${p}h`)],
    ["rpush", () => r.rpush(`${p}l`, "x", "y", "z")],
    ["lpush", () => r.lpush(`${p}l`, "w")],
    ["lrange", () => r.lrange(`${p}l`, 0, -1)],
    ["lrange-missing", () => r.lrange(`${p}none`, 0, -1)],
    ["lindex", () => r.lindex(`${p}l`, -1)],
    ["linsert", () => r.linsert(`${p}l`, "BEFORE", "y", "y0")],
    ["lpos", () => r.lpos(`${p}l`, "z")],
    ["lpop-count", () => r.lpop(`${p}l`, 2)],
    ["rpop", () => r.rpop(`${p}l`)],
    ["lmove", () => r.lmove(`${p}l`, `${p}l2`, "LEFT", "RIGHT")],
    ["llen", () => r.llen(`${p}l2`)],
    ["zadd", () => r.zadd(`${p}z`, 1.5, "a", 2, "b", 3, "c", -1, "d")],
    ["zrange", () => r.zrange(`${p}z`, 0, -1)],
    ["zrange-withscores", () => r.zrange(`${p}z`, 0, -1, "WITHSCORES")],
    ["zrevrange-withscores", () => r.zrevrange(`${p}z`, 0, 1, "WITHSCORES")],
    ["zrangebyscore-limit", () =>
      r.zrangebyscore(`${p}z`, "(1", "+inf", "WITHSCORES", "LIMIT", 0, 2)],
    ["zrange-byscore-rev", () => r.zrange(`${p}z`, "+inf", 0, "BYSCORE", "REV")],
    ["zscore", () => r.zscore(`${p}z`, "a")],
    ["zmscore", () => r.zmscore(`${p}z`, "a", "zz", "c")],
    ["zincrby", () => r.zincrby(`${p}z`, "0.25", "a")],
    ["zrank", () => r.zrank(`${p}z`, "c")],
    ["zcard", () => r.zcard(`${p}z`)],
    ["zpopmin", () => r.zpopmin(`${p}z`)],
    ["zunionstore", () => r.zunionstore(`${p}zu`, 2, `${p}z`, `${p}z`, "WEIGHTS", 1, 2)],
    ["zrange-union", () => r.zrange(`${p}zu`, 0, -1, "WITHSCORES")],
    ["sadd", () => r.sadd(`${p}t`, "p", "q", "p")],
    ["smembers", () => sorted(r.smembers(`${p}t`))],
    ["sismember", () => r.sismember(`${p}t`, "q")],
    ["type", () => Promise.all(["s", "h", "l2", "z", "t", "none"].map((k) => r.type(p + k)))],
    ["exists", () => r.exists(`${p}s`, `${p}h`, `${p}none`)],
    ["scan", async () => {
      const keys = [];
      let cursor = "0";
      do {
        const [next, batch] = await r.scan(cursor, "MATCH", `${p}m*`, "COUNT", 100);
        keys.push(...batch);
        cursor = next;
      } while (cursor !== "0");
      return keys.sort();
    }],
    ["unknown", () => r.call("NOSUCHCOMMAND", "x")],
    ["arity", () => r.call("GET")],
    ["del", () => r.del(`${p}s`, `${p}none`)],
  ]);

  const pipeline = settled(
    await r
      .pipeline()
      .set(`${p}ps`, "1")
      .incr(`${p}ps`)
      .hset(`${p}ph`, "f", "v")
      .hgetall(`${p}ph`)
      .incr(`${p}ph`)
      .zadd(`${p}pz`, 1, "m")
      .zrange(`${p}pz`, 0, -1, "WITHSCORES")
      .get(`${p}ps`)
      .exec(),
  );

  const multi = settled(
    await r
      .multi()
      .set(`${p}ms`, "1")
      .incr(`${p}ms`)
      .hset(`${p}mh`, "f", "v")
      .hgetall(`${p}mh`)
      .lpush(`${p}ml`, "a", "b")
      .lrange(`${p}ml`, 0, -1)
      .incr(`${p}mh`) // fails at EXEC time; the others still run
      .exec(),
  );
  const multiAborted = await steps([
    ["exec", async () => settled(await r.multi().set(`${p}ma`, "1").call("GET").exec())],
    ["after", () => r.get(`${p}ma`)],
  ]);
  // WATCH: a key changed by another client between WATCH and EXEC aborts EXEC (null).
  const other = connect({ port });
  await r.watch(`${p}w`);
  await other.set(`${p}w`, "changed");
  const watched = await r.multi().set(`${p}w`, "mine").exec();
  const watchedValue = await r.get(`${p}w`);

  // Pub/sub: a channel and a pattern on one subscriber connection.
  const sub = connect({ port });
  const received = [];
  sub.on("message", (channel, message) => received.push(["message", channel, message]));
  sub.on("pmessage", (pattern, channel, message) =>
    received.push(["pmessage", pattern, channel, message]),
  );
  const pubsub = await steps([
    ["subscribe", () => sub.subscribe(`${p}ch1`, `${p}ch2`)],
    ["psubscribe", () => sub.psubscribe(`${p}ch*`)],
    ["refused-while-subscribed", () => sub.get(`${p}s`)],
    ["numsub", () => r.pubsub("NUMSUB", `${p}ch1`, `${p}none`)],
    ["numpat", () => r.pubsub("NUMPAT")],
    ["publish", () => r.publish(`${p}ch1`, "hello")],
    ["publish-pattern-only", () => r.publish(`${p}ch9`, "bye")],
    ["publish-nobody", () => r.publish(`${p}zzz`, "lost")],
    ["received", async () => {
      await waitFor(() => received.length >= 3, 5000, "3 pub/sub messages");
      return received.sort();
    }],
    ["unsubscribe", () => sub.unsubscribe(`${p}ch1`)],
    ["punsubscribe", () => sub.punsubscribe(`${p}ch*`)],
    ["publish-after", () => r.publish(`${p}ch1`, "again")],
  ]);

  return { plain, pipeline, multi, multiAborted, watched, watchedValue, pubsub };
});

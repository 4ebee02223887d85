// A Foxglove WebSocket client driven line by line: @foxglove/ws-protocol's FoxgloveClient
// over the `ws` package, as a Node program would use them.
//
// Usage: node client.js ws://HOST:PORT
// Prints one JSON object per line on stdout (events) and reads one per line on stdin
// (commands):
//   {"cmd":"subscribe","topic":T}   subscribes (prints {"ev":"subscribed",...}, or
//                                   {"ev":"no-such-topic"} when T is not advertised)
//   {"cmd":"subscribe-id","id":N}   subscribes to channel id N whatever it is
//   {"cmd":"unsubscribe","topic":T}
//   {"cmd":"stall"}                 stops reading the socket (the server's writes pile up)
//   {"cmd":"close"}                 closes and exits
// Messages of a channel with message encoding `json` are printed decoded ("json"), others
// as hex ("hex").
"use strict";
const { FoxgloveClient } = require("@foxglove/ws-protocol");
const WebSocket = require("ws");
const readline = require("readline");

const url = process.argv[2];
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
// The Foxglove SDK's server speaks the protocol's v1 under the subprotocol foxglove.sdk.v1.
const ws = new WebSocket(url, ["foxglove.sdk.v1"]);
const client = new FoxgloveClient({ ws });
const channels = new Map(); // id -> channel
const subscriptions = new Map(); // subscription id -> channel
const byTopic = new Map(); // topic -> subscription id

client.on("open", () => out({ ev: "open", protocol: ws.protocol }));
client.on("serverInfo", (i) => out({ ev: "serverInfo", name: i.name, capabilities: i.capabilities }));
client.on("status", (s) => out({ ev: "status", level: s.level, message: s.message }));
client.on("error", (e) => out({ ev: "error", message: String(e && e.message ? e.message : e) }));
client.on("close", (e) => {
  out({ ev: "close", code: e && e.code });
  process.exit(0);
});
client.on("advertise", (list) => {
  for (const c of list) channels.set(c.id, c);
  out({
    ev: "advertise",
    channels: list.map((c) => ({
      id: c.id,
      topic: c.topic,
      encoding: c.encoding,
      schemaName: c.schemaName,
      schemaEncoding: c.schemaEncoding === undefined ? null : c.schemaEncoding,
      schema: c.schema,
    })),
  });
});
client.on("unadvertise", (ids) => {
  const topics = ids.map((id) => (channels.get(id) || { topic: null }).topic);
  for (const id of ids) channels.delete(id);
  out({ ev: "unadvertise", topics });
});
client.on("message", (m) => {
  const ch = subscriptions.get(m.subscriptionId);
  const bytes = Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength);
  const ev = { ev: "message", topic: ch ? ch.topic : null, time: m.timestamp.toString(), len: bytes.length };
  if (ch && ch.encoding === "json") ev.json = JSON.parse(bytes.toString("utf8"));
  else if (bytes.length <= 4096) ev.hex = bytes.toString("hex");
  else ev.head = bytes.subarray(0, 16).toString("hex");
  out(ev);
});

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const c = JSON.parse(line);
  if (c.cmd === "subscribe") {
    const ch = [...channels.values()].find((x) => x.topic === c.topic);
    if (!ch) return out({ ev: "no-such-topic", topic: c.topic });
    const sub = client.subscribe(ch.id);
    subscriptions.set(sub, ch);
    byTopic.set(c.topic, sub);
    out({ ev: "subscribed", topic: c.topic, id: ch.id });
  } else if (c.cmd === "subscribe-id") {
    const sub = client.subscribe(c.id);
    subscriptions.set(sub, { topic: "#" + c.id, encoding: "" });
    out({ ev: "subscribed", topic: "#" + c.id, id: c.id });
  } else if (c.cmd === "unsubscribe") {
    client.unsubscribe(byTopic.get(c.topic));
    byTopic.delete(c.topic);
    out({ ev: "unsubscribed", topic: c.topic });
  } else if (c.cmd === "stall") {
    ws._socket.pause();
    out({ ev: "stalled" });
  } else if (c.cmd === "close") {
    client.close();
    setTimeout(() => process.exit(0), 200);
  }
});

// A hostile client: bytes that are not a WebSocket handshake, then a WebSocket (through
// `ws`) that sends garbage binary frames, text that is not JSON, JSON that is not a
// protocol message, subscriptions of nonsense, and one frame of 24 MiB (over the server's
// largest frame). Prints one JSON line per thing that happened, then {"ev":"done"}.
//
// Usage: node hostile.js ws://HOST:PORT
"use strict";
const WebSocket = require("ws");
const net = require("net");

const url = new URL(process.argv[2]);
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");

function rawGarbage() {
  return new Promise((resolve) => {
    const s = net.connect(Number(url.port), url.hostname, () => {
      s.write(Buffer.from("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: nonsense\r\n\r\n\x00\xff\xfe garbage"));
    });
    s.on("data", () => {});
    s.on("error", () => {});
    s.on("close", () => {
      out({ ev: "raw-closed" });
      resolve();
    });
    setTimeout(() => s.destroy(), 3000);
  });
}

function hostileWebSocket() {
  return new Promise((resolve) => {
    const ws = new WebSocket(url.href, ["foxglove.sdk.v1"], { maxPayload: 256 * 1024 * 1024 });
    ws.on("open", () => {
      out({ ev: "open" });
      ws.send(Buffer.from([0xff, 0x00, 0x13, 0x37, 0x42]));
      ws.send(Buffer.from([0x01, 0xff, 0xff, 0xff, 0xff]));
      ws.send("{ this is not json");
      ws.send(JSON.stringify({ op: "no-such-op" }));
      ws.send(JSON.stringify({ op: "subscribe", subscriptions: "nope" }));
      ws.send(JSON.stringify({ op: "subscribe", subscriptions: [{ id: 1, channelId: 999999 }] }));
      ws.send(JSON.stringify({ op: "unsubscribe", subscriptionIds: [12345] }));
      ws.send(Buffer.alloc(24 * 1024 * 1024, 0x41));
      out({ ev: "sent" });
    });
    ws.on("message", () => {});
    ws.on("error", (e) => out({ ev: "error", message: String(e.message) }));
    ws.on("close", (code) => {
      out({ ev: "closed", code });
      resolve();
    });
    setTimeout(() => ws.terminate(), 10000);
  });
}

rawGarbage()
  .then(hostileWebSocket)
  .then(() => {
    out({ ev: "done" });
    process.exit(0);
  });

#!/usr/bin/env node
// Launch adapter: stompit 1.0 (npm) as a Swaptacular STOMP client target
// (docs/stomp-adapter.md, "Client targets"; the same command-line contract
// as interop/stomp/client_contract.py):
//
//   node stompit-client.js --manifest stomp.toml --node-id ID --cert PEM
//        --key PEM --ca PEM --messages FILE [--timeout S]
//
// The adapter reads the manifest (servers, host, login, passcode,
// destination), puts the node id in for every ${NODE_ID}, and hands the
// rest to stompit: each manifest server becomes a server of a
// stompit.ConnectFailover (which picks among them at random), and the
// messages go through a stompit.Channel, stompit's own "publishing across
// failure events": Channel.send sends a SEND with a receipt and keeps it
// until its RECEIPT arrives, and when the connection fails the channel
// connects again (ConnectFailover's back-off) and sends every message not
// receipted yet. So connecting, framing, receipt ids, matching RECEIPTs and
// resending are stompit's doing, as the harness should see them.
//
// TLS: stompit's connect() calls Node's tls.connect with the server's
// options (`ssl: true`); the adapter passes the client certificate, the CA
// to verify the server chain against, minVersion TLSv1.3 (the profile's
// TLS 1.3) and a checkServerIdentity that accepts any name (the profile:
// verify the chain, not the hostname).
//
// Output: DELIVERED=<n> when stompit reports message n (its position in
// the messages file, from 0) receipted, then DONE delivered=<count>.
// Exit: 0 when every message was receipted, 1 when stompit gave up (an
// ERROR frame aborts the channel), 2 on bad arguments, 5 when --timeout
// ran out.
'use strict';

const fs = require('fs');
const path = require('path');
const { requireApi, requireLibrary } = require('./versioned-require');

// The pinned stompit, or a versioned target's release (docs/versions.md).
const loaded = requireLibrary('stompit');
const stompit = loaded.library;
requireApi('stompit', loaded.version, stompit, ['connect', 'ConnectFailover', 'Channel']);

const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;
const EXIT_TIMEOUT = 5;
const MAX_FILE_BYTES = 16 << 20;

class UsageError extends Error {}

function log(text) {
  process.stderr.write(text + '\n');
}

function readFile(file, what) {
  let data;
  try {
    data = fs.readFileSync(file);
  } catch (err) {
    throw new UsageError(`${what}: ${file}: ${err.message}`);
  }
  if (data.length > MAX_FILE_BYTES) {
    throw new UsageError(`${what}: ${file} is larger than ${MAX_FILE_BYTES} bytes`);
  }
  return data;
}

// The TOML the manifests use: `key = "basic string"` and
// `key = ["string", ...]` on one line each, comments, blank lines. Anything
// else is refused (exit 2) rather than guessed at.
function parseTomlString(text, where) {
  if (!/^"([^"\\\x00-\x1f]|\\["\\bfnrt\/]|\\u[0-9A-Fa-f]{4})*"$/.test(text)) {
    throw new UsageError(`--manifest: ${where}: not a TOML basic string: ${text}`);
  }
  return JSON.parse(text);
}

function parseManifest(text) {
  const values = {};
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = raw.replace(/^\s+|\s+$/g, '');
    if (line === '' || line.startsWith('#')) {
      return;
    }
    const match = /^([A-Za-z0-9_-]+|"[^"]*")\s*=\s*(.*?)\s*(#[^"\]]*)?$/.exec(line);
    if (!match) {
      throw new UsageError(`--manifest line ${index + 1}: not "key = value": ${raw}`);
    }
    const key = match[1].startsWith('"') ? JSON.parse(match[1]) : match[1];
    const value = match[2];
    if (value.startsWith('[')) {
      if (!value.endsWith(']')) {
        throw new UsageError(`--manifest line ${index + 1}: arrays must be on one line`);
      }
      const inner = value.slice(1, -1).trim();
      const items = inner === '' ? [] : (inner.match(/"(?:[^"\\]|\\.)*"|[^,\s][^,]*/g) || []);
      values[key] = items.map((item) => parseTomlString(item.trim(), key));
    } else if (value.startsWith('"')) {
      values[key] = parseTomlString(value, key);
    } else {
      values[key] = value; // numbers, booleans: kept as text, unused here
    }
  });
  return values;
}

// The text of member `key` of the JSON object on `line`, as written (the
// line is known to be valid JSON: JSON.parse took it).
function rawMember(line, key, index) {
  let pos = 0;
  const ws = () => {
    while (pos < line.length && ' \t\r\n'.includes(line[pos])) {
      pos += 1;
    }
  };
  const skipString = () => {
    pos += 1; // the opening quote
    while (line[pos] !== '"') {
      pos += line[pos] === '\\' ? 2 : 1;
    }
    pos += 1;
  };
  const skipValue = () => {
    const c = line[pos];
    if (c === '"') {
      skipString();
    } else if (c === '{' || c === '[') {
      let depth = 0;
      do {
        const d = line[pos];
        if (d === '"') {
          skipString();
          continue;
        }
        if (d === '{' || d === '[') {
          depth += 1;
        } else if (d === '}' || d === ']') {
          depth -= 1;
        }
        pos += 1;
      } while (depth > 0);
    } else {
      // a number, true, false or null
      while (pos < line.length && !',}] \t\r\n'.includes(line[pos])) {
        pos += 1;
      }
    }
  };
  ws();
  pos += 1; // {
  for (;;) {
    ws();
    const keyStart = pos;
    skipString();
    const name = JSON.parse(line.slice(keyStart, pos));
    ws();
    pos += 1; // :
    ws();
    const start = pos;
    skipValue();
    if (name === key) {
      return line.slice(start, pos);
    }
    ws();
    if (line[pos] !== ',') {
      throw new UsageError(`--messages line ${index + 1}: no member ${key}`);
    }
    pos += 1;
  }
}

// JSON text without the whitespace between its tokens (as Python's
// json.dumps(..., separators=(",", ":")) writes it), strings untouched.
function compactJson(text) {
  let out = '';
  for (let pos = 0; pos < text.length; pos += 1) {
    const c = text[pos];
    if (c === '"') {
      const start = pos;
      pos += 1;
      while (text[pos] !== '"') {
        pos += text[pos] === '\\' ? 2 : 1;
      }
      out += text.slice(start, pos + 1);
    } else if (!' \t\r\n'.includes(c)) {
      out += c;
    }
  }
  return out;
}

function address(entry) {
  if (typeof entry !== 'string' || !entry.includes(':')) {
    throw new UsageError(`--manifest: servers entry ${JSON.stringify(entry)} is not "host:port"`);
  }
  const cut = entry.lastIndexOf(':');
  let host = entry.slice(0, cut);
  const port = entry.slice(cut + 1);
  if (host.startsWith('[') && host.endsWith(']')) {
    host = host.slice(1, -1);
  }
  if (!/^\d+$/.test(port) || +port <= 0 || +port >= 65536 || !host) {
    throw new UsageError(`--manifest: servers entry ${JSON.stringify(entry)} is not "host:port"`);
  }
  return {host, port: +port};
}

function parseArgs(argv) {
  const wanted = ['manifest', 'node-id', 'cert', 'key', 'ca', 'messages'];
  const args = {timeout: '30'};
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i];
    if (!name.startsWith('--') || i + 1 >= argv.length) {
      throw new UsageError(`bad argument ${name}`);
    }
    const key = name.slice(2);
    if (!wanted.includes(key) && key !== 'timeout') {
      throw new UsageError(`unknown argument ${name}`);
    }
    args[key] = argv[i + 1];
  }
  for (const key of wanted) {
    if (args[key] === undefined) {
      throw new UsageError(`--${key} is required`);
    }
  }
  if (!/^\d+(\.\d+)?$/.test(args.timeout)) {
    throw new UsageError(`--timeout ${args.timeout} is not a number of seconds`);
  }
  const manifest = parseManifest(readFile(args.manifest, '--manifest').toString('utf-8'));
  const nodeId = args['node-id'];
  const value = (key, required) => {
    const text = manifest[key];
    if (text === undefined && !required) {
      return undefined;
    }
    if (typeof text !== 'string') {
      throw new UsageError(`--manifest: ${key} must be a string`);
    }
    return text.split('${NODE_ID}').join(nodeId);
  };
  if (!Array.isArray(manifest.servers) || manifest.servers.length === 0) {
    throw new UsageError('--manifest: servers must be a non-empty list');
  }
  const messages = [];
  readFile(args.messages, '--messages').toString('utf-8').split('\n').forEach((line, index) => {
    if (!line.trim()) {
      return;
    }
    let item;
    try {
      item = JSON.parse(line);
    } catch (err) {
      throw new UsageError(`--messages line ${index + 1}: not JSON: ${err.message}`);
    }
    if (item === null || typeof item !== 'object' || typeof item.type !== 'string'
        || item.body === null || typeof item.body !== 'object' || Array.isArray(item.body)) {
      throw new UsageError(`--messages line ${index + 1}: expected {"type": str, "body": object}`);
    }
    // The body's own JSON text, not JSON.stringify(item.body): SMP ids are
    // 64-bit integers, which a JavaScript number rounds (JSON.parse makes
    // 6183357608661993299 6183357608661993000).
    messages.push({type: item.type, body: Buffer.from(compactJson(rawMember(line, 'body', index)), 'utf-8')});
  });
  return {
    servers: manifest.servers.map(address),
    host: value('host', true),
    login: value('login', false),
    passcode: value('passcode', false),
    destination: value('destination', true),
    messages,
    cert: args.cert,
    key: args.key,
    ca: args.ca,
    timeout: parseFloat(args.timeout),
  };
}

function main() {
  let plan;
  try {
    plan = parseArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) {
      log(`error: ${err.message}`);
      process.exit(EXIT_USAGE);
    }
    throw err;
  }
  // The TLS files are read once the arguments are parsed, at the first turn
  // of the event loop (tests/harness/test_placeholder_types.py ends the
  // program there: the arguments alone are checked).
  setImmediate(() => {
    let tls;
    try {
      tls = {cert: readFile(plan.cert, '--cert'), key: readFile(plan.key, '--key'),
             ca: readFile(plan.ca, '--ca')};
    } catch (err) {
      if (err instanceof UsageError) {
        log(`error: ${err.message}`);
        process.exit(EXIT_USAGE);
      }
      throw err;
    }
    run(plan, tls);
  });
}

function run(plan, tlsFiles) {

  const connectHeaders = {host: plan.host};
  if (plan.login !== undefined) {
    connectHeaders.login = plan.login;
  }
  if (plan.passcode !== undefined) {
    connectHeaders.passcode = plan.passcode;
  }
  const servers = plan.servers.map(({host, port}) => ({
    host,
    port,
    ssl: true,
    ca: tlsFiles.ca,
    cert: tlsFiles.cert,
    key: tlsFiles.key,
    minVersion: 'TLSv1.3',
    checkServerIdentity: () => undefined,
    connectHeaders,
    timeout: 10000,
  }));

  // Every client the failover makes, so that the last one can be waited
  // for while it disconnects.
  const clients = [];
  const failover = new stompit.ConnectFailover(servers, {
    initialReconnectDelay: 100,
    maxReconnectDelay: 2000,
    connectFunction: (options, callback) => {
      const client = stompit.connect(options, callback);
      clients.push(client);
      return client;
    },
  });
  // The server an event is about, for the log. Releases before 0.20 emit
  // 'error' with the error alone and 'connect' with the connector function
  // (lib/ConnectFailover.js:183 and 195 in 0.18.3), later ones the server
  // object: reading its fields from what 0.18 emits crashed the adapter,
  // and the harness read that as the client sending nothing.
  const where = (server) => {
    const options = server && server.serverProperties && server.serverProperties.connectOptions;
    return options ? `${options.host}:${options.port}` : 'the server';
  };
  failover.on('error', (error, server) => {
    log(`connection to ${where(server)} failed: ${error.message}`);
  });
  failover.on('connect', (server) => {
    log(`connected to ${where(server)}`);
  });
  const channel = new stompit.Channel(failover);

  const delivered = new Set();
  let failed = null;
  let finished = false;

  const finish = (status) => {
    if (finished) {
      return;
    }
    finished = true;
    clearTimeout(deadline);
    process.stdout.write(`DONE delivered=${delivered.size}\n`);
    channel.close();
    // Let the last connection finish its DISCONNECT (stompit ends the
    // socket on its RECEIPT), within a bound.
    const last = clients[clients.length - 1];
    const leave = () => process.stdout.write('', () => process.exit(status));
    if (status === EXIT_OK && last && !last._destroyed) {
      last.once('end', leave);
      last.once('error', leave);
      setTimeout(leave, 3000).unref();
    } else {
      leave();
    }
  };

  const deadline = setTimeout(() => {
    log(`error: ${plan.messages.length - delivered.size} message(s) not receipted after ${plan.timeout} s`);
    finish(EXIT_TIMEOUT);
  }, plan.timeout * 1000);

  if (plan.messages.length === 0) {
    finish(EXIT_OK);
    return;
  }
  plan.messages.forEach((message, index) => {
    const headers = {
      destination: plan.destination,
      type: message.type,
      'content-type': 'application/json',
      persistent: 'true',
    };
    channel.send(headers, message.body, (error) => {
      if (error) {
        if (!failed) {
          failed = error;
          log(`error: stompit gave up on message ${index}: ${error.message}`
              + (error.longMessage ? ` (${error.longMessage.split('\n')[0]})` : ''));
          finish(EXIT_FAILED);
        }
        return;
      }
      if (!delivered.has(index)) {
        delivered.add(index);
        process.stdout.write(`DELIVERED=${index}\n`);
      }
      if (delivered.size === plan.messages.length) {
        finish(EXIT_OK);
      }
    });
  });
}

if (require.main === module) {
  main();
}

module.exports = {parseManifest, parseArgs, UsageError, moduleDir: path.dirname(require.resolve('stompit'))};

'use strict';
// Real rate-limiting servers from outside Go, for the bench module's
// TestInteropWithRealServers (realservers_test.go). Each argument is one
// server to start on a free loopback port, as JSON:
//
//   {"id": "c3", "server": "express-rate-limit", "mode": "draft-8",
//    "limit": 10, "windowMs": 1000}
//
// server is express-rate-limit, @fastify/rate-limit, koa-ratelimit,
// @nestjs/throttler or rate-limiter-flexible; mode
// is one of that server's configurations (see the tables below); every
// server limits each client address to limit requests per windowMs with
// its own store (in memory; for koa-ratelimit's Redis driver, keys of its
// own on the redis-server at "redis", host:port), in front of a handler that
// answers 200 "ok".
// Once every server listens, the script prints a line "listening ID PORT"
// for each, then "ready"; it runs until it is killed, or until its
// standard input closes (so a test that dies takes its servers with it).
// The servers pick their own ports: a port a test found free may be taken
// by the time a server binds it.

const express = require('express');
const { rateLimit } = require('express-rate-limit');
const Fastify = require('fastify');
const fastifyRateLimit = require('@fastify/rate-limit');
const Koa = require('koa');
const koaRatelimit = require('koa-ratelimit');
const { RateLimiterMemory } = require('rate-limiter-flexible');

// express-rate-limit: every header mode it offers (legacyHeaders,
// standardHeaders 'draft-6', 'draft-7', 'draft-8', and neither), over its
// MemoryStore: a fixed window per client that starts at the client's first
// request after the last window ended.
const expressModes = {
  legacy: { legacyHeaders: true, standardHeaders: false },
  'draft-6': { legacyHeaders: false, standardHeaders: 'draft-6' },
  'draft-7': { legacyHeaders: false, standardHeaders: 'draft-7' },
  'draft-8': { legacyHeaders: false, standardHeaders: 'draft-8' },
  none: { legacyHeaders: false, standardHeaders: false },
};

function startExpress(s) {
  const mode = expressModes[s.mode];
  if (!mode) throw new Error(`express-rate-limit: no mode ${s.mode}`);
  const app = express();
  app.use(rateLimit({ windowMs: s.windowMs, limit: s.limit, ...mode }));
  app.get('/', (_req, res) => res.type('text/plain').send('ok'));
  return new Promise((resolve, reject) => {
    const srv = app.listen(0, '127.0.0.1', (err) => (err ? reject(err) : resolve(srv.address().port)));
  });
}

// @fastify/rate-limit: its two header sets (x-ratelimit-* by default, the
// IETF draft's ratelimit-* with enableDraftSpec), and the two store
// behaviours that change what a refusal costs: continueExceeding (every
// refused request restarts the window) and exponentialBackoff (each refused
// request doubles the window).
const fastifyModes = {
  default: {},
  draft: { enableDraftSpec: true },
  'continue-exceeding': { continueExceeding: true },
  'exponential-backoff': { exponentialBackoff: true },
};

async function startFastify(s) {
  const mode = fastifyModes[s.mode];
  if (!mode) throw new Error(`@fastify/rate-limit: no mode ${s.mode}`);
  const app = Fastify({ logger: false });
  await app.register(fastifyRateLimit, { max: s.limit, timeWindow: s.windowMs, ...mode });
  app.get('/', async (_req, reply) => reply.type('text/plain').send('ok'));
  await app.listen({ port: 0, host: '127.0.0.1' });
  return app.server.address().port;
}

// koa-ratelimit: its memory driver (a fixed window per client from its
// first request; X-RateLimit-Reset in epoch seconds with a fraction) and
// its Redis driver, the default (async-ratelimiter: an exact sliding log in
// a sorted set; X-RateLimit-Reset in epoch seconds rounded down), each with
// its headers or with disableHeader (then only Retry-After, on refusals).
// Retry-After is the seconds to the reset, truncated.
const koaModes = {
  headers: { driver: 'memory' },
  'disable-header': { driver: 'memory', disableHeader: true },
  redis: { driver: 'redis' },
  'redis-disable-header': { driver: 'redis', disableHeader: true },
};

let Redis; // ioredis, loaded only when a Redis mode is asked for

function koaStore(s, mode) {
  if (mode.driver === 'memory') return { db: new Map() };
  if (typeof s.redis !== 'string' || !s.redis.includes(':')) {
    throw new Error(`koa-ratelimit: mode ${s.mode} needs "redis": "host:port"`);
  }
  Redis ??= require('ioredis');
  const i = s.redis.lastIndexOf(':');
  const db = new Redis({ host: s.redis.slice(0, i), port: Number(s.redis.slice(i + 1)), lazyConnect: false });
  return { db, namespace: `limit-${s.id}` };
}

function startKoa(s) {
  const mode = koaModes[s.mode];
  if (!mode) throw new Error(`koa-ratelimit: no mode ${s.mode}`);
  const app = new Koa();
  app.use(koaRatelimit({ ...koaStore(s, mode), duration: s.windowMs, max: s.limit, ...mode }));
  app.use((ctx) => {
    ctx.type = 'text/plain';
    ctx.body = 'ok';
  });
  return new Promise((resolve, reject) => {
    const srv = app.listen(0, '127.0.0.1');
    srv.once('listening', () => resolve(srv.address().port));
    srv.once('error', reject);
  });
}

// @nestjs/throttler, NestJS's own rate limiter, as its documentation sets
// it up: ThrottlerModule.forRoot with one throttler, and ThrottlerGuard as
// the application's guard. Its storage is a log (each hit leaves ttl after
// it came) under a window that starts at the first request, whose end
// X-RateLimit-Reset gives in whole seconds rounded up; the hit over the
// limit blocks the client for blockDuration (by default the ttl), during
// which every request is refused with Retry-After (the block's seconds
// left, rounded up), and the first request after the block starts the log
// over. A throttler named other than "default" suffixes every field with
// its name (X-RateLimit-Remaining-short, Retry-After-short); setHeaders
// false sends none (a bare 429).
const nestModes = {
  default: {},
  named: { name: 'short' },
  'no-headers': { setHeaders: false },
  // Several throttlers, as the documentation's example (short, medium and
  // long: 3 per 1 s, 20 per 10 s, 100 per 60 s), scaled to runs of a few
  // windows: "short" of the limit per window and "long" of three times
  // it per five windows, which binds. Each is kept apart, in the order of
  // their ttl; a request one blocks is not counted by those after it,
  // and its 429 carries the fields of those before it and its own
  // Retry-After-<name>.
  several: (s) => [
    { name: 'short', ttl: s.windowMs, limit: s.limit },
    { name: 'long', ttl: 5 * s.windowMs, limit: 3 * s.limit },
  ],
};

let nest; // NestJS, loaded only when a NestJS server is asked for

async function startNest(s) {
  const mode = nestModes[s.mode];
  if (!mode) throw new Error(`@nestjs/throttler: no mode ${s.mode}`);
  if (!nest) {
    require('reflect-metadata');
    nest = { ...require('@nestjs/common'), ...require('@nestjs/core'), ...require('@nestjs/throttler') };
  }
  // Decorators applied by hand: this file is plain JavaScript.
  class Root {
    get() {
      return 'ok';
    }
  }
  nest.Controller()(Root);
  nest.Get('/')(Root.prototype, 'get', Object.getOwnPropertyDescriptor(Root.prototype, 'get'));
  class App {}
  nest.Module({
    imports: [nest.ThrottlerModule.forRoot(typeof mode === 'function' ? mode(s) : [{ ttl: s.windowMs, limit: s.limit, ...mode }])],
    controllers: [Root],
    providers: [{ provide: nest.APP_GUARD, useClass: nest.ThrottlerGuard }],
  })(App);
  const app = await nest.NestFactory.create(App, { logger: false });
  await app.listen(0, '127.0.0.1');
  return app.getHttpServer().address().port;
}

// rate-limiter-flexible's RateLimiterMemory (a fixed window from a key's
// first request, in whole seconds) behind the Express middleware its wiki
// gives: a bare 429 ("bare"), or with the fields its README suggests, on
// every answer ("headers"): Retry-After as the window's milliseconds left
// over 1000 (a fraction, on successes too), X-RateLimit-Limit, -Remaining,
// and X-RateLimit-Reset in epoch seconds rounded up.
const flexibleModes = { bare: false, headers: true };

function startFlexible(s) {
  if (!(s.mode in flexibleModes)) throw new Error(`rate-limiter-flexible: no mode ${s.mode}`);
  if (s.windowMs % 1000 !== 0) throw new Error('rate-limiter-flexible: its duration is whole seconds');
  const withHeaders = flexibleModes[s.mode];
  const limiter = new RateLimiterMemory({ points: s.limit, duration: s.windowMs / 1000 });
  const headers = (res, r) => {
    if (!withHeaders) return;
    res.set({
      'Retry-After': r.msBeforeNext / 1000,
      'X-RateLimit-Limit': s.limit,
      'X-RateLimit-Remaining': r.remainingPoints,
      'X-RateLimit-Reset': Math.ceil((Date.now() + r.msBeforeNext) / 1000),
    });
  };
  const app = express();
  app.use((req, res, next) => {
    limiter
      .consume(req.ip)
      .then((r) => {
        headers(res, r);
        next();
      })
      .catch((r) => {
        if (r instanceof Error) return next(r);
        headers(res, r);
        res.status(429).send('Too Many Requests');
      });
  });
  app.get('/', (_req, res) => res.type('text/plain').send('ok'));
  return new Promise((resolve, reject) => {
    const srv = app.listen(0, '127.0.0.1', (err) => (err ? reject(err) : resolve(srv.address().port)));
  });
}

const starters = {
  'express-rate-limit': startExpress,
  '@fastify/rate-limit': startFastify,
  'koa-ratelimit': startKoa,
  '@nestjs/throttler': startNest,
  'rate-limiter-flexible': startFlexible,
};

async function main() {
  const specs = process.argv.slice(2).map((a) => JSON.parse(a));
  if (specs.length === 0) throw new Error('usage: node servers.js SPEC...');
  for (const s of specs) {
    if (!starters[s.server]) throw new Error(`no server ${s.server}`);
    if (!(typeof s.id === 'string' && /^[\w-]+$/.test(s.id) && Number.isInteger(s.limit) && s.limit > 0 &&
        Number.isInteger(s.windowMs) && s.windowMs > 0)) {
      throw new Error(`bad spec ${JSON.stringify(s)}`);
    }
  }
  const ports = await Promise.all(specs.map((s) => starters[s.server](s)));
  specs.forEach((s, i) => process.stdout.write(`listening ${s.id} ${ports[i]}\n`));
  process.stdout.write('ready\n');
}

process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
main().catch((err) => {
  process.stderr.write(`servers.js: ${err.stack || err}\n`);
  process.exit(1);
});

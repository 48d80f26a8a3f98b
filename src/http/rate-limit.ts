import type { FastifyReply } from 'fastify';
import { ErrorCode, NamespaceError } from '../model/errors.js';

// Per-principal rate limits: a token bucket per principal (callers without one, ANONYMOUS, share
// theirs per client address), refilled at `requestsPerSecond` up to `burst`. A request that finds
// its bucket empty is 429 code 21 with Retry-After (whole seconds until a token is back), before
// anything of it is read. Per process: behind N replicas a principal gets N times the rate.

export interface RateLimitOptions {
  requestsPerSecond: number;
  burst: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** Buckets kept at most; past it the ones refilled to the brim (idle callers) are dropped first. */
const MAX_BUCKETS = 100_000;

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly options: RateLimitOptions,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Takes a token for `caller`, or throws 429 code 21 with Retry-After set on `reply`. */
  take(caller: string, reply: FastifyReply): void {
    const now = this.now();
    const { requestsPerSecond: rate, burst } = this.options;
    const kept = this.buckets.get(caller);
    const bucket = kept ? { tokens: Math.min(burst, kept.tokens + ((now - kept.at) / 1000) * rate), at: now } : { tokens: burst, at: now };
    if (bucket.tokens < 1) {
      this.buckets.set(caller, bucket);
      const retryAfter = Math.max(1, Math.ceil((1 - bucket.tokens) / rate));
      reply.header('retry-after', String(retryAfter));
      throw new NamespaceError(ErrorCode.Throttling, `too many requests: at most ${rate} per second (bursts of ${burst}); retry after ${retryAfter} s`);
    }
    bucket.tokens -= 1;
    // Most recently used last, so that pruning meets the idle ones first.
    this.buckets.delete(caller);
    this.buckets.set(caller, bucket);
    if (this.buckets.size > MAX_BUCKETS) this.prune(now);
  }

  private prune(now: number): void {
    for (const [caller, bucket] of this.buckets) {
      if (this.buckets.size <= MAX_BUCKETS * 0.9) return;
      // A bucket that would be full again forgets nothing by going.
      if (bucket.tokens + ((now - bucket.at) / 1000) * this.options.requestsPerSecond >= this.options.burst) this.buckets.delete(caller);
    }
  }
}

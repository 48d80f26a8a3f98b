import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { parseManifestFileName } from '../../src/engine/lance-format/manifest-names.js';
import { ErrorCode } from '../../src/model/errors.js';
import { tableDirKey } from '../../src/service/catalog/layout.js';
import { listAll } from '../../src/store/object-store.js';
import { connectTable, readColumn } from '../support/arrow-data.js';
import { type Backend, backends, type TestRoot } from '../support/backends.js';
import { useClientCredentials } from '../support/client-credentials.js';
import { waitForGenevaJobRow } from '../support/jobs.js';
import { manifestBytes } from '../support/manifests.js';
import { INSTALL_TIMEOUT_MS, installPythonTestDeps } from '../support/python.js';
import { callUrl, rootArgs, type ServiceProcess, startServiceProcess } from '../support/service-process.js';
import { IN_DOUBT_HEADER, type Spreader, startSpreader } from '../support/spreader.js';
import { type PylanceWriter, startPylanceWriter, writerRows, writerSchema } from './replica-clients.js';

// Many replicas: three service processes on one root behind a client-side
// spreader (test/support/spreader.ts: round robin; a refused connection or a read is sent to the
// next replica, a mutation cut off by a dying replica is answered 502 "in doubt"), running a mixed
// concurrent workload bounded by a count of operations:
// - racing creates (three at once) of namespaces and tables; declares in batch commits;
// - managed commits from real clients: pylance processes (replica_writer.py) and @lancedb/lancedb
//   in this process append to one managed-versioning table through the spreader;
// - CreateTableVersion, BatchCreateTableVersions and BatchCommitTables on four tables, racing;
// - table and namespace drops, describes, exists, lists of tables, namespaces and versions;
// - one backfill job (AlterTableBackfillColumns);
// - branches of one managed table: racing creates (three at once) of new names, inserts on them,
//   deletes and lists, while main is never written.
// Halfway, the replica running the backfill job is SIGKILLed right after a request was sent to it,
// and restarted. Every acknowledged outcome is recorded on the client side; at the end:
// - no lost commit: every acknowledged version is in its table's history with the content that
//   was committed (the manifest's bytes; for the real clients, exactly the appended rows);
// - no duplicate name: no two creates of one name both acknowledged as new, and a 409 only for a
//   name that someone created, or that a create held and then failed on (it answered 409 "retry");
// - no "not found" (describe, exists, list, drop, version list) for something acknowledged before
//   the request was sent and with no drop sent before its answer;
// - the backfill job finished exactly once (one success; every run of it took it over properly),
//   and its column is right on every row.
// - no stale read: a row count or latest version read through any replica is at least what was
//   acknowledged before the read was sent.
// - branches: one create of a name acknowledged as new at most; a branch acknowledged and not
//   deleted is listed and holds exactly its fork's rows and its acknowledged inserts (an in-doubt
//   insert all or nothing, a refused one not at all); a deleted one is neither listed nor read;
//   no insert on a live branch is told it is not there; main keeps its rows and its one version.
// What a request answered "in doubt" did is decided from the catalog afterwards: a create took
// effect if the name exists and no other create of it was acknowledged; a commit took effect if
// its version holds its manifest's bytes (a batch: all of its entries or none, its declare too);
// an append took effect if its rows are in the table (all of them, in one version, or none).
// The workload never resends an in-doubt mutation. The real clients settle one themselves: told
// 502 for a create_table_version, pylance and @lancedb/lancedb ask for that version; theirs: the
// append succeeds; absent: they report the outcome unknown (client-in-doubt.test.ts pins both).

const require = createRequire(import.meta.url);
const lancedb = require('@lancedb/lancedb') as typeof import('@lancedb/lancedb');

const LEASE_MS = 1000;
const REPLICAS = 3;
/** Workload operations (a racing create is one operation of three requests). */
const OPS = 200;
const CONCURRENCY = 6;
/** The backfill starts at this operation and the kill follows; later operations wait for the kill. */
const KILL_AT = Math.floor(OPS / 2);
const KILL_BY = Math.floor((OPS * 3) / 4);
const PY_WRITERS = 2;
/** Appends per writer before the job is taken, and from then on (so that some meet the kill). */
const PY_PHASES = [3, 4];
const NODE_PHASES = [4, 5];
const ROWS_PER_APPEND = 2;
const SEED_IDS = [0, 1, 2];
const VERSION_TABLES = ['b0', 'b1', 'b2', 'b3'];
/** The managed table whose branches the workload creates, writes and deletes; main holds these ids and is never written. */
const BRANCHED: string[] = ['base', 'br'];
const BRANCHED_SEED = 5;
const BRANCH_INSERT_ROWS = 3;
const BF_ROWS = 40_000;
const BF_CHUNK = 1_000;
const RUN_TIMEOUT_MS = 180_000;

const enc = (id: string[]) => encodeURIComponent(id.join('$'));
const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/** A small deterministic PRNG (mulberry32), so every run draws the same sequence of operations. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Rows {id: int64, x: int64 = id % 97} for `ids`, as an Arrow IPC stream. */
function idsStream(ids: number[]): Buffer {
  const id = BigInt64Array.from(ids, (i) => BigInt(i));
  const xs = BigInt64Array.from(ids, (i) => BigInt(i % 97));
  return Buffer.from(arrow.tableToIPC(new arrow.Table({ id: arrow.vectorFromArray(id), x: arrow.vectorFromArray(xs) }), 'stream'));
}

/** Rows for ids [0, n) (see idsStream). */
const numbersStream = (n: number): Buffer => idsStream(range(0, n));

interface Answer {
  status: number;
  json: Record<string, unknown>;
  text: string;
  inDoubt: boolean;
}

/** One call through the spreader. */
async function call(spreader: Spreader, method: 'GET' | 'POST', path: string, body?: unknown, headers?: Record<string, string>): Promise<Answer> {
  const { status, json, text, headers: answered } = await callUrl(spreader.url, method, path, body, headers);
  return { status, json, text, inDoubt: answered.get(IN_DOUBT_HEADER) === 'in-doubt' };
}

/** Polls `check` until it returns a value (or throws at the deadline). */
async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 90_000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** A namespace or table whose create the workload attempted; what the replicas answered about it. */
interface Entity {
  kind: 'namespace' | 'table';
  id: string[];
  created: number;
  /** Creates answered 409 because the name is taken: someone created it. */
  conflicts: number;
  /** What each such 409 said (printed with a violation about them). */
  conflictTexts: string[];
  /**
   * What creates answered 409 code 14 ("retry") said: the create held the name's claim and failed
   * (another request took the claim over once its lease ran out under load, or Lance reported a
   * conflict), clearing what it wrote. Evidence of nothing, but it explains the other creates' 409s:
   * they were answered while this one held the name.
   */
  failedClaims: string[];
  inDoubt: number;
  /** Logical time of the first acknowledged create, and of the first drop sent. */
  ackedAt?: number;
  dropSentAt?: number;
  dropAcked?: boolean;
  dropInDoubt?: boolean;
}

/** A commit of versions (one entry for CreateTableVersion), and the table a batch commit declared. */
interface Commit {
  entries: Array<{ table: string; version: number; bytes: Buffer }>;
  declared?: string[];
}

/** A branch of BRANCHED whose create the workload attempted, and what was done to it. */
interface BranchRecord {
  name: string;
  /** Creates acknowledged as new; answered 409 code 23 (the name taken); 409 code 14 (a create that failed holding the name); in doubt. */
  created: number;
  conflicts: string[];
  failedClaims: number;
  inDoubt: number;
  ackedAt?: number;
  deleteSentAt?: number;
  deleteAcked?: boolean;
  /** Inserts on it: acknowledged, in doubt (all or nothing), or refused (nothing). */
  inserts: Array<{ ids: number[]; outcome: 'acked' | 'in-doubt' | 'refused' }>;
}

interface Append {
  writer: string;
  ids: number[];
  /** Logical time the client reported it. */
  at: number;
  version?: number;
  error?: string;
}

/** Everything the client side saw, and the figures of the run. */
class Ledger {
  clock = 0;
  readonly entities = new Map<string, Entity>();
  readonly ackedVersions = new Map<string, Map<number, { bytes: Buffer; at: number }>>();
  readonly inDoubtCommits: Commit[] = [];
  readonly appends: Append[] = [];
  readonly branches = new Map<string, BranchRecord>();
  /** Deleted branches (acknowledged) whose tree/<name>/ still holds objects at the end. */
  leftTrees: string[] = [];
  readonly violations: string[] = [];
  readonly unexpected: string[] = [];
  readonly ops: Record<string, number> = {};
  nameConflicts = 0;
  /** The 409 code 14 answers to creates (Entity.failedClaims), each with its create. */
  readonly failedClaims: string[] = [];
  versionConflicts = 0;
  gaveUp = 0;
  /** Failed appends whose rows the table holds after all. */
  failedAppendsLanded = 0;

  tick(): number {
    return ++this.clock;
  }

  count(kind: string): void {
    this.ops[kind] = (this.ops[kind] ?? 0) + 1;
  }

  entity(kind: Entity['kind'], id: string[]): Entity {
    const key = `${kind}:${id.join('$')}`;
    let e = this.entities.get(key);
    if (!e) {
      e = { kind, id, created: 0, conflicts: 0, conflictTexts: [], failedClaims: [], inDoubt: 0 };
      this.entities.set(key, e);
    }
    return e;
  }

  /** A create's answer, into the entity's record. */
  created(e: Entity, a: Answer, what: string): void {
    if (a.status === 200) {
      e.created++;
      e.ackedAt ??= this.tick();
    } else if (a.status === 409 && a.json.code === ErrorCode.ConcurrentModification) {
      e.failedClaims.push(a.text);
      this.failedClaims.push(`${what}: ${a.text}`);
    } else if (a.status === 409) {
      e.conflicts++;
      e.conflictTexts.push(a.text);
      this.nameConflicts++;
    } else if (a.inDoubt) e.inDoubt++;
    else this.unexpected.push(`${what}: ${a.status} ${a.text}`);
  }

  /** A 404 about `e` sent at `sentAt`: a violation unless it was not yet acknowledged or a drop was sent before the answer. */
  notFound(e: Entity, sentAt: number, what: string): void {
    // A drop in the ledger was sent before this answer arrived.
    const dropped = e.dropSentAt !== undefined;
    if (e.ackedAt !== undefined && e.ackedAt < sentAt && !dropped)
      this.violations.push(`${what}: 404 for ${e.kind} ${e.id.join('$')}, acknowledged at ${e.ackedAt}, asked at ${sentAt}`);
  }

  versionAcked(table: string, version: number, bytes: Buffer): void {
    let m = this.ackedVersions.get(table);
    if (!m) {
      m = new Map();
      this.ackedVersions.set(table, m);
    }
    const before = m.get(version);
    if (before && !before.bytes.equals(bytes)) this.violations.push(`two commits acknowledged as version ${version} of ${table}`);
    m.set(version, { bytes, at: this.tick() });
  }

  /** Acknowledged and with no drop sent. */
  live(kind: Entity['kind']): Entity[] {
    return [...this.entities.values()].filter((e) => e.kind === kind && e.ackedAt !== undefined && e.dropSentAt === undefined);
  }

  /** Branches acknowledged and with no delete sent. */
  liveBranches(): BranchRecord[] {
    return [...this.branches.values()].filter((b) => b.ackedAt !== undefined && b.deleteSentAt === undefined);
  }
}

/** Runs the workload and the checks on one backend, and prints the summary line. */
class ReplicaRun {
  readonly ledger = new Ledger();
  readonly processes: ServiceProcess[] = [];
  readonly slots: ServiceProcess[] = [];
  readonly live = new Set<ChildProcess>();
  spreader!: Spreader;
  /** Next version to try, per version table (a guess, corrected after a conflict). */
  readonly next = new Map<string, number>(VERSION_TABLES.map((t) => [t, 1]));
  /** Draws the kind of each operation (in operation order), and, apart, the targets. */
  private readonly kindRng = prng(11);
  private readonly rng = prng(12);
  private seq = 0;
  jobId = '';
  kill: { slot: number; inFlight: number; chunksDone: number; downMs: number } | undefined;

  constructor(
    readonly backend: Backend,
    readonly root: TestRoot,
  ) {}

  call(method: 'GET' | 'POST', path: string, body?: unknown, headers?: Record<string, string>): Promise<Answer> {
    return call(this.spreader, method, path, body, headers);
  }

  start(): Promise<ServiceProcess> {
    return startServiceProcess({ args: rootArgs(this.root, LEASE_MS), live: this.live }).then((p) => {
      this.processes.push(p);
      return p;
    });
  }

  async setUp(): Promise<void> {
    this.spreader = await startSpreader(REPLICAS);
    const started = await Promise.all(range(0, REPLICAS).map(() => this.start()));
    started.forEach((p, slot) => {
      this.slots[slot] = p;
      this.spreader.setSlot(slot, p.url);
    });
    const must = async (what: string, a: Promise<Answer>, status = 200) => {
      const got = await a;
      if (got.status !== status) throw new Error(`setup ${what}: ${got.status} ${got.text}`);
      return got;
    };
    await must('base', this.call('POST', '/v1/namespace/base/create', { properties: { managed_versioning: 'true' } }));
    for (const ns of ['vers', 'plain', 'jobs']) await must(ns, this.call('POST', `/v1/namespace/${ns}/create`, {}));
    for (const t of VERSION_TABLES) await must(t, this.call('POST', `/v1/table/${enc(['vers', t])}/declare`, {}));
    await must(
      'base$br',
      this.call('POST', `/v1/table/${enc(BRANCHED)}/create`, numbersStream(BRANCHED_SEED), { 'content-type': 'application/vnd.apache.arrow.stream' }),
    );
    await must(
      'jobs$bf',
      this.call('POST', `/v1/table/${enc(['jobs', 'bf'])}/create`, numbersStream(BF_ROWS), { 'content-type': 'application/vnd.apache.arrow.stream' }),
    );
    await must(
      'add v',
      this.call('POST', `/v1/table/${enc(['jobs', 'bf'])}/add_columns`, { new_columns: [{ name: 'v', expression: 'CAST(NULL AS BIGINT)' }] }),
    );
    await must(
      'bind v',
      this.call('POST', `/v1/table/${enc(['jobs', 'bf'])}/alter_columns`, {
        alterations: [{ path: 'v', virtual_column: { udf_backend: 'sql', udf: 'id * 3 + x' } }],
      }),
    );
    for (const [kind, id] of [
      ['namespace', ['base']],
      ['namespace', ['vers']],
      ['namespace', ['plain']],
      ['namespace', ['jobs']],
      ['table', ['jobs', 'bf']],
      ['table', BRANCHED],
      ...VERSION_TABLES.map((t) => ['table', ['vers', t]]),
    ] as Array<[Entity['kind'], string[]]>) {
      const e = this.ledger.entity(kind, id);
      e.created = 1;
      e.ackedAt = this.ledger.tick();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The workload's operations
  // ---------------------------------------------------------------------------------------------

  private pick<T>(items: T[]): T | undefined {
    return items.length === 0 ? undefined : items[Math.floor(this.rng() * items.length)];
  }

  private async raceCreate(kind: Entity['kind']): Promise<void> {
    const n = ++this.seq;
    const id = kind === 'namespace' ? [`n${n}`] : ['plain', `t${n}`];
    const e = this.ledger.entity(kind, id);
    const path = kind === 'namespace' ? `/v1/namespace/${enc(id)}/create` : `/v1/table/${enc(id)}/create`;
    const body = kind === 'namespace' ? {} : numbersStream(3);
    const headers: Record<string, string> = kind === 'namespace' ? {} : { 'content-type': 'application/vnd.apache.arrow.stream' };
    const answers = await Promise.all(range(0, 3).map(() => this.call('POST', path, body, headers)));
    for (const a of answers) this.ledger.created(e, a, `create ${kind} ${id.join('$')}`);
    if (e.created > 1) this.ledger.violations.push(`${kind} ${id.join('$')}: ${e.created} creates acknowledged as new`);
  }

  private async describe(): Promise<void> {
    const kind = this.rng() < 0.4 ? 'namespace' : 'table';
    const e = this.pick(this.ledger.live(kind));
    if (!e) return;
    const verb = this.rng() < 0.3 ? 'exists' : 'describe';
    const sentAt = this.ledger.tick();
    const a = await this.call('POST', `/v1/${kind}/${enc(e.id)}/${verb}`, {});
    if (a.status === 404) this.ledger.notFound(e, sentAt, `${verb} ${kind}`);
    else if (a.status !== 200) this.ledger.unexpected.push(`${verb} ${kind} ${e.id.join('$')}: ${a.status} ${a.text}`);
  }

  /** Every name of a paged list. */
  private async listAll(path: string, field: 'tables' | 'namespaces' | 'versions'): Promise<unknown[] | undefined> {
    const out: unknown[] = [];
    let token: string | undefined;
    for (let page = 0; page < 200; page++) {
      const sep = path.includes('?') ? '&' : '?';
      const a = await this.call('GET', `${path}${sep}limit=7${token ? `&page_token=${encodeURIComponent(token)}` : ''}`);
      if (a.status !== 200) {
        this.ledger.unexpected.push(`list ${path}: ${a.status} ${a.text}`);
        return undefined;
      }
      out.push(...((a.json[field] as unknown[] | undefined) ?? []));
      token = (a.json.page_token as string | null | undefined) ?? undefined;
      if (!token) return out;
    }
    throw new Error(`list ${path}: more than 200 pages`);
  }

  private async list(): Promise<void> {
    const tables = this.rng() < 0.6;
    const startedAt = this.ledger.tick();
    const names = await this.listAll(tables ? '/v1/namespace/plain/table/list' : '/v1/namespace/%24/list', tables ? 'tables' : 'namespaces');
    if (!names) return;
    const listed = new Set(names as string[]);
    const expected = [...this.ledger.entities.values()].filter((e) => (tables ? e.kind === 'table' && e.id[0] === 'plain' : e.kind === 'namespace'));
    for (const e of expected) {
      const name = e.id[e.id.length - 1] as string;
      const dropped = e.dropSentAt !== undefined;
      if (e.ackedAt !== undefined && e.ackedAt < startedAt && !dropped && !listed.has(name))
        this.ledger.violations.push(`list: ${e.kind} ${e.id.join('$')} missing (acknowledged at ${e.ackedAt}, listed at ${startedAt})`);
    }
    const known = new Set(expected.map((e) => e.id[e.id.length - 1]));
    // The service creates __system itself, for the backfill job's row in Geneva's job table.
    if (!tables) known.add('__system');
    for (const name of listed) if (!known.has(name)) this.ledger.violations.push(`list: ${name} listed, but nobody created it`);
  }

  private async drop(kind: Entity['kind']): Promise<void> {
    const e = this.pick(this.ledger.live(kind).filter((x) => /^[nt]\d+$/.test(x.id[x.id.length - 1] as string)));
    if (!e) return;
    const sentAt = this.ledger.tick();
    e.dropSentAt = sentAt;
    const a = await this.call('POST', `/v1/${kind}/${enc(e.id)}/drop`, {});
    if (a.status === 200) e.dropAcked = true;
    else if (a.inDoubt) e.dropInDoubt = true;
    else if (a.status === 404) {
      // The only drop of it, of something acknowledged before: nothing else removed it.
      this.ledger.violations.push(`drop ${kind}: 404 for ${e.id.join('$')}, acknowledged at ${String(e.ackedAt)}, dropped at ${sentAt}`);
    } else this.ledger.unexpected.push(`drop ${kind} ${e.id.join('$')}: ${a.status} ${a.text}`);
  }

  /** Stages a manifest of `version` in a version table; returns the path relative to the table. */
  private async stage(table: string, version: number): Promise<{ table: string; version: number; bytes: Buffer; manifestPath: string }> {
    const bytes = manifestBytes(version);
    const manifestPath = `_versions/${version}.manifest-${randomUUID()}`;
    await this.root.store.put(`${tableDirKey({ namespace: ['vers'], name: table })}${manifestPath}`, bytes);
    return { table, version, bytes, manifestPath };
  }

  /** The latest version of a version table, as the service lists it (0 before the first). */
  private async latest(table: string): Promise<number> {
    const a = await this.call('GET', `/v1/table/${enc(['vers', table])}/version/list?descending=true&limit=1`);
    if (a.status !== 200) {
      this.ledger.unexpected.push(`latest version of ${table}: ${a.status} ${a.text}`);
      return (this.next.get(table) ?? 1) - 1;
    }
    return (a.json.versions as Array<{ version: number }>)[0]?.version ?? 0;
  }

  /**
   * One commit of versions (`kind`: a single CreateTableVersion, a BatchCreateTableVersions, or a
   * BatchCommitTables with a declare), retried at the next versions after a conflict.
   */
  private async commit(kind: 'single' | 'batch' | 'batch-commit'): Promise<void> {
    const count = kind === 'batch' ? 2 : 1;
    const tables = [...VERSION_TABLES].sort(() => this.rng() - 0.5).slice(0, count);
    const declared = kind === 'batch-commit' ? ['plain', `c${++this.seq}`] : undefined;
    // Known before it is sent: a list may show it while the commit is in flight.
    if (declared) this.ledger.entity('table', declared);
    for (let attempt = 0; attempt < 8; attempt++) {
      const staged = await Promise.all(tables.map((t) => this.stage(t, this.next.get(t) ?? 1)));
      let a: Answer;
      if (kind === 'single') {
        const [s] = staged as [(typeof staged)[number]];
        a = await this.call('POST', `/v1/table/${enc(['vers', s.table])}/version/create`, { version: s.version, manifest_path: s.manifestPath });
      } else if (kind === 'batch') {
        a = await this.call('POST', '/v1/table/version/batch-create', {
          entries: staged.map((s) => ({ id: ['vers', s.table], version: s.version, manifest_path: s.manifestPath })),
        });
      } else {
        const operations = [
          { declare_table: { id: declared } },
          ...staged.map((s) => ({ create_table_version: { id: ['vers', s.table], version: s.version, manifest_path: s.manifestPath } })),
        ];
        a = await this.call('POST', '/v1/table/batch-commit', { operations });
      }
      if (a.status === 200) {
        for (const s of staged) {
          this.ledger.versionAcked(s.table, s.version, s.bytes);
          this.next.set(s.table, Math.max(this.next.get(s.table) ?? 1, s.version + 1));
        }
        if (declared) this.ledger.created(this.ledger.entity('table', declared), a, 'declare');
        return;
      }
      if (a.inDoubt) {
        this.ledger.inDoubtCommits.push({ entries: staged.map(({ table, version, bytes }) => ({ table, version, bytes })), ...(declared ? { declared } : {}) });
        if (declared) this.ledger.entity('table', declared).inDoubt++;
        for (const s of staged) this.next.set(s.table, s.version + 1);
        return;
      }
      if (a.status !== 409) {
        this.ledger.unexpected.push(`${kind} commit of ${staged.map((s) => `${s.table}@${s.version}`).join(', ')}: ${a.status} ${a.text}`);
        return;
      }
      this.ledger.versionConflicts++;
      for (const t of tables) this.next.set(t, (await this.latest(t)) + 1);
      // A slot held by a writer that died is free again once its lease runs out.
      await new Promise((r) => setTimeout(r, 20 * 2 ** attempt));
    }
    this.ledger.gaveUp++;
  }

  /** Lists a version table's versions: every version acknowledged before must be there. */
  private async listVersions(): Promise<void> {
    const table = this.pick(VERSION_TABLES) as string;
    const startedAt = this.ledger.tick();
    const versions = (await this.listAll(`/v1/table/${enc(['vers', table])}/version/list`, 'versions')) as Array<{ version: number }> | undefined;
    if (!versions) return;
    const listed = new Set(versions.map((v) => v.version));
    for (const [v, { at }] of this.ledger.ackedVersions.get(table) ?? []) {
      if (at < startedAt && !listed.has(v))
        this.ledger.violations.push(`version list of ${table}: version ${v} missing (acknowledged at ${at}, listed at ${startedAt})`);
    }
  }

  /**
   * Reads the latest state through whichever replica the spreader picks: no replica may answer
   * older than a write acknowledged before the read was sent (no stale cache): the managed
   * table's row count, or a version table's latest version.
   */
  private async readLatest(): Promise<void> {
    const startedAt = this.ledger.tick();
    if (this.rng() < 0.5) {
      const atLeast = SEED_IDS.length + sum(this.ledger.appends.filter((a) => a.version !== undefined && a.at < startedAt).map((a) => a.ids.length));
      const a = await this.call('POST', `/v1/table/${enc(['base', 'shared'])}/count_rows`, {});
      if (a.status !== 200) this.ledger.unexpected.push(`count_rows of shared: ${a.status} ${a.text}`);
      else if (Number(a.text) < atLeast) this.ledger.violations.push(`count_rows of shared: ${a.text}, but ${atLeast} rows were acknowledged before`);
      return;
    }
    const table = this.pick(VERSION_TABLES) as string;
    const atLeast = Math.max(0, ...[...(this.ledger.ackedVersions.get(table) ?? [])].filter(([, { at }]) => at < startedAt).map(([v]) => v));
    if (atLeast === 0) return;
    const a = await this.call('POST', `/v1/table/${enc(['vers', table])}/version/describe`, {});
    const latest = (a.json.version as { version?: number } | undefined)?.version;
    if (a.status !== 200) this.ledger.unexpected.push(`latest version of ${table}: ${a.status} ${a.text}`);
    else if ((latest ?? 0) < atLeast) this.ledger.violations.push(`latest version of ${table}: ${String(latest)}, but ${atLeast} was acknowledged before`);
  }

  private branchPath(op: string, query = ''): string {
    return `/v1/table/${enc(BRANCHED)}/${op}${query}`;
  }

  /** Three creates of a new branch of BRANCHED at once, from main's latest: one is acknowledged as new at most. */
  private async raceBranchCreate(): Promise<void> {
    const name = `b${++this.seq}`;
    const b: BranchRecord = { name, created: 0, conflicts: [], failedClaims: 0, inDoubt: 0, inserts: [] };
    this.ledger.branches.set(name, b);
    const answers = await Promise.all(range(0, 3).map(() => this.call('POST', this.branchPath('branches/create'), { name })));
    for (const a of answers) {
      if (a.status === 200) {
        b.created++;
        b.ackedAt ??= this.ledger.tick();
      } else if (a.status === 409 && a.json.code === ErrorCode.TableBranchAlreadyExists) b.conflicts.push(a.text);
      else if (a.status === 409 && a.json.code === ErrorCode.ConcurrentModification) b.failedClaims++;
      else if (a.inDoubt) b.inDoubt++;
      else this.ledger.unexpected.push(`create branch ${name}: ${a.status} ${a.text}`);
    }
    if (b.created > 1) this.ledger.violations.push(`branch ${name}: ${b.created} creates acknowledged as new`);
  }

  /** An insert of new ids on a live branch: a 404 code 22 is a violation unless its delete was sent before the answer. */
  private async branchInsert(): Promise<void> {
    const b = this.pick(this.ledger.liveBranches());
    if (!b) return;
    const ids = range(10_000 + BRANCH_INSERT_ROWS * ++this.seq, BRANCH_INSERT_ROWS);
    const a = await this.call('POST', this.branchPath('insert', `?branch=${b.name}`), idsStream(ids), {
      'content-type': 'application/vnd.apache.arrow.stream',
    });
    if (a.status === 200) b.inserts.push({ ids, outcome: 'acked' });
    else if (a.inDoubt) b.inserts.push({ ids, outcome: 'in-doubt' });
    else if (a.status === 404 && a.json.code === ErrorCode.TableBranchNotFound) {
      b.inserts.push({ ids, outcome: 'refused' });
      if (b.deleteSentAt === undefined) this.ledger.violations.push(`insert on branch ${b.name}: 404 code 22, though it was acknowledged and never deleted`);
    } else if (a.status === 409 && a.json.code === ErrorCode.ConcurrentModification) b.inserts.push({ ids, outcome: 'refused' });
    else this.ledger.unexpected.push(`insert on branch ${b.name}: ${a.status} ${a.text}`);
  }

  /** The only delete of a live branch. */
  private async branchDelete(): Promise<void> {
    const b = this.pick(this.ledger.liveBranches());
    if (!b) return;
    b.deleteSentAt = this.ledger.tick();
    const a = await this.call('POST', this.branchPath('branches/delete'), { name: b.name });
    if (a.status === 200) b.deleteAcked = true;
    else if (a.status === 404) this.ledger.violations.push(`delete of branch ${b.name}: 404, though it was acknowledged and this is its only delete`);
    else if (!a.inDoubt) this.ledger.unexpected.push(`delete of branch ${b.name}: ${a.status} ${a.text}`);
  }

  /** Every branch of BRANCHED, a page of 7 at a time (undefined after an unexpected answer). */
  private async listBranches(): Promise<Set<string> | undefined> {
    const names = new Set<string>();
    let token: string | undefined;
    for (let page = 0; page < 200; page++) {
      const a = await this.call('GET', this.branchPath('branches/list', `?limit=7${token ? `&page_token=${encodeURIComponent(token)}` : ''}`));
      if (a.status !== 200) {
        this.ledger.unexpected.push(`list branches: ${a.status} ${a.text}`);
        return undefined;
      }
      for (const name of Object.keys((a.json.branches as Record<string, unknown> | undefined) ?? {})) names.add(name);
      token = (a.json.page_token as string | null | undefined) ?? undefined;
      if (!token) return names;
    }
    throw new Error('list branches: more than 200 pages');
  }

  /** The listing holds every branch acknowledged before it began and not deleted, and none nobody created. */
  private async branchList(): Promise<void> {
    const startedAt = this.ledger.tick();
    const listed = await this.listBranches();
    if (!listed) return;
    for (const b of this.ledger.branches.values()) {
      if (b.ackedAt !== undefined && b.ackedAt < startedAt && b.deleteSentAt === undefined && !listed.has(b.name))
        this.ledger.violations.push(`list branches: ${b.name} missing (acknowledged at ${b.ackedAt}, listed at ${startedAt})`);
    }
    for (const name of listed) if (!this.ledger.branches.has(name)) this.ledger.violations.push(`list branches: ${name} listed, but nobody created it`);
  }

  private async operation(i: number): Promise<void> {
    const r = this.kindRng();
    if (i === KILL_AT) return;
    const kinds: Array<[number, string, () => Promise<void>]> = [
      [0.08, 'create namespace x3', () => this.raceCreate('namespace')],
      [0.08, 'create table x3', () => this.raceCreate('table')],
      [0.12, 'describe/exists', () => this.describe()],
      [0.07, 'list', () => this.list()],
      [0.05, 'drop table', () => this.drop('table')],
      [0.03, 'drop namespace', () => this.drop('namespace')],
      [0.09, 'create version', () => this.commit('single')],
      [0.1, 'batch create versions', () => this.commit('batch')],
      [0.07, 'batch commit', () => this.commit('batch-commit')],
      [0.05, 'read latest', () => this.readLatest()],
      [0.06, 'create branch x3', () => this.raceBranchCreate()],
      [0.09, 'insert on a branch', () => this.branchInsert()],
      [0.04, 'delete branch', () => this.branchDelete()],
      [0.03, 'list branches', () => this.branchList()],
      [0.04, 'list versions', () => this.listVersions()],
    ];
    let acc = 0;
    for (const [weight, kind, run] of kinds) {
      acc += weight;
      if (r < acc || kind === 'list versions') {
        this.ledger.count(kind);
        await run();
        return;
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The backfill job and the kill
  // ---------------------------------------------------------------------------------------------

  /**
   * Starts the backfill job, then SIGKILLs the replica that took it, once the job has checkpointed
   * a chunk, right after a request was sent to that replica; restarts it in its slot. The real
   * clients' second phase starts when the job is taken.
   */
  private async backfillAndKill(phaseTwo: () => void): Promise<void> {
    this.ledger.count('backfill');
    const started = await this.call('POST', `/v1/table/${enc(['jobs', 'bf'])}/backfill_column`, { column: 'v', checkpoint_size: BF_CHUNK });
    if (started.status !== 202) throw new Error(`backfill_column: ${started.status} ${started.text}`);
    this.jobId = String(started.json.job_id);
    const taken = (p: ServiceProcess) => p.lines.some((l) => l.msg === 'backfill job taken' && l.job === this.jobId);
    const slot = await until(
      'the job to be taken',
      async () => {
        const s = this.slots.findIndex(taken);
        return s >= 0 ? s : undefined;
      },
      30_000,
      10,
    );
    phaseTwo();
    const chunksDone = await until(
      "the job's first checkpoint",
      async () => {
        const job = await this.storedJob();
        return job.job.chunks_done >= 1 || job.status !== 'Running' ? job.job.chunks_done : undefined;
      },
      60_000,
      10,
    );
    const victim = this.slots[slot] as ServiceProcess;
    await this.spreader.nextSentTo(slot);
    victim.child.kill('SIGKILL');
    const inFlight = this.spreader.inFlight(slot);
    // The spreader is not told: it meets refused connections until the restart, and retries them.
    const downAt = Date.now();
    await victim.exited;
    const restarted = await this.start();
    this.slots[slot] = restarted;
    this.spreader.setSlot(slot, restarted.url);
    this.kill = { slot, inFlight, chunksDone, downMs: Date.now() - downAt };
  }

  async storedJob(): Promise<{ status: string; job: { chunks_done: number; attempts: number } }> {
    const got = await this.root.store.get(`_catalog/transactions/${this.jobId}.json`);
    if (!got) throw new Error(`no record of job ${this.jobId}`);
    return JSON.parse(got.body.toString('utf8')) as { status: string; job: { chunks_done: number; attempts: number } };
  }

  // ---------------------------------------------------------------------------------------------
  // Real clients
  // ---------------------------------------------------------------------------------------------

  private startPythonWriter(index: number): PylanceWriter {
    const writer = `py${index}`;
    const config = {
      url: this.spreader.url,
      table_id: ['base', 'shared'],
      writer,
      first_id: 1000 * (index + 1),
      phases: PY_PHASES,
      rows_per_append: ROWS_PER_APPEND,
    };
    return startPylanceWriter(
      config,
      this.root,
      (r) =>
        this.ledger.appends.push({
          writer,
          ids: range(r.first, r.count),
          at: this.ledger.tick(),
          ...(r.version !== undefined ? { version: r.version } : {}),
          ...(r.error !== undefined ? { error: r.error } : {}),
        }),
      this.live,
    );
  }

  /** @lancedb/lancedb appends from this process, one after another. */
  private async nodeWriter(db: import('@lancedb/lancedb').Connection, phaseTwo: Promise<void>): Promise<void> {
    const table = await db.openTable('shared', ['base']);
    try {
      for (let i = 0; i < sum(NODE_PHASES); i++) {
        if (i === NODE_PHASES[0]) await phaseTwo;
        const ids = range(100 + i * ROWS_PER_APPEND, ROWS_PER_APPEND);
        try {
          const { version } = await table.add(writerRows(ids, 'node'));
          this.ledger.appends.push({ writer: 'node', ids, version, at: this.ledger.tick() });
        } catch (e) {
          this.ledger.appends.push({ writer: 'node', ids, error: e instanceof Error ? e.message : String(e), at: this.ledger.tick() });
        }
      }
    } finally {
      table.close();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The run
  // ---------------------------------------------------------------------------------------------

  async run(): Promise<void> {
    const restoreEnv = useClientCredentials(this.root);
    const db = await lancedb.connectNamespace('rest', { uri: this.spreader.url });
    try {
      (await db.createTable('shared', writerRows(SEED_IDS, 'seed'), ['base'], { schema: writerSchema })).close();
      const e = this.ledger.entity('table', ['base', 'shared']);
      e.created = 1;
      e.ackedAt = this.ledger.tick();
      const writers = range(0, PY_WRITERS).map((i) => this.startPythonWriter(i));
      await Promise.all(writers.map((w) => w.ready));

      const startedAt = Date.now();
      const go = () => {
        for (const w of writers) w.go();
      };
      go();
      let startPhaseTwo = () => {};
      const phaseTwo = new Promise<void>((resolve) => (startPhaseTwo = resolve));
      void phaseTwo.then(go);
      let killed: Promise<void> = new Promise(() => {});
      let nextOp = 0;
      const worker = async () => {
        for (let i = nextOp++; i < OPS; i = nextOp++) {
          if (i === KILL_AT) killed = this.backfillAndKill(startPhaseTwo);
          if (i >= KILL_BY) await killed;
          await this.operation(i);
        }
      };
      const workload = Promise.all(range(0, CONCURRENCY).map(() => worker()));
      await Promise.all([workload, this.nodeWriter(db, phaseTwo), ...writers.map((w) => w.done)]);
      await killed;
      const workloadMs = Date.now() - startedAt;

      try {
        await this.settle();
        await this.check();
      } finally {
        console.log(this.summary(workloadMs, Date.now() - startedAt));
      }
    } finally {
      db.close();
      restoreEnv();
    }
  }

  /** Waits for the job to end and for every replica to have finished what the dead one left. */
  private async settle(): Promise<void> {
    await until(
      'the job to finish',
      async () => {
        const a = await this.call('POST', `/v1/transaction/${this.jobId}/describe`, {});
        return ['Succeeded', 'Failed', 'Canceled'].includes(String(a.json.status)) ? true : undefined;
      },
      120_000,
      100,
    );
    await until(
      'no unfinished batch and no reserved version slot',
      async () => {
        const left = [...(await listAll(this.root.store, '_catalog/batches/')).objects];
        for (const t of VERSION_TABLES) {
          for (const o of (await listAll(this.root.store, `${tableDirKey({ namespace: ['vers'], name: t })}_catalog/reservations/`)).objects) {
            // A single writer killed after its answer leaves its hold behind (service/versions/after-answer.ts): once expired it holds nothing up.
            const held = await this.root.store.get(o.key);
            const hold = held ? (JSON.parse(held.body.toString('utf8')) as { transaction_id?: string; expires_at?: string }) : null;
            if (hold && !hold.transaction_id && Date.parse(hold.expires_at ?? '') < Date.now()) continue;
            left.push(o);
          }
        }
        return left.length === 0 ? true : undefined;
      },
      60_000,
      100,
    );
  }

  // ---------------------------------------------------------------------------------------------
  // The invariants
  // ---------------------------------------------------------------------------------------------

  private async check(): Promise<void> {
    const { ledger } = this;
    expect(this.kill, 'the replica was killed').toBeDefined();
    expect(this.kill?.inFlight, 'requests in flight to the replica when it was killed').toBeGreaterThanOrEqual(1);
    await this.checkNames();
    await this.checkVersionTables();
    await this.checkAppends();
    await this.checkJob();
    await this.checkBranches();
    // Joined, so that a failure prints each answer in full.
    expect(ledger.unexpected.join('\n'), 'answers no client should get').toBe('');
    expect(this.spreader.stats.unreachable, 'requests with no replica to take them').toBe(0);
    expect(ledger.violations, 'invariants broken').toEqual([]);
  }

  /** No duplicate name; what exists at the end agrees with what was acknowledged. */
  private async checkNames(): Promise<void> {
    for (const e of this.ledger.entities.values()) {
      const name = `${e.kind} ${e.id.join('$')}`;
      const exists = (await this.call('POST', `/v1/${e.kind}/${enc(e.id)}/exists`, {})).status === 200;
      if (e.created > 1) this.ledger.violations.push(`${name}: ${e.created} creates acknowledged as new`);
      if (e.dropAcked) {
        if (exists) this.ledger.violations.push(`${name}: dropped (acknowledged) but exists`);
      } else if (e.created === 1 && !e.dropInDoubt) {
        if (!exists) this.ledger.violations.push(`${name}: created (acknowledged), never dropped, but gone`);
      } else if (e.created === 0 && e.inDoubt === 0) {
        if (exists) this.ledger.violations.push(`${name}: exists, but no create of it was acknowledged or in doubt`);
        // A 409 for a name that ends up free is explained only by a create that held it and failed.
        if (e.conflicts > 0 && e.failedClaims.length === 0)
          this.ledger.violations.push(`${name}: ${e.conflicts} creates answered 409, but nobody created it: ${e.conflictTexts.join(' | ')}`);
      }
    }
  }

  /** Every version of the version tables: 1..latest, each the bytes of an acknowledged or in-doubt commit; in-doubt commits all or nothing. */
  private async checkVersionTables(): Promise<void> {
    const final = new Map<string, Map<number, Buffer>>();
    for (const t of VERSION_TABLES) {
      const prefix = `${tableDirKey({ namespace: ['vers'], name: t })}_versions/`;
      const byVersion = new Map<number, Buffer>();
      for (const o of (await listAll(this.root.store, prefix)).objects) {
        const version = parseManifestFileName(o.key.slice(prefix.length))?.version;
        if (version === undefined) continue; // staged or foreign
        if (byVersion.has(version)) this.ledger.violations.push(`${t}: two final manifests of version ${version}`);
        const body = (await this.root.store.get(o.key))?.body;
        if (body) byVersion.set(version, body);
      }
      final.set(t, byVersion);
      const latest = Math.max(0, ...byVersion.keys());
      const listed = ((await this.listAll(`/v1/table/${enc(['vers', t])}/version/list`, 'versions')) ?? []) as Array<{ version: number }>;
      expect(
        listed.map((v) => v.version).sort((a, b) => a - b),
        `versions of ${t}`,
      ).toEqual(range(1, latest));
      for (const [v, { bytes }] of this.ledger.ackedVersions.get(t) ?? []) {
        if (!byVersion.get(v)?.equals(bytes)) this.ledger.violations.push(`${t}: acknowledged version ${v} lost or overwritten`);
      }
      const inDoubt = this.ledger.inDoubtCommits.flatMap((c) => c.entries).filter((x) => x.table === t);
      for (const [v, bytes] of byVersion) {
        const acked = this.ledger.ackedVersions.get(t)?.get(v)?.bytes.equals(bytes);
        if (!acked && !inDoubt.some((x) => x.version === v && x.bytes.equals(bytes)))
          this.ledger.violations.push(`${t}: version ${v} holds a manifest nobody committed`);
      }
    }
    for (const c of this.ledger.inDoubtCommits) {
      const landed = c.entries.map((x) => final.get(x.table)?.get(x.version)?.equals(x.bytes) === true);
      if (c.declared) {
        const e = this.ledger.entity('table', c.declared);
        landed.push(e.created === 1 || (await this.call('POST', `/v1/table/${enc(c.declared)}/exists`, {})).status === 200);
      }
      if (new Set(landed).size > 1)
        this.ledger.violations.push(
          `in-doubt commit ${JSON.stringify(c.entries.map((x) => `${x.table}@${x.version}`))}${c.declared ? ` + declare ${c.declared.join('$')}` : ''} took effect in part: ${landed.join(', ')}`,
        );
    }
  }

  /** The real clients' appends: each acknowledged one is exactly the rows its version added; in-doubt ones all or nothing. */
  private async checkAppends(): Promise<void> {
    const { appends } = this.ledger;
    expect(appends.length, 'appends reported').toBe(PY_WRITERS * sum(PY_PHASES) + sum(NODE_PHASES));
    const failed = appends.filter((a) => a.error !== undefined);
    for (const a of failed) if (/not.?found|404/i.test(a.error ?? '')) this.ledger.violations.push(`append of ${a.writer}: ${a.error}`);
    // Every failed append is one a dying replica cut off (the spreader answered it in doubt).
    expect(failed.length, JSON.stringify(failed)).toBeLessThanOrEqual(this.spreader.stats.inDoubt.length);

    const described = await this.call('POST', `/v1/table/${enc(['base', 'shared'])}/describe`, {});
    expect(described.status, described.text).toBe(200);
    const listed = ((await this.listAll(`/v1/table/${enc(['base', 'shared'])}/version/list`, 'versions')) ?? []) as Array<{ version: number }>;
    const versions = listed.map((v) => v.version).sort((a, b) => a - b);
    const latest = versions[versions.length - 1] ?? 0;
    expect(versions, "the managed table's history").toEqual(range(1, latest));

    const table = await connectTable(String(described.json.location), this.root.store.engineStorageOptions());
    try {
      const idsAt = async (v: number): Promise<number[]> => {
        await table.checkout(v);
        const data = await table.query().select(['id']).toArrow();
        const col = data.getChild('id');
        return Array.from({ length: data.numRows }, (_, i) => Number(col?.get(i) as bigint));
      };
      let before = await idsAt(1);
      expect(before.sort((a, b) => a - b)).toEqual(SEED_IDS);
      const addedBy = new Map<number, number[]>();
      for (let v = 2; v <= latest; v++) {
        const now = await idsAt(v);
        const had = new Set(before);
        if (now.length !== new Set(now).size) this.ledger.violations.push(`shared@${v}: a row twice`);
        if (before.some((id) => !now.includes(id))) this.ledger.violations.push(`shared@${v}: rows of version ${v - 1} gone`);
        addedBy.set(
          v,
          now.filter((id) => !had.has(id)).sort((a, b) => a - b),
        );
        before = now;
      }
      const key = (ids: number[]) => ids.join(',');
      const claimed = new Set<number>();
      for (const a of appends) {
        const landedAt = [...addedBy].filter(([, ids]) => key(ids) === key(a.ids)).map(([v]) => v);
        if (a.version !== undefined) {
          if (key(addedBy.get(a.version) ?? []) !== key(a.ids))
            this.ledger.violations.push(
              `append of ${a.writer} acknowledged as version ${a.version}, which added ${key(addedBy.get(a.version) ?? [])} instead of ${key(a.ids)}`,
            );
          claimed.add(a.version);
        } else if (landedAt.length > 1) this.ledger.violations.push(`in-doubt append of ${a.writer} landed ${landedAt.length} times`);
        else if (landedAt.length === 0 && a.ids.some((id) => before.includes(id))) this.ledger.violations.push(`in-doubt append of ${a.writer} landed in part`);
        for (const v of landedAt) claimed.add(v);
        if (a.version === undefined) this.ledger.failedAppendsLanded += landedAt.length;
      }
      for (const v of addedBy.keys()) if (!claimed.has(v)) this.ledger.violations.push(`shared@${v} added rows no append wrote: ${key(addedBy.get(v) ?? [])}`);
    } finally {
      table.close();
    }
  }

  /** The backfill job: finished once, Succeeded, its column right on every row. */
  private async checkJob(): Promise<void> {
    const described = await this.call('POST', `/v1/transaction/${this.jobId}/describe`, {});
    expect(described.json.status, described.text).toBe('Succeeded');
    const lines = (msg: string) => this.processes.flatMap((p) => p.lines.filter((l) => l.msg === msg && l.job === this.jobId));
    expect(lines('backfill job succeeded'), 'the job succeeded exactly once').toHaveLength(1);
    const stored = await this.storedJob();
    expect(stored.status).toBe('Succeeded');
    // Taken by the replica that died, then again by a survivor (or the restarted one); every take logged.
    expect(stored.job.attempts).toBeGreaterThanOrEqual(2);
    expect(lines('backfill job taken')).toHaveLength(stored.job.attempts);
    expect(await this.root.store.head(`_catalog/jobs/${this.jobId}.json`)).toBeNull();
    const location = String((await this.call('POST', `/v1/table/${enc(['jobs', 'bf'])}/describe`, {})).json.location);
    const rows = await readColumn(location, this.root.store.engineStorageOptions(), 'v');
    expect(rows.length).toBe(BF_ROWS);
    expect(rows.filter((r) => r.v !== r.id * 3 + r.x).slice(0, 5)).toEqual([]);
    // Geneva's row of the job: exactly one, DONE, though the replica that took it first was killed.
    const jobTable = String((await this.call('POST', '/v1/table/__system%24geneva_jobs/describe', {})).json.location);
    expect((await waitForGenevaJobRow(jobTable, this.root.store.engineStorageOptions(), this.jobId, 'DONE')).status).toBe('DONE');
  }

  /** The branches of BRANCHED at the end (see the header), and main untouched. */
  private async checkBranches(): Promise<void> {
    const { ledger } = this;
    const listed = await this.listBranches();
    if (!listed) return;
    const described = await this.call('POST', `/v1/table/${enc(BRANCHED)}/describe`, {});
    expect(described.status, described.text).toBe(200);
    const location = String(described.json.location);
    const idsOn = async (branch?: string): Promise<number[]> => {
      const table = await connectTable(location, this.root.store.engineStorageOptions(), branch);
      try {
        const data = await table.query().select(['id']).toArrow();
        const col = data.getChild('id');
        return Array.from({ length: data.numRows }, (_, i) => Number(col?.get(i) as bigint)).sort((a, b) => a - b);
      } finally {
        table.close();
      }
    };
    const seed = range(0, BRANCHED_SEED);
    expect(await idsOn(), "main's rows").toEqual(seed);
    const mainVersions = ((await this.listAll(`/v1/table/${enc(BRANCHED)}/version/list`, 'versions')) ?? []) as Array<{ version: number }>;
    expect(
      mainVersions.map((v) => v.version),
      "main's history",
    ).toEqual([1]);
    const treeOf = (name: string) => `${tableDirKey({ namespace: BRANCHED.slice(0, -1), name: BRANCHED.at(-1) as string })}tree/${name}/`;
    for (const b of ledger.branches.values()) {
      if (b.deleteAcked) {
        if (listed.has(b.name)) ledger.violations.push(`branch ${b.name}: deleted (acknowledged) but listed`);
        const read = await this.call('POST', this.branchPath('count_rows'), { branch: b.name });
        if (read.status !== 404 || read.json.code !== ErrorCode.TableBranchNotFound)
          ledger.violations.push(`branch ${b.name}: deleted (acknowledged) but read: ${read.status} ${read.text}`);
        if ((await listAll(this.root.store, treeOf(b.name))).objects.length > 0) ledger.leftTrees.push(b.name);
      } else if (b.created === 1 && b.deleteSentAt === undefined) {
        if (!listed.has(b.name)) {
          ledger.violations.push(`branch ${b.name}: created (acknowledged), never deleted, but not listed`);
          continue;
        }
        const ids = new Set(await idsOn(b.name));
        const expected = [...seed, ...b.inserts.filter((x) => x.outcome === 'acked').flatMap((x) => x.ids)];
        for (const id of expected) if (!ids.has(id)) ledger.violations.push(`branch ${b.name}: row ${id}, acknowledged, is not there`);
        for (const x of b.inserts) {
          const landed = x.ids.filter((id) => ids.has(id)).length;
          if (x.outcome === 'refused' && landed > 0) ledger.violations.push(`branch ${b.name}: refused insert of ${x.ids.join(',')} landed`);
          if (x.outcome === 'in-doubt' && landed !== 0 && landed !== x.ids.length)
            ledger.violations.push(`branch ${b.name}: in-doubt insert of ${x.ids.join(',')} landed in part`);
        }
        const written = new Set([...seed, ...b.inserts.flatMap((x) => x.ids)]);
        for (const id of ids) if (!written.has(id)) ledger.violations.push(`branch ${b.name}: row ${id}, which no insert on it wrote`);
      } else if (b.created === 0 && b.inDoubt === 0) {
        if (listed.has(b.name)) ledger.violations.push(`branch ${b.name}: listed, but no create of it was acknowledged or in doubt`);
        // A 409 for a name that ends up free is explained only by a create that held it and failed.
        if (b.conflicts.length > 0 && b.failedClaims === 0)
          ledger.violations.push(`branch ${b.name}: ${b.conflicts.length} creates answered 409, but nobody created it: ${b.conflicts.join(' | ')}`);
      }
    }
  }

  summary(workloadMs: number, totalMs: number): string {
    const short = (request: string) => decodeURIComponent(request.replace(/^POST \/v1\//, '').replace(/\?.*$/, ''));
    const { ledger, spreader, kill } = this;
    const ops = Object.entries(ledger.ops)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, n]) => `${k} ${n}`)
      .join(', ');
    const appends = ledger.appends;
    const s = spreader.stats;
    return (
      `replicas on ${this.backend.name}: ${REPLICAS} replicas, ${OPS} operations (${ops}), ` +
      `${appends.length} real-client appends (${appends.filter((a) => a.writer.startsWith('py')).length} pylance, ${appends.filter((a) => a.writer === 'node').length} lancedb; ${appends.filter((a) => a.error).length} failed, of which ${ledger.failedAppendsLanded} landed); ` +
      `${s.requests} requests (by replica slot ${s.answeredBy.join('/')}); conflicts: ${ledger.nameConflicts} name (${ledger.failedClaims.length} creates failed holding the name's claim), ${ledger.versionConflicts} version (${ledger.gaveUp} commits gave up); ` +
      `retries ${s.retriedRefused + s.retriedReads} (${s.retriedRefused} refused, ${s.retriedReads} reads cut off); in doubt ${s.inDoubt.length} (${s.inDoubt.map(short).join(', ')}; resent by their client: ${s.inDoubtResent.length}); ` +
      `branches: ${ledger.branches.size} names raced, ${[...ledger.branches.values()].filter((b) => b.created === 1).length} created, ` +
      `${sum([...ledger.branches.values()].map((b) => b.inserts.length))} inserts on them (${sum([...ledger.branches.values()].map((b) => b.inserts.filter((x) => x.outcome === 'refused').length))} refused), ` +
      `${[...ledger.branches.values()].filter((b) => b.deleteAcked).length} deleted (trees left behind: ${ledger.leftTrees.join(' ') || 'none'}); ` +
      `SIGKILL of slot ${kill?.slot} with ${kill?.inFlight} requests in flight at job chunk ${kill?.chunksDone}, back in ${kill?.downMs} ms; ` +
      `workload ${(workloadMs / 1000).toFixed(1)} s, with settling and checks ${(totalMs / 1000).toFixed(1)} s; violations ${ledger.violations.length}` +
      ledger.failedClaims.map((text) => `\n  ${text.slice(0, 400)}`).join('') +
      appends
        .filter((a) => a.error !== undefined)
        .map((a) => `\n  failed append of ${a.writer} (ids ${a.ids.join(',')}): ${a.error?.slice(0, 400) ?? ''}`)
        .join('')
    );
  }
}

describe.each(backends())('three replicas on one root ($name), one SIGKILLed and restarted mid-run', (backend) => {
  let run: ReplicaRun | undefined;
  beforeAll(async () => {
    await installPythonTestDeps();
    run = new ReplicaRun(backend, await backend.newRoot());
    await run.setUp();
  }, INSTALL_TIMEOUT_MS + 120_000);
  afterAll(async () => {
    if (!run) return;
    for (const child of run.live) child.kill('SIGKILL');
    await run.spreader?.close();
    await run.root.dispose();
  });

  it('a mixed workload: nothing acknowledged is lost, no duplicate name, no stale "not found", the job finishes once', {
    timeout: RUN_TIMEOUT_MS,
  }, async () => {
    if (!run) throw new Error('no run');
    await run.run();
  });
});

import type { ManifestNamingScheme } from '../../engine/lance-format/manifest-names.js';
import { ErrorCode, invalidInput, NamespaceError } from '../../model/errors.js';
import type { CreateTableVersionEntry, TableVersion } from '../../model/versions.js';
import { type ObjectInfo, PreconditionFailedError, type StoredObject } from '../../store/object-store.js';
import { displayId } from '../catalog/catalog.js';
import { faultPoint } from '../coordination/fault-points.js';
import type { BatchEntry } from '../transactions/transaction-log.js';
import type { VersionLine } from './branch-versions.js';
import type { CommittedVersion, TableVersions, VersionSidecar } from './dataset-versions.js';

// The steps every commit of a version takes, single (single-commit.ts) or batch (batch-commit.ts).
//
// Invariants (of every line of history: main and each branch, see branch-versions.ts):
// - A version is committed by one create-if-absent of its final manifest name, so an
//   acknowledged version is never overwritten and of two writers of one version exactly one wins
//   (the other gets 409 code 14 and Lance rebases).
// - Only version latest + 1 may be created, so the history has no gaps (a line's first version:
//   nextVersionOn in branch-versions.ts).
// - Only a staged manifest is ever consumed: a staging name under the line's own `_versions/`
//   holding a Lance manifest of the requested version (TableVersions.stagedKey, readStaged),
//   checked before any reservation, record or marker is written, so a create can never delete a
//   committed manifest, a data file, an index or a record.
// - Every writer of version v, single or batch, first holds v's slot (version-slots.ts): nothing
//   of v is placed (made visible) without holding it; files written before, out of sight
//   (beginWrites), are placed only holding it, or discarded.
// - A version's sidecar and Lance's hint are placed only after its manifest's create-if-absent
//   succeeded and is durable (startWrites): never a sidecar without its manifest, nor one
//   describing another writer's. A version whose sidecar would say nothing its manifest's object
//   does not has none (needsNoSidecar): what Lance's clients commit, on a local disk.

export const conflict = (message: string) => new NamespaceError(ErrorCode.ConcurrentModification, message);

/** A version create request resolved against its dataset. */
export interface PlannedVersion {
  entry: BatchEntry;
  versions: TableVersions;
  /** The staged object as validated (a Lance manifest of entry.version); null when the staged file is gone. */
  staged?: StoredObject | null;
}

/**
 * Resolves a version request against a line of history of table `id` (the request's `branch`,
 * which the caller resolved into `line`). Without a naming scheme in the request, the scheme of
 * the line's latest version is used: `latest` when the caller knows it (null: no version yet),
 * else one lookup here.
 */
export async function planVersion(
  id: string[],
  line: VersionLine,
  request: Omit<CreateTableVersionEntry, 'id'>,
  latest?: CommittedVersion | null,
): Promise<PlannedVersion> {
  const { versions } = line;
  const stagedKey = versions.stagedKey(request.manifest_path);
  const current =
    request.naming_scheme === undefined || request.naming_scheme === null || request.naming_scheme === 'V1'
      ? latest === undefined
        ? await versions.latest()
        : latest
      : null;
  // Names only ever move from V1 to V2 (Lance's migration), never back: that is what lets the
  // latest version of a V2 table be read off one LIST (TableVersions.latest).
  if (request.naming_scheme === 'V1' && current?.scheme === 'V2') {
    throw invalidInput(`naming_scheme: table ${displayId(id)} names its versions V2 (the latest is ${current.version}); a V1 name would hide behind them`);
  }
  const scheme: ManifestNamingScheme = request.naming_scheme ?? current?.scheme ?? 'V2';
  return {
    versions,
    entry: {
      table_id: id,
      location: line.dataDir.store.location(line.dataDir.key),
      ...(line.branch !== null ? { branch: line.branch } : {}),
      version: request.version,
      staged_key: stagedKey,
      final_key: versions.finalKey(request.version, scheme),
      naming_scheme: scheme,
      ...(request.manifest_size !== undefined && request.manifest_size !== null ? { manifest_size: request.manifest_size } : {}),
      ...(request.e_tag ? { e_tag: request.e_tag } : {}),
      ...(request.metadata ? { metadata: request.metadata } : {}),
    },
  };
}

/** A version's staged manifest is not there, nor the version committed: 400 to a request; to a batch's roll-forward, see BatchRecovery.writeEntry. */
export class StagedManifestMissing extends NamespaceError {}

export function stagedMissing(p: PlannedVersion): StagedManifestMissing {
  return new StagedManifestMissing(ErrorCode.InvalidInput, `staged manifest ${JSON.stringify(p.versions.manifestPath(p.entry.staged_key))} does not exist`);
}

/** The writes of one version's commit under way: the manifest's create-if-absent, then its sidecar; Lance's hint to follow. */
interface VersionWrites {
  created: Promise<ObjectInfo>;
  /** The sidecar once placed; null when the version needs none (needsNoSidecar). */
  sidecarPlaced: Promise<VersionSidecar | null>;
  /** Writes Lance's hint, where this version gets one (isHinted); only once `created` has succeeded. */
  placeHint(): Promise<void>;
  sidecar: VersionSidecar;
  committedAt: Date;
}

/**
 * Starts the writes of `entry`'s commit. The manifest is placed once `placeAfter` (if any) has
 * resolved; the sidecar once the manifest's create-if-absent has succeeded and is durable
 * (PutOptions.placeAfter), so a sidecar is only ever found beside the manifest its writer
 * committed; the hint is only begun then, so it never names a version before it is committed. The manifest is put as the
 * staged object (PutOptions.sameAs: a local disk links the staged file, keeping its etag and
 * time); a sidecar that may turn out unneeded (needsNoSidecar) is decided once the manifest is placed.
 */
function startWrites(
  versions: TableVersions,
  entry: BatchEntry,
  staged: StoredObject,
  transactionId: string | undefined,
  placeAfter?: Promise<unknown>,
): VersionWrites {
  // A version with a sidecar reports the sidecar's commit time, so that every answer about it
  // agrees (object stores report modification times in whole seconds); one without reports its
  // manifest's own time, which a linked staged file keeps: when the client staged it. The sidecar
  // also holds what the client said about the version (e_tag, metadata), as durable as the manifest.
  const committedAt = new Date();
  const sidecar = sidecarOf(entry, committedAt, transactionId);
  const created = versions.store.put(
    entry.final_key,
    staged.body,
    { ifNoneMatch: '*' },
    { sameAs: { key: staged.key, etag: staged.etag }, ...(placeAfter ? { placeAfter } : {}) },
  );
  const manifestDurable = created.then((info) => {
    faultPoint('commit:before-sidecar');
    return info;
  });
  // Whether a sidecar is needed is known once the manifest is placed; one the staged object
  // already makes needed is written alongside the manifest.
  const sidecarPlaced = needsNoSidecar(entry, transactionId, staged, staged)
    ? manifestDurable.then(async (info) => {
        if (needsNoSidecar(entry, transactionId, info, staged)) return null;
        await versions.writeSidecar(sidecar);
        return sidecar;
      })
    : versions.writeSidecar(sidecar, manifestDurable).then(() => sidecar);
  // Awaited only once the manifest's outcome is known: their failures must not go unhandled meanwhile.
  created.catch(() => undefined);
  sidecarPlaced.catch(() => undefined);
  // Begun by writeManifest once the manifest is placed; a single commit begins it after its answer
  // (after-answer.ts), by when the commit has read the hint on its way (isHinted).
  const placeHint = () => (isHinted(versions, entry) ? versions.writeHint(entry.version) : Promise.resolve());
  return { created, sidecarPlaced, placeHint, sidecar, committedAt };
}

/**
 * A version needs no sidecar when it would say nothing its manifest's object does not: no
 * metadata or transaction to keep, the object placed is the staged object itself (its etag and
 * time, as a local disk's link keeps them: every later answer reads the same from the store as
 * the create's), and the client's e_tag and size, if it sent them, are that object's (Lance's
 * clients send what their store reported of the staged file).
 */
function needsNoSidecar(entry: BatchEntry, transactionId: string | undefined, placed: Omit<ObjectInfo, 'key'>, staged: ObjectInfo): boolean {
  const isStaged = placed.etag === staged.etag && placed.lastModified.getTime() === staged.lastModified.getTime();
  const said = (entry.e_tag === undefined || entry.e_tag === placed.etag) && (entry.manifest_size === undefined || entry.manifest_size === placed.size);
  return entry.metadata === undefined && transactionId === undefined && isStaged && said;
}

/**
 * Lance's hint serves readers that cannot list cheaply: V1 tables, and local disks; it is left
 * alone where its writer keeps it (TableVersions.hintWanted).
 */
const isHinted = (versions: TableVersions, entry: BatchEntry): boolean =>
  (entry.naming_scheme === 'V1' || versions.store.listsWholeDirectory) && versions.hintWanted(entry.version);

function sidecarOf(entry: BatchEntry, committedAt: Date, transactionId: string | undefined): VersionSidecar {
  return {
    version: entry.version,
    ...(entry.manifest_size !== undefined ? { manifest_size: entry.manifest_size } : {}),
    ...(entry.e_tag !== undefined ? { e_tag: entry.e_tag } : {}),
    ...(entry.metadata !== undefined ? { metadata: entry.metadata } : {}),
    naming_scheme: entry.naming_scheme,
    committed_at: committedAt.toISOString(),
    ...(transactionId ? { transaction_id: transactionId } : {}),
  };
}

/**
 * A commit's writes begun before the checks that allow them (see SingleCommits.commit): the
 * files are written at once (on a local disk, fsynced), out of sight, and placed only after
 * `allow`; `abandon` discards them. Whoever begins them must end them with one of the two.
 */
export interface EarlyWrites {
  /** The commit these writes are for. */
  entry: BatchEntry;
  /** Lets writeManifest place them (it calls this). */
  allow(): VersionWrites;
  /**
   * Discards them unless allowed, because of `reason` (the commit's failure, if it failed);
   * resolves once nothing of them is left.
   */
  abandon(reason?: unknown): Promise<void>;
}

export function beginWrites(p: PlannedVersion & { staged: StoredObject }): EarlyWrites {
  let open = (): void => {};
  let refuse = (_e: Error): void => {};
  const gate = new Promise<void>((resolve, reject) => {
    open = resolve;
    refuse = reject;
  });
  const writes = startWrites(p.versions, p.entry, p.staged, undefined, gate);
  let allowed = false;
  return {
    entry: p.entry,
    allow: () => {
      allowed = true;
      faultPoint('commit:before-place');
      open();
      return writes;
    },
    abandon: async (reason?: unknown) => {
      if (allowed) return;
      // A commit that lost its version withdraws its create-if-absent as the lost condition it is
      // (the store's metrics count it as contention, not as an error; see instrumented-store.ts).
      const lost = reason instanceof NamespaceError && reason.code === ErrorCode.ConcurrentModification;
      refuse(
        lost ? new PreconditionFailedError(p.entry.final_key, `version ${p.entry.version} is another writer's`) : new Error('the commit did not go ahead'),
      );
      await Promise.allSettled([writes.created, writes.sidecarPlaced]);
    },
  };
}

/**
 * Places the staged manifest at its final name with create-if-absent (on a local disk a link of
 * the staged file, see startWrites). Finding the final name already holding the same bytes is
 * success (a retry, or a roll-forward after a crash). Store calls: the create-if-absent, the
 * sidecar unless needsNoSidecar, and on a local disk Lance's hint (not fsynced).
 * `early`: these writes, begun before the checks (beginWrites); `p.entry` must be theirs.
 *
 * The sidecar is written while the manifest is, but placed only once the manifest's
 * create-if-absent has succeeded and is durable (startWrites): so a sidecar never describes a
 * manifest another writer put there first, and a crash between the two leaves a version without
 * a sidecar (its facts are then the manifest's), never a sidecar without its version. On a local
 * disk the two files' fsyncs overlap; with no sidecar, two fsyncs wait in turn (the staged file's,
 * then its directory's: see commit-path-cost.test.ts).
 * `leave`: takes the hint's placement, to begin after the answer (see after-answer.ts); without
 * it, the hint is placed before this returns.
 */
export async function writeManifest(
  p: PlannedVersion,
  transactionId?: string,
  early?: EarlyWrites,
  leave?: (placeHint: () => Promise<unknown>) => void,
): Promise<CommittedVersion> {
  const { entry, versions } = p;
  const staged = p.staged !== undefined ? p.staged : await versions.store.get(entry.staged_key);
  const writes = early ? early.allow() : staged ? startWrites(versions, entry, staged, transactionId) : null;
  let committed: CommittedVersion | null = null;
  if (writes && staged) {
    try {
      const info = await writes.created;
      committed = committedAs(entry, info);
      if (leave) leave(writes.placeHint);
      const [sidecar] = await Promise.all([writes.sidecarPlaced, leave ? undefined : writes.placeHint()]);
      return sidecar ? { ...committed, lastModified: writes.committedAt } : committed;
    } catch (e) {
      if (committed) throw e; // the sidecar's own failure
      // The manifest was not created, so neither is the sidecar (its put rejects with the same error), nor the hint.
      await writes.sidecarPlaced.catch(() => undefined);
      if (!(e instanceof PreconditionFailedError)) throw e;
      const existing = await versions.store.get(entry.final_key);
      if (!existing?.body.equals(staged.body)) {
        throw conflict(`table ${displayId(entry.table_id)}: version ${entry.version} was already committed with another manifest`);
      }
      committed = committedAs(entry, existing);
    }
  }
  committed ??= await versions.get(entry.version, entry.naming_scheme);
  if (!committed) throw stagedMissing(p);
  // Found committed already (a retry, a roll-forward): its sidecar and hint follow the manifest that is there.
  const committedAt = new Date();
  const bare = staged !== null && needsNoSidecar(entry, transactionId, committed, staged);
  if (!bare) await versions.writeSidecar(writes?.sidecar ?? sidecarOf(entry, committedAt, transactionId));
  if (isHinted(versions, entry)) {
    const placeHint = () => versions.writeHint(entry.version);
    if (leave) leave(placeHint);
    else await placeHint();
  }
  return bare ? committed : { ...committed, lastModified: writes?.committedAt ?? committedAt };
}

/** The committed version `entry` is, as its manifest's object says. */
const committedAs = (entry: BatchEntry, info: ObjectInfo): CommittedVersion => ({
  version: entry.version,
  scheme: entry.naming_scheme,
  key: info.key,
  size: info.size,
  etag: info.etag,
  lastModified: info.lastModified,
});

/** Committed versions as the API reports them: the sidecar's facts where there is one. */
export async function versionsOnWire(versions: TableVersions, committed: CommittedVersion[]): Promise<TableVersion[]> {
  const sidecars = await versions.readSidecars(committed.map((c) => c.version));
  return committed.map((c) => {
    const sidecar = sidecars.get(c.version);
    return {
      version: c.version,
      manifest_path: versions.manifestPath(c.key),
      manifest_size: sidecar?.manifest_size ?? c.size,
      e_tag: sidecar?.e_tag ?? c.etag,
      timestamp_millis: sidecar ? Date.parse(sidecar.committed_at) : c.lastModified.getTime(),
      metadata: sidecar?.metadata ?? {},
    };
  });
}

import { type CommitCoordinator, type CoordinatedVersion, EngineError } from '../../engine/lance-engine.js';
import { type Metrics, NO_METRICS } from '../../metrics/metrics.js';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import type { TableVersion } from '../../model/versions.js';
import type { BranchName, BranchRef } from '../branches/branch-refs.js';
import type { RequestContext } from '../context/request-context.js';
import { isStoreOutage } from '../errors/engine-errors.js';
import type { ResolvedTable } from '../tables/resolved-table.js';
import { versionsOn } from './branch-versions.js';
import { versionsOnWire } from './commit-steps.js';
import type { CommittedVersion } from './dataset-versions.js';
import type { SingleCommits } from './single-commit.js';

const coordinated = (v: TableVersion): CoordinatedVersion => ({
  version: v.version,
  manifestPath: v.manifest_path,
  manifestSize: v.manifest_size,
  eTag: v.e_tag,
  timestampMillis: v.timestamp_millis,
});

/**
 * The commit path of one table as the engine sees it: the service's own writes to a table with
 * managed versioning commit through the same create-if-absent of the next manifest, under the
 * same reservations, as clients' commits. Every callback works on the table as the request
 * resolved it; none looks it up again. `underWriteLease`: see SingleCommits.commit. `branch`: the
 * line of history it commits on (branch-versions.ts), main by default; `leasedRef`: its ref as
 * read under a write lease naming the branch (see SingleCommits.commit).
 */
export function commitCoordinator(
  commits: Pick<SingleCommits, 'commit'>,
  ctx: RequestContext,
  table: ResolvedTable,
  underWriteLease: boolean,
  metrics: Metrics = NO_METRICS,
  branch: BranchName = null,
  leasedRef?: BranchRef,
): CommitCoordinator {
  const versions = versionsOn(table.dir, branch);
  const onWire = async (found: CommittedVersion[]) => (await versionsOnWire(versions, found)).map(coordinated);
  return outagesAsEngineErrors({
    latest: async () => {
      const latest = await versions.latest();
      return latest ? ((await onWire([latest]))[0] ?? null) : null;
    },
    describe: async (version) => {
      const found = await versions.get(version);
      return found ? ((await onWire([found]))[0] ?? null) : null;
    },
    list: async () => onWire(await versions.all()),
    create: async (request) => {
      try {
        const { version } = await commits.commit(
          ctx,
          table,
          {
            version: request.version,
            manifest_path: request.manifestPath,
            ...(branch !== null ? { branch } : {}),
            ...(request.manifestSize !== undefined ? { manifest_size: request.manifestSize } : {}),
            ...(request.eTag !== undefined ? { e_tag: request.eTag } : {}),
            ...(request.namingScheme !== undefined ? { naming_scheme: request.namingScheme } : {}),
          },
          underWriteLease,
          leasedRef,
        );
        return coordinated(version);
      } catch (e) {
        // The engine's port speaks EngineError: a lost race is its `conflict` (Lance rebases and retries).
        if (e instanceof NamespaceError && e.code === ErrorCode.ConcurrentModification) {
          metrics.commitRetry('engine');
          throw new EngineError('conflict', e.message, { cause: e });
        }
        throw e;
      }
    },
  });
}

/**
 * The engine's port speaks EngineError: the store's unavailability, met by any callback, is its
 * `store_unreachable`, which the engine's resolver answers as a 503 (and the engine's failure
 * then says so) rather than as an internal error.
 */
function outagesAsEngineErrors(coordinator: CommitCoordinator): CommitCoordinator {
  const translated =
    <A extends unknown[], T>(callback: (...args: A) => Promise<T>) =>
    async (...args: A): Promise<T> => {
      try {
        return await callback(...args);
      } catch (e) {
        if (!(e instanceof EngineError) && isStoreOutage(e))
          throw new EngineError('store_unreachable', e instanceof Error ? e.message : String(e), { cause: e });
        throw e;
      }
    };
  return {
    latest: translated(coordinator.latest),
    describe: translated(coordinator.describe),
    list: translated(coordinator.list),
    create: translated(coordinator.create),
  };
}

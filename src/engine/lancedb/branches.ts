import { type DatasetLocation, EngineError } from '../dataset-location.js';
import type { BranchOps } from '../ports/branches.js';
import { engineMessage } from './rows.js';
import { classify, type Table, type TableAccess } from './table-access.js';

/**
 * Classifies a failure of a branch operation by what Lance 4.x says (probed through
 * @lancedb/lancedb 0.39): a source branch without history ("Not found: .../tree/<b>/_versions"),
 * a missing source version ("Dataset at path .../_versions/<n>.manifest was not found"), an unknown
 * branch ("Ref not found"), and the internal error a clone onto a taken name ends in ("Clone
 * operation should not enter build_manifest", which the service's check before the engine leaves
 * to a race).
 */
function branchFailure(e: unknown): EngineError {
  if (e instanceof EngineError) return e;
  const raw = e instanceof Error ? e.message : String(e);
  const message = engineMessage(e);
  if (/_versions\/\d+\.manifest was not found/i.test(raw)) return new EngineError('version_not_found', message, { cause: e });
  if (/Ref not found|tree\/\S*\/_versions(?!\/)/i.test(raw)) return new EngineError('branch_not_found', message, { cause: e });
  if (/Clone operation should not enter build_manifest/i.test(raw)) return new EngineError('branch_exists', message, { cause: e });
  if (/Ref is invalid|Invalid input/i.test(raw)) return new EngineError('invalid_input', message, { cause: e });
  return new EngineError(classify(e).kind, message, { cause: e });
}

/** The branch operations of the Lance engine over @lancedb/lancedb (Table.branches()). */
export class LancedbBranches implements BranchOps {
  constructor(private readonly access: TableAccess) {}

  /**
   * A fork commits nothing to the dataset's own history, so it runs on the dataset the engine keeps
   * open for the table (TableAccess.read: checked against the latest version the request read),
   * sparing an open (about 1 ms on a local disk, a describe and the manifest's reads on S3). A
   * managed table's kept handle commits through the coordinator of the request that used it last,
   * and the coordinator answers for main's history alone: its forks run, as before, on a handle
   * of their own opened without one.
   */
  create(at: DatasetLocation, name: string, fromBranch: string | null, fromVersion: number | undefined): Promise<void> {
    // Main's latest, named when the caller read it: Lance otherwise lists main's _versions/ for it (a LIST on S3).
    const version = fromVersion ?? (fromBranch === null ? at.latest?.version : undefined);
    const fork = async (table: Table) => {
      try {
        const branches = await table.branches();
        (await branches.create(name, fromBranch ?? undefined, version)).close();
      } catch (e) {
        throw branchFailure(e);
      }
    };
    if (at.coordinator === undefined) return this.access.read(at, fork);
    const { coordinator: _, coordinatorOn: __, ...unmanaged } = at;
    return this.access.write(unmanaged, fork);
  }
}

import { type ManifestIndex, readManifestIndices } from '../../engine/lance-format/manifest-indices.js';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import { displayId } from '../catalog/catalog.js';
import { TableVersions } from '../versions/dataset-versions.js';
import type { OpenTable } from './data-tables.js';

// A dataset's indices as its manifest lists them: every index, whichever engine built it and
// whether or not @lancedb/lancedb can name it (it leaves out the NGRAM, ZONEMAP, BLOOMFILTER and
// RTREE indices pylance builds, and calls their type UNKNOWN). One GET of the version's manifest.

/** The indices of a version of the table's dataset (the latest the request read by default); none for a declared table. */
export async function manifestIndices(table: OpenTable, version?: number): Promise<ManifestIndex[]> {
  const at = version ?? table.at.latest?.version;
  if (at === undefined) {
    if (version !== undefined)
      throw new NamespaceError(ErrorCode.TableVersionNotFound, `table ${displayId(table.id)} is declared and has no version ${version}`);
    return [];
  }
  const file = await new TableVersions(table.versionsDir).readManifestFile(at);
  if (!file) throw new NamespaceError(ErrorCode.TableVersionNotFound, `table ${displayId(table.id)} has no version ${at}`);
  try {
    return readManifestIndices(file);
  } catch (e) {
    throw new Error(`the manifest of version ${at} of table ${displayId(table.id)} cannot be read: ${e instanceof Error ? e.message : String(e)}`, {
      cause: e,
    });
  }
}

/** The index of that name, or a 404 code 6. */
export async function manifestIndex(table: OpenTable, name: string, version?: number): Promise<ManifestIndex> {
  const found = (await manifestIndices(table, version)).find((i) => i.name === name);
  if (!found) {
    throw new NamespaceError(
      ErrorCode.TableIndexNotFound,
      `table ${displayId(table.id)} has no index ${JSON.stringify(name)}${version === undefined ? '' : ` at version ${version}`}`,
    );
  }
  return found;
}

import type { ManifestIndex } from '../../engine/lance-format/manifest-indices.js';
import type { IndexDescription, IndexSpec } from '../../engine/ports/indices.js';
import { ErrorCode, invalidInput, NamespaceError } from '../../model/errors.js';
import {
  type CreateTableIndexRequest,
  type CreateTableIndexResponse,
  type DropTableIndexResponse,
  type IndexContent,
  type ListTableIndicesResponse,
  VECTOR_INDEX_TYPES,
} from '../../model/indices.js';
import { normalizeBranch } from '../branches/branch-refs.js';
import { displayId } from '../catalog/catalog.js';
import type { PageRequest } from '../catalog/namespace-service.js';
import { type PageTokens, paginate } from '../catalog/page-token.js';
import type { RequestContext } from '../context/request-context.js';
import type { DataTables } from './data-tables.js';
import { manifestIndices } from './index-manifest.js';

const opt = <T>(v: T | null | undefined): T | undefined => (v === null ? undefined : v);

function specOf(request: CreateTableIndexRequest): IndexSpec {
  return {
    column: request.column,
    type: request.index_type,
    name: request.name ?? `${request.column}_idx`,
    distanceType: opt(request.distance_type),
    vector: {
      numPartitions: opt(request.num_partitions),
      numSubVectors: opt(request.num_sub_vectors),
      numBits: opt(request.num_bits),
      sampleRate: opt(request.sample_rate),
      maxIterations: opt(request.max_iterations),
      targetPartitionSize: opt(request.target_partition_size),
      m: opt(request.m),
      efConstruction: opt(request.ef_construction),
    },
    fts: {
      withPosition: opt(request.with_position),
      baseTokenizer: opt(request.base_tokenizer),
      language: opt(request.language),
      maxTokenLength: opt(request.max_token_length),
      lowerCase: opt(request.lower_case),
      stem: opt(request.stem),
      removeStopWords: opt(request.remove_stop_words),
      asciiFolding: opt(request.ascii_folding),
    },
  };
}

function contentOf(index: IndexDescription): IndexContent {
  return {
    index_name: index.name,
    index_uuid: index.uuid,
    columns: index.columns,
    // Indexes are built before CreateTableIndex answers, so every listed index is complete; the
    // word is the one Lance's reference server (pylance 14.0.2's RestAdapter) answers.
    status: 'SUCCEEDED',
    index_type: index.type,
    ...(index.typeUrl !== undefined ? { type_url: index.typeUrl } : {}),
    ...(index.numIndexedRows !== undefined ? { num_indexed_rows: index.numIndexedRows } : {}),
    ...(index.numUnindexedRows !== undefined ? { num_unindexed_rows: index.numUnindexedRows } : {}),
    size_bytes: index.sizeBytes ?? null,
    ...(index.numSegments !== undefined ? { num_segments: index.numSegments } : {}),
    created_at: index.createdAt ?? null,
    ...(index.indexVersion !== undefined ? { index_version: index.indexVersion } : {}),
    index_details: index.details ?? null,
  };
}

/**
 * The manifest's indices, with what the engine adds for those it can read: their details (the
 * tokenizer of an FTS index, a vector index's parameters), and the type of a vector index whose
 * details predate naming it.
 */
function withEngineDetails(listed: ManifestIndex[], engine: IndexDescription[]): IndexDescription[] {
  const byName = new Map(engine.map((i) => [i.name, i]));
  return listed.map((i) => {
    const described = byName.get(i.name);
    return {
      name: i.name,
      uuid: i.uuid,
      columns: i.columns,
      type: i.type ?? described?.type ?? 'VECTOR',
      typeUrl: i.typeUrl,
      numIndexedRows: i.numIndexedRows,
      numUnindexedRows: i.numUnindexedRows,
      sizeBytes: i.sizeBytes ?? described?.sizeBytes,
      numSegments: i.numSegments,
      createdAt: i.createdAt ?? described?.createdAt,
      indexVersion: i.indexVersion,
      details: described?.details,
    };
  });
}

/** Byte order of the UTF-8 names, the order every list of this service uses. */
const byName = (a: IndexDescription, b: IndexDescription): number => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name));

/** The indices operations of the Lance namespace spec, over the Lance engine. */
export class IndexService {
  constructor(private readonly tables: DataTables) {}

  private get pageTokens(): PageTokens {
    return this.tables.catalog.pageTokens;
  }

  /**
   * CreateTableIndex (and CreateTableScalarIndex with `scalarOnly`). The spec allows the build to
   * run in the background; here it runs in the request, so the index is complete (and listed) when
   * this returns.
   */
  async create(ctx: RequestContext, id: string[], request: CreateTableIndexRequest, options: { scalarOnly: boolean }): Promise<CreateTableIndexResponse> {
    if (options.scalarOnly && VECTOR_INDEX_TYPES.has(request.index_type)) {
      throw invalidInput(`index_type: ${request.index_type} is a vector index; create it with create_index, not create_scalar_index`);
    }
    const spec = specOf(request);
    const branch = normalizeBranch(request.branch);
    await this.tables.writeTable(
      ctx,
      id,
      async (table) => {
        // Against the manifest, which lists every index whichever engine built it (the engines refuse a taken name too).
        if ((await manifestIndices(table)).some((i) => i.name === spec.name)) {
          throw new NamespaceError(ErrorCode.TableIndexAlreadyExists, `table ${displayId(id)} already has an index named ${JSON.stringify(spec.name)}`);
        }
        return this.tables.engine.indices.createIndex(table.at, spec);
      },
      { branch },
    );
    return {};
  }

  async list(
    ctx: RequestContext,
    id: string[],
    page: PageRequest & { version?: number | null | undefined; branch?: string | null | undefined },
  ): Promise<ListTableIndicesResponse> {
    const branch = normalizeBranch(page.branch);
    // A page token continues the listing of one table and one branch.
    const scope = JSON.stringify(branch === null ? id : [...id, { branch }]);
    const after = this.pageTokens.decode('indices', scope, page.pageToken);
    const version = opt(page.version);
    const indices = await this.tables.readTable(
      ctx,
      id,
      async (table): Promise<IndexDescription[]> => {
        const listed = await manifestIndices(table, version);
        return listed.length === 0 ? [] : withEngineDetails(listed, await this.tables.engine.indices.listIndices(table.at, { version }));
      },
      { allowDeclared: true, branch },
    );
    const ordered = indices.sort(byName).filter((i) => after === undefined || Buffer.compare(Buffer.from(i.name), Buffer.from(after)) > 0);
    const { page: shown, pageToken } = paginate(
      ordered,
      page.limit,
      (i) => i.name,
      (last) => this.pageTokens.encode('indices', scope, last),
    );
    return { indexes: shown.map(contentOf), page_token: pageToken };
  }

  async drop(ctx: RequestContext, id: string[], name: string, branchField?: string | null): Promise<DropTableIndexResponse> {
    const branch = normalizeBranch(branchField);
    await this.tables.writeTable(ctx, id, (table) => this.tables.engine.indices.dropIndex(table.at, name), { branch });
    return {};
  }
}

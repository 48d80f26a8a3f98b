import { describe, expect, it } from 'vitest';
import { bytesField, encodeVarint, varintField } from '../../src/engine/lance-format/manifest.js';
import { readManifestIndices } from '../../src/engine/lance-format/manifest-indices.js';
import { roaringValues } from '../../src/engine/lance-format/roaring.js';

// The manifest's index section as src/engine/lance-format/manifest-indices.ts reads it, on manifests
// encoded here field by field (Lance's protos/table.proto and index.proto), and the Roaring bitmaps
// of their fragments in each container kind (the data tier reads the ones Lance writes).

const varint = (value: number): Buffer => encodeVarint(BigInt.asUintN(64, BigInt(value)));
const num = (field: number, value: number) => varintField(field, BigInt.asUintN(64, BigInt(value)));
const msg = (field: number, ...parts: Array<Buffer | string>) =>
  bytesField(field, Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : p))));

/** A portable Roaring bitmap without run containers, of array containers. */
function roaring(values: number[]): Buffer {
  const byKey = new Map<number, number[]>();
  for (const v of values) byKey.set(v >>> 16, [...(byKey.get(v >>> 16) ?? []), v & 0xffff]);
  const keys = [...byKey.keys()].sort((a, b) => a - b);
  const head = Buffer.alloc(8 + 8 * keys.length);
  head.writeUInt32LE(12346, 0);
  head.writeUInt32LE(keys.length, 4);
  const bodies: Buffer[] = [];
  let offset = head.length;
  keys.forEach((key, i) => {
    const lows = byKey.get(key) ?? [];
    head.writeUInt16LE(key, 8 + 4 * i);
    head.writeUInt16LE(lows.length - 1, 8 + 4 * i + 2);
    head.writeUInt32LE(offset, 8 + 4 * keys.length + 4 * i);
    const body = Buffer.alloc(2 * lows.length);
    for (const [k, low] of lows.entries()) body.writeUInt16LE(low, 2 * k);
    bodies.push(body);
    offset += body.length;
  });
  return Buffer.concat([head, ...bodies]);
}

/** A manifest file: the index section at offset 0 (u32 length, IndexSection), then the manifest and the footer. */
function manifestFile(manifest: Buffer[], indices: Buffer[] | undefined): Buffer {
  const section = indices === undefined ? Buffer.alloc(0) : Buffer.concat(indices.map((i) => msg(1, i)));
  const sectionFile = indices === undefined ? Buffer.alloc(0) : Buffer.concat([Buffer.alloc(4), section]);
  if (indices !== undefined) sectionFile.writeUInt32LE(section.length, 0);
  const body = Buffer.concat([...manifest, ...(indices === undefined ? [] : [num(6, 0)])]);
  const size = Buffer.alloc(4);
  size.writeUInt32LE(body.length);
  const footer = Buffer.alloc(16);
  footer.writeBigUInt64LE(BigInt(sectionFile.length), 0);
  footer.writeUInt16LE(0, 8);
  footer.writeUInt16LE(3, 10);
  footer.write('LANC', 12, 'latin1');
  return Buffer.concat([sectionFile, size, body, footer]);
}

const field = (name: string, id: number, parent = -1) => msg(1, msg(2, name), num(3, id), num(4, parent));
const fragment = (id: number, rows: number, deleted = 0) => msg(2, num(1, id), num(4, rows), ...(deleted ? [msg(3, num(4, deleted))] : []));
const uuid = (byte: number) => msg(1, msg(1, Buffer.alloc(16, byte)));
function index(name: string, fields: number[], fragments: number[], typeUrl: string, details?: Buffer, extra: Buffer[] = []): Buffer {
  return Buffer.concat([
    uuid(name.length),
    msg(2, Buffer.concat(fields.map(varint))),
    msg(3, name),
    num(4, 1),
    msg(5, roaring(fragments)),
    msg(6, msg(1, typeUrl), ...(details ? [msg(2, details)] : [])),
    ...extra,
  ]);
}

describe('the indices of a manifest', () => {
  const schema = [field('id', 0), field('vec', 1), field('point', 2), field('x', 3, 2), field('y', 4, 2), field('text', 5)];
  const fragments = [fragment(0, 100), fragment(1, 100, 10), fragment(2, 50)];

  it('names each type from its details, counts rows of the fragments each covers, and merges segments', () => {
    const file = manifestFile(
      [...schema, ...fragments],
      [
        index('vec_sq', [1], [0, 1], '/lance.index.pb.VectorIndexDetails', Buffer.concat([num(1, 1), msg(5, num(1, 8))]), [
          msg(10, msg(1, 'index.idx'), num(2, 300)),
          msg(10, msg(1, 'auxiliary.idx'), num(2, 700)),
          num(7, 1),
          num(8, Date.UTC(2026, 0, 2)),
        ]),
        index('vec_hnsw', [1], [0, 1, 2], '/lance.index.pb.VectorIndexDetails', Buffer.concat([num(1, 2), msg(3, num(1, 20)), msg(8)])),
        index('vec_old', [1], [0], '/lance.index.pb.VectorIndexDetails'),
        index('x_zone', [3], [0], '/lance.table.ZoneMapIndexDetails', num(1, 8192)),
        // A second segment of the zone map, over another fragment.
        index('x_zone', [3], [2], '/lance.table.ZoneMapIndexDetails', num(1, 8192)),
        index('point_rtree', [2], [0, 1, 2], '/lance.index.pb.RTreeIndexDetails'),
        index('text_fts', [5, 0], [0, 1, 2], '/lance.table.InvertedIndexDetails', undefined, [msg(11, varint(0))]),
        index('frag_reuse', [], [], '/lance.table.FragmentReuseIndexDetails'),
        index('text_mh', [5], [1], '/lance.index.pb.MinHashLshIndexDetails'),
      ],
    );
    const read = readManifestIndices(file);
    expect(read.map((i) => [i.name, i.type, i.distanceType, i.columns, i.numIndexedRows, i.numUnindexedRows, i.numSegments])).toEqual([
      ['vec_sq', 'IVF_SQ', 'cosine', ['vec'], 190, 50, 1],
      ['vec_hnsw', 'IVF_HNSW_FLAT', 'dot', ['vec'], 240, 0, 1],
      // Details written before they named a compression: the type is the engine's to say.
      ['vec_old', undefined, undefined, ['vec'], 100, 140, 1],
      ['x_zone', 'ZONEMAP', undefined, ['point.x'], 150, 90, 2],
      ['point_rtree', 'RTREE', undefined, ['point'], 240, 0, 1],
      // A covering field (carried, not keyed) is not one of its columns.
      ['text_fts', 'FTS', undefined, ['text'], 240, 0, 1],
      ['text_mh', 'MINHASHLSH', undefined, ['text'], 90, 150, 1],
    ]);
    expect(read[0]).toMatchObject({
      uuid: '06060606-0606-0606-0606-060606060606',
      typeUrl: '/lance.index.pb.VectorIndexDetails',
      sizeBytes: 1000,
      indexVersion: 1,
      createdAt: '2026-01-02T00:00:00.000Z',
    });
    expect(read[1]).toMatchObject({ sizeBytes: undefined, createdAt: undefined, indexVersion: undefined });
  });

  it('finds none in a manifest without an index section', () => {
    expect(readManifestIndices(manifestFile([...schema, ...fragments], undefined))).toEqual([]);
  });

  it('refuses what is not a manifest', () => {
    expect(() => readManifestIndices(Buffer.from('not a manifest at all'))).toThrow(/not a Lance manifest/);
  });
});

describe('Roaring bitmaps', () => {
  it('reads array containers, with and without offsets', () => {
    expect(roaringValues(roaring([]))).toEqual([]);
    expect(roaringValues(roaring([0, 5, 65_535, 65_536, 200_000]))).toEqual([0, 5, 65_535, 65_536, 200_000]);
    expect(roaringValues(Buffer.alloc(0))).toEqual([]);
  });

  it('reads a bitmap container (more than 4,096 values)', () => {
    const values = Array.from({ length: 5000 }, (_, i) => 3 * i);
    const file = Buffer.alloc(8 + 8 + 8192);
    file.writeUInt32LE(12346, 0);
    file.writeUInt32LE(1, 4);
    file.writeUInt16LE(0, 8);
    file.writeUInt16LE(values.length - 1, 10);
    file.writeUInt32LE(16, 12);
    for (const v of values) file[16 + (v >> 3)] = (file[16 + (v >> 3)] ?? 0) | (1 << (v & 7));
    expect(roaringValues(file)).toEqual(values);
  });

  it('reads run containers beside an array container (the run cookie, no offsets under four containers)', () => {
    // Two containers: key 0 runs [10..12] and [100..100]; key 1 the array [7].
    const head = Buffer.alloc(4 + 1 + 8);
    head.writeUInt32LE(12347 | ((2 - 1) << 16), 0);
    head[4] = 0b01;
    head.writeUInt16LE(0, 5);
    head.writeUInt16LE(3, 7);
    head.writeUInt16LE(1, 9);
    head.writeUInt16LE(0, 11);
    const runs = Buffer.alloc(2 + 8);
    runs.writeUInt16LE(2, 0);
    runs.writeUInt16LE(10, 2);
    runs.writeUInt16LE(2, 4);
    runs.writeUInt16LE(100, 6);
    runs.writeUInt16LE(0, 8);
    const array = Buffer.alloc(2);
    array.writeUInt16LE(7, 0);
    expect(roaringValues(Buffer.concat([head, runs, array]))).toEqual([10, 11, 12, 100, 65_543]);
  });

  it('refuses what is not one', () => {
    expect(() => roaringValues(Buffer.from([1, 2, 3, 4, 5, 6, 7, 8]))).toThrow(/not a roaring bitmap/);
    expect(() => roaringValues(roaring([1, 2, 3]).subarray(0, 18))).toThrow();
  });
});

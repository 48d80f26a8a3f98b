// Reads a 32-bit Roaring bitmap in its portable serialization (the format of the Roaring
// specification, which Lance writes for an index's fragment bitmap): a cookie, one descriptive
// header (key, cardinality - 1) per container, offsets, then the containers: array (sorted u16),
// bitmap (8 KiB) or run (u16 count, then (start, length - 1) pairs).

const SERIAL_COOKIE_NO_RUNCONTAINER = 12346;
const SERIAL_COOKIE = 12347;
const NO_OFFSET_THRESHOLD = 4;
const ARRAY_MAX = 4096;

/** The values of a portable 32-bit Roaring bitmap, ascending; throws on bytes that are not one. */
export function roaringValues(buf: Buffer): number[] {
  if (buf.length === 0) return [];
  if (buf.length < 4) throw new Error('truncated roaring bitmap');
  const cookie = buf.readUInt32LE(0);
  let pos: number;
  let size: number;
  let runFlags: Buffer | undefined;
  if ((cookie & 0xffff) === SERIAL_COOKIE) {
    size = (cookie >>> 16) + 1;
    runFlags = buf.subarray(4, 4 + Math.ceil(size / 8));
    pos = 4 + runFlags.length;
  } else if (cookie === SERIAL_COOKIE_NO_RUNCONTAINER) {
    size = buf.readUInt32LE(4);
    pos = 8;
  } else {
    throw new Error('not a roaring bitmap');
  }
  const headers = pos;
  pos += 4 * size;
  if (runFlags === undefined || size >= NO_OFFSET_THRESHOLD) pos += 4 * size;
  const values: number[] = [];
  for (let i = 0; i < size; i++) {
    const high = buf.readUInt16LE(headers + 4 * i) * 0x10000;
    const cardinality = buf.readUInt16LE(headers + 4 * i + 2) + 1;
    if (runFlags !== undefined && ((runFlags[i >> 3] ?? 0) >> (i & 7)) & 1) {
      const runs = buf.readUInt16LE(pos);
      pos += 2;
      for (let r = 0; r < runs; r++, pos += 4) {
        const start = buf.readUInt16LE(pos);
        const length = buf.readUInt16LE(pos + 2);
        for (let v = start; v <= start + length; v++) values.push(high + v);
      }
    } else if (cardinality <= ARRAY_MAX) {
      for (let k = 0; k < cardinality; k++, pos += 2) values.push(high + buf.readUInt16LE(pos));
    } else {
      for (let word = 0; word < 2048; word++, pos += 4) {
        const bits = buf.readUInt32LE(pos);
        for (let bit = 0; bit < 32; bit++) if ((bits >>> bit) & 1) values.push(high + word * 32 + bit);
      }
    }
  }
  if (pos > buf.length) throw new Error('truncated roaring bitmap');
  return values;
}

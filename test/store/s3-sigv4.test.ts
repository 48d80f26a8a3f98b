// The adapter's own SigV4 signer against AWS's published example for S3 (header-based auth, "GET
// Bucket (List Objects)" in "Signature Calculations for the Authorization Header: Examples"), and the
// encodings its canonical request needs. End to end, every S3-tier test signs through it.

import { describe, expect, it } from 'vitest';
import { canonicalQuery, EMPTY_BODY_SHA256, encodeKeyPath, encodeRfc3986, sha256Hex, signRequest } from '../../src/store/s3/sigv4.js';

const EXAMPLE_CREDENTIALS = { accessKeyId: 'AKIAIOSFODNN7EXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY' };

describe('signRequest', () => {
  it("reproduces AWS's example signature for a bucket listing", () => {
    const headers: Record<string, string> = {};
    signRequest(
      {
        method: 'GET',
        host: 'examplebucket.s3.amazonaws.com',
        path: '/',
        query: canonicalQuery({ prefix: 'J', 'max-keys': '2' }),
        headers,
        payloadSha256: EMPTY_BODY_SHA256,
      },
      EXAMPLE_CREDENTIALS,
      'us-east-1',
      new Date('2013-05-24T00:00:00Z'),
    );
    expect(headers['x-amz-date']).toBe('20130524T000000Z');
    expect(headers.authorization).toBe(
      'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7',
    );
  });

  it('signs the session token when there is one, and a changed request changes the signature', () => {
    const sign = (path: string, sessionToken?: string) => {
      const headers: Record<string, string> = {};
      signRequest(
        { method: 'GET', host: 'h', path, query: '', headers, payloadSha256: EMPTY_BODY_SHA256 },
        { ...EXAMPLE_CREDENTIALS, ...(sessionToken ? { sessionToken } : {}) },
        'us-east-1',
        new Date(0),
      );
      return headers;
    };
    const withToken = sign('/b/k', 'tok');
    expect(withToken['x-amz-security-token']).toBe('tok');
    expect(withToken.authorization).toContain('SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token,');
    expect(sign('/b/k').authorization).not.toBe(sign('/b/k2').authorization);
  });
});

describe('canonical encodings', () => {
  it('encodes everything but unreserved characters, and keeps "/" between key segments', () => {
    expect(encodeRfc3986("a b+c&d=e/f?g#h!i'j(k)l*m~n-o_p.q%")).toBe('a%20b%2Bc%26d%3De%2Ff%3Fg%23h%21i%27j%28k%29l%2Am~n-o_p.q%25');
    expect(encodeKeyPath('ns/t b.lance/é')).toBe('ns/t%20b.lance/%C3%A9');
    expect(canonicalQuery({ 'start-after': 'a b', 'list-type': '2', delimiter: '/' })).toBe('delimiter=%2F&list-type=2&start-after=a%20b');
  });

  it('hashes payloads as hex SHA-256', () => {
    expect(sha256Hex(Buffer.alloc(0))).toBe(EMPTY_BODY_SHA256);
    expect(sha256Hex(Buffer.from('abc'))).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});

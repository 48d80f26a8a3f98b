import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { OPTION_GROUPS, type Option } from '../../src/config/options.js';
import { loadConfig } from '../../src/config.js';

const write = (text: string): string => {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'lance-ns-config-')), 'config.yaml');
  writeFileSync(file, text);
  return file;
};
const key = 'a'.repeat(64);

/** A valid value for the option that is not its default, as text. */
function sample(o: Option): string {
  if (o.kind === 'list') return 'http://a.example';
  if (o.kind === 'boolean' || o.kind === 'switch') return 'true';
  const schema = z.toJSONSchema(o.schema, { io: 'input', unrepresentable: 'any' }) as { type?: string; enum?: string[] };
  if (schema.enum) return schema.enum[1] ?? '';
  return schema.type === 'integer' || schema.type === 'number' ? '7' : 'x7';
}

describe('the option table', () => {
  const rows = OPTION_GROUPS.flatMap((g) => Object.entries(g.options).map(([name, o]) => ({ at: g.at, name, o })));

  it.each(rows.map((r) => [`--${r.o.flag}`, r] as const))(
    '%s reaches its Config field from its flag, each environment variable and its file key',
    (_, { at, name, o }) => {
      const field = (argv: string[], env: NodeJS.ProcessEnv = {}): unknown => {
        const config = loadConfig(argv, env) as unknown as Record<string, Record<string, unknown>>;
        return at === undefined ? config[name] : config[at]?.[name];
      };
      const value = sample(o);
      const fromFlag = field(o.kind === 'switch' ? [`--${o.flag}`] : [`--${o.flag}`, value]);
      expect(fromFlag).not.toEqual(field([]));
      for (const env of o.env) expect(field([], { [env]: value }), env).toEqual(fromFlag);
      expect(field(['--config', write(`${o.file}: ${value}\n`)]), o.file).toEqual(fromFlag);
    },
  );
});

describe('configuration file sections', () => {
  it('refuse unknown keys in list entries too: a misspelt principal made an OAuth2 client its own principal', () => {
    const client = `auth:\n  oauth2:\n    signing_secret: ${'s'.repeat(32)}\n    clients:\n      - client_id: etl\n        secret_sha256: ${key}\n`;
    expect(loadConfig(['--config', write(`${client}        principal: loader\n`)], {}).auth?.oauth2?.clients[0]?.principal).toBe('loader');
    expect(() => loadConfig(['--config', write(`${client}        principle: loader\n`)], {})).toThrow(
      /unknown keys under auth.oauth2.clients\[0\] .*: principle \(known: client_id, secret_sha256, principal\)/,
    );
    expect(() => loadConfig(['--config', write(`auth:\n  api_keys:\n    - principal: etl\n      sha256: ${key}\n      note: x\n`)], {})).toThrow(
      /unknown keys under auth.api_keys\[0\]/,
    );
    expect(() =>
      loadConfig(['--config', write('authorization:\n  roles:\n    r: [{ namespace: [a], privilege: read, scope: all }]\n  principals: {}\n')], {}),
    ).toThrow(/unknown keys under authorization.roles.r\[0\]/);
  });

  it('take keys as written with underscores only, and names (roles, principals, JWK members) as they are', () => {
    expect(() => loadConfig(['--config', write('rate_limit:\n  requestsPerSecond: 5\n')], {})).toThrow(/unknown keys under rate_limit .*: requestsPerSecond/);
    const authorization = loadConfig(
      [
        '--config',
        write('authorization:\n  roles:\n    sales_reader: [{ namespace: [sales], privilege: read }]\n  principals:\n    etl_job: [sales_reader]\n'),
      ],
      {},
    ).authorization;
    expect(authorization).toEqual({ roles: { sales_reader: [{ namespace: ['sales'], privilege: 'read' }] }, principals: { etl_job: ['sales_reader'] } });
    const jwk = { kty: 'OKP', crv: 'Ed25519', x: 'abc', key_ops: ['verify'] };
    const jwt = loadConfig(['--config', write(`auth:\n  jwt:\n    issuer: i\n    audience: a\n    keys: [${JSON.stringify(jwk)}]\n`)], {}).auth?.jwt;
    expect(jwt?.keys).toEqual([jwk]);
  });

  it('treat a key with no value as absent, as at the top of the file', () => {
    const vending = loadConfig(['--config', write('credential_vending:\n  role_arn: r\n  sts_endpoint:\n  duration_seconds: ~\n')], {}).credentialVending;
    expect(vending).toMatchObject({ roleArn: 'r', durationSeconds: 3600 });
    expect(vending?.stsEndpoint).toBeUndefined();
    expect(loadConfig(['--config', write('rate_limit:\n  requests_per_second: 5\n  burst:\n')], {}).rateLimit).toEqual({ requestsPerSecond: 5, burst: 5 });
  });
});

import { z } from 'zod';

// The sections of the configuration file that have no flag or environment variable: structures
// (lists of keys, roles, clients) that a command line cannot hold. Each is a zod schema under its
// Config property name; in the file, it and every key in it are written with underscores
// (credentialVending: credential_vending, jwksUrl: jwks_url). The descriptions are the help of
// docs/configuration.md; `defaultText` says a default that the schema computes rather than declares.

/** A YAML mapping (JSON object), as opposed to a list or a scalar. */
export const isMapping = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `schema`, whose `field` when absent takes the value of its `from` (before validation: the Config type keeps the field required). */
const defaulting = <S extends z.ZodType>(field: string, from: string, schema: S) =>
  z.preprocess((v) => (isMapping(v) && v[field] === undefined ? { ...v, [field]: v[from] } : v), schema);

const sha256Hex = (what: string) => z.string().regex(/^[0-9a-f]{64}$/, `the SHA-256 of the ${what}, 64 lower-case hex digits`);

const Authentication = z
  .object({
    apiKeys: z
      .array(
        z.object({
          principal: z.string().min(1).describe('the principal a request with this key acts as'),
          sha256: sha256Hex('key').describe('the SHA-256 (hex) of the key: `printf %s "$KEY" | sha256sum`'),
        }),
      )
      .min(1)
      .optional()
      .describe('API keys accepted in the `x-api-key` header; the file holds only their hashes'),
    jwt: z
      .object({
        issuer: z.string().min(1).describe('the `iss` a token must carry'),
        audience: z.string().min(1).describe('the `aud` a token must carry'),
        jwksUrl: z.url().optional().describe("the issuer's JWKS URL (its keys are fetched and cached); give this or `keys`"),
        keys: z.array(z.record(z.string(), z.unknown())).min(1).optional().describe('the public JWKs tokens are signed with; give this or `jwks_url`'),
        clockSkewSeconds: z.coerce.number().int().min(0).max(600).default(30).describe('tolerance of `exp` and `nbf`'),
        principalClaim: z.string().min(1).default('sub').describe('the claim that names the principal'),
      })
      .refine((j) => (j.jwksUrl === undefined) !== (j.keys === undefined), 'give one of jwks_url and keys')
      .optional()
      .describe("bearer JWTs in the `authorization` header, verified against the issuer's keys"),
    oauth2: z
      .object({
        signingSecret: z.string().min(32, 'at least 32 characters').describe('HMAC key of the tokens it issues; the same on every replica'),
        tokenTtlSeconds: z.coerce.number().int().min(60).max(86_400).default(3600).describe('lifetime of an issued token'),
        clients: z
          .array(
            defaulting(
              'principal',
              'clientId',
              z.object({
                clientId: z.string().min(1).describe('the client id'),
                secretSha256: sha256Hex('secret').describe('the SHA-256 (hex) of the client secret'),
                principal: z.string().min(1).meta({ description: 'the principal its tokens name', defaultText: 'the client id' }),
              }),
            ),
          )
          .min(1)
          .describe('the clients that may ask for tokens'),
      })
      .optional()
      .describe('the built-in OAuth2 client-credentials grant at `POST /oauth/token`, whose tokens every replica with the same `signing_secret` accepts'),
  })
  .refine((a) => a.apiKeys !== undefined || a.jwt !== undefined || a.oauth2 !== undefined, 'configure api_keys, jwt or oauth2')
  .optional()
  .describe('Authentication; absent: none (see [Authentication](security.md#authentication)).');

const Grant = z.object({
  namespace: z.array(z.string().min(1)).describe('the namespace whose subtree the role covers (`[]`: the whole catalog)'),
  privilege: z.enum(['read', 'write', 'manage']).describe('`manage` includes `write`, which includes `read`'),
});

const Authorization = z
  .object({
    roles: z.record(z.string().min(1), z.array(Grant)).describe('each role by name, with the privileges it grants'),
    principals: z
      .record(z.string().min(1), z.array(z.string().min(1)))
      .describe('each principal (API key principal, JWT claim, OAuth2 client) with the roles it holds'),
  })
  .refine((a) => Object.values(a.principals).every((roles) => roles.every((r) => r in a.roles)), 'every role a principal holds must be defined under roles')
  .optional()
  .describe(
    'Roles (privileges on namespace subtrees) and the principals that hold them; absent: every authenticated principal may do everything (see [Authorization](security.md#authorization)).',
  );

const RateLimit = defaulting(
  'burst',
  'requestsPerSecond',
  z.object({
    requestsPerSecond: z.coerce.number().positive().describe('requests a caller may make per second, on average'),
    burst: z.coerce.number().int().min(1).meta({ description: 'requests it may make at once', defaultText: '`requests_per_second`' }),
  }),
)
  .optional()
  .describe(
    'Requests per principal (callers without one: per address) and second, with bursts, counted by each replica on its own; absent: unlimited (see [Rate limits](security.md#rate-limits)).',
  );

const CredentialVending = z
  .object({
    roleArn: z.string().min(1).describe("the role to assume; the service's own credentials must be allowed to"),
    durationSeconds: z.coerce
      .number()
      .int()
      .min(900)
      .max(43_200)
      .default(3600)
      .describe("lifetime of vended credentials (STS allows 900 to 43200, capped by the role's maximum)"),
    refreshBeforeSeconds: z.coerce.number().int().min(0).default(300).describe('cached credentials are handed out until this long before they expire'),
    stsEndpoint: z
      .url()
      .optional()
      .meta({ description: 'the STS endpoint', defaultText: "the S3 endpoint when one is set (radosgw serves both), else AWS's regional STS" }),
    externalId: z.string().min(1).optional().describe("when the role's trust policy asks for one"),
  })
  .refine((v) => v.durationSeconds - v.refreshBeforeSeconds >= 60, 'refresh_before_seconds must leave at least 60 seconds of duration_seconds')
  .optional()
  .describe(
    'Short-lived credentials scoped to one table, for tables on S3, through STS AssumeRole; absent: nothing is vended (see [Credential vending](security.md#credential-vending)).',
  );

/** The file-only sections, under their Config property names, in the order the docs show them. */
export const FILE_SECTIONS = {
  auth: Authentication,
  authorization: Authorization,
  rateLimit: RateLimit,
  credentialVending: CredentialVending,
};

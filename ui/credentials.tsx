import { useState } from 'preact/hooks';
import { type Credentials, currentCredentials, setCredentials } from './api.js';

// Where the user gives the console the credentials the service asks for (when `auth` is
// configured): an API key (sent as x-api-key) or a bearer token (sent as authorization). They stay
// in memory, or in this tab's sessionStorage when asked to; never in a URL.

export function CredentialsPanel({ onClose }: { onClose: () => void }) {
  const existing = currentCredentials();
  const [kind, setKind] = useState<Credentials['kind']>(existing?.kind ?? 'api-key');
  const [secret, setSecret] = useState('');
  const [remember, setRemember] = useState(existing?.remember ?? false);
  const save = (e: Event) => {
    e.preventDefault();
    if (secret.trim() === '') return;
    setCredentials({ kind, secret: secret.trim(), remember });
    onClose();
  };
  return (
    <form class="credentials" onSubmit={save} data-testid="credentials-panel">
      <p class="small">
        {existing
          ? `Using ${existing.kind === 'api-key' ? 'an API key' : 'a bearer token'} (${existing.remember ? 'kept in this tab until it closes' : 'kept in memory until reload'}).`
          : 'No credentials: requests go without any.'}
      </p>
      <fieldset>
        <label>
          <input type="radio" name="kind" checked={kind === 'api-key'} onChange={() => setKind('api-key')} /> API key
        </label>
        <label>
          <input type="radio" name="kind" checked={kind === 'bearer'} onChange={() => setKind('bearer')} /> Bearer token
        </label>
      </fieldset>
      <input
        type="password"
        name="secret"
        aria-label={kind === 'api-key' ? 'API key' : 'bearer token'}
        placeholder={kind === 'api-key' ? 'API key' : 'bearer token (JWT)'}
        autocomplete="off"
        value={secret}
        onInput={(e) => setSecret((e.target as HTMLInputElement).value)}
      />
      <label class="small">
        <input type="checkbox" checked={remember} onChange={(e) => setRemember((e.target as HTMLInputElement).checked)} /> keep for this tab (sessionStorage)
      </label>
      <div class="row">
        <button type="submit">Use</button>
        {existing && (
          <button
            type="button"
            onClick={() => {
              setCredentials(null);
              onClose();
            }}
          >
            Forget
          </button>
        )}
        <button type="button" class="linkish" onClick={onClose}>
          Close
        </button>
      </div>
    </form>
  );
}

#!/bin/sh
# Writes the secret files docker/compose.yaml mounts (docker/secrets/, kept
# out of git): the Redis password, the gateway's REDIS_URL holding it, the
# store secret that signs session records, GATEWAY_TOKENS (one token for
# tenant "default" unless given as $1, e.g. "tok1=alice,tok2=bob") and the
# CLI's API key (from $ANTHROPIC_API_KEY; needed the first time).
# Existing files are kept. The folder is private (0700); the files are
# world-readable inside it (0644) so the containers' non-root users (node,
# redis) can read the bind-mounted files.
set -eu
dir=$(dirname "$0")/../secrets
mkdir -p "$dir"
chmod 0700 "$dir"
write () { # name, content
  if [ ! -s "$dir/$1" ]; then printf '%s\n' "$2" > "$dir/$1"; chmod 0644 "$dir/$1"; fi
}
rand () { od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }
write redis_password "$(rand)"
write redis_url "redis://cgw:$(tr -d '\r\n' < "$dir/redis_password")@redis:6379"
write store_secret "$(rand)"
write gateway_tokens "${1:-$(rand)=default}"
if [ ! -s "$dir/anthropic_api_key" ] && [ -z "${ANTHROPIC_API_KEY:-}" ]; then
  echo "set ANTHROPIC_API_KEY: it is written to $dir/anthropic_api_key" >&2
  exit 1
fi
write anthropic_api_key "${ANTHROPIC_API_KEY:-}"
echo "secrets in $dir"

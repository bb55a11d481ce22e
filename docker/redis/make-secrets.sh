#!/bin/sh
# Writes the secret files docker/compose.yaml mounts (docker/secrets/, kept
# out of git): the Redis password, the gateway's REDIS_URL holding it, the
# store secret that signs session records, and GATEWAY_TOKENS (one token for
# tenant "default" unless given as $1, e.g. "tok1=alice,tok2=bob").
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
echo "secrets in $dir"

# Shared helpers of scripts/demo, scripts/test and .ci/run (sourced, not run).
# Everything a fresh machine needs is installed here, into project-local venvs.

step() { printf '\n\033[1m==> %s\033[0m\n' "$*" >&2; }

die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# ensure_venv DIR PYTHON [EXTRA_REQUIREMENT...]
# Create DIR with PYTHON if missing and install agentstore (editable) with the
# postgres and tasks extras, the integration extras (openai-agents, pydantic-ai,
# langgraph: their tests must run, never skip) and the test and lint groups, plus any
# extra requirements.
# AGENTSTORE_VENV_PROFILE=demo installs only what the demo needs (the app with
# the postgres and tasks extras, the integration extras whose conversations the
# demo seeds — agentstore/demo/integrations.py — and the demo group); a later
# full install adds the rest to the same venv.
# Reinstalls only when pyproject.toml, the profile, what it installs or the
# requirements changed.
DEMO_EXTRAS="postgres,tasks,openai-agents,pydantic-ai,langgraph"
ensure_venv() {
  local dir=$1 python=$2
  shift 2
  local profile=${AGENTSTORE_VENV_PROFILE:-full}
  local stamp
  stamp=$( (cat pyproject.toml; printf '%s\n' "$python" "$profile" "$DEMO_EXTRAS" "$@") \
    | sha256sum | cut -c1-16)
  # A full venv already has everything the demo needs.
  if [[ "$profile" == demo && -f "$dir/.agentstore-full" && -x "$dir/bin/python" ]] \
    && [[ "$(cat "$dir/.agentstore-full")" == "$(sha256sum < pyproject.toml | cut -c1-16)" ]]; then
    return 0
  fi
  if [[ -x "$dir/bin/python" && -f "$dir/.agentstore-stamp" && "$(cat "$dir/.agentstore-stamp")" == "$stamp" ]]; then
    return 0
  fi
  step "installing into $dir ($("$python" --version 2>&1))"
  [[ -x "$dir/bin/python" ]] || "$python" -m venv "$dir"
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade "pip>=25.1"
  if [[ "$profile" == demo ]]; then
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check \
      -e ".[$DEMO_EXTRAS]" --group demo "$@"
  else
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check \
      -e ".[postgres,tasks,openai-agents,pydantic-ai,langgraph]" --group test --group lint --group demo "$@"
    (sha256sum < pyproject.toml | cut -c1-16) > "$dir/.agentstore-full"
  fi
  echo "$stamp" > "$dir/.agentstore-stamp"
}

default_python() {
  local py=${AGENTSTORE_PYTHON:-python3}
  "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
    || die "$py is missing or older than Python 3.11 (set AGENTSTORE_PYTHON)"
  echo "$py"
}

# find_python313: print a Python 3.13 interpreter known to pyenv, or nothing.
find_python313() {
  command -v pyenv >/dev/null 2>&1 || return 0
  local version
  version=$(pyenv versions --bare 2>/dev/null | grep -E '^3\.13(\.[0-9]+)?$' | sort -V | tail -n 1)
  [[ -n "$version" ]] || return 0
  PYENV_VERSION=$version pyenv which python 2>/dev/null || true
}

# ensure_postgres: make sure the local PostgreSQL answers on 127.0.0.1:5432.
ensure_postgres() {
  local host=${PGHOST_CHECK:-127.0.0.1}
  if pg_isready -q -h "$host" -p 5432 2>/dev/null; then return 0; fi
  if command -v pg_ctlcluster >/dev/null 2>&1 && [[ -d /etc/postgresql ]]; then
    step "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start || true
    for _ in $(seq 1 30); do
      pg_isready -q -h "$host" -p 5432 2>/dev/null && return 0
      sleep 1
    done
  fi
  return 1
}

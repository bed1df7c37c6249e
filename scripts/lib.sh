# shellcheck shell=bash
# Shared by scripts/demo and scripts/test: install what this project needs on a
# fresh Debian 12 machine (root), idempotently, with no standard input.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=$REPO/.venv
export PATH=$VENV/bin:$PATH
export ANSIBLE_CONFIG=$REPO/ansible.cfg

APT_PACKAGES=(podman runc debootstrap python3-venv python3-pip openssh-client iproute2 lsof rsync git
  libibverbs1 librdmacm1 libnuma1 libcurl4
  chromium     # the benchmark page in a real browser (tests/lab/browser.py)
  prometheus)  # promtool checks the file_sd files (tests/unit/plugins/filter/test_pd_file_sd.py)

setup_host() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== apt-get install ${missing[*]}"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
  fi
  if [ ! -x "$VENV/bin/ansible-playbook" ] || ! cmp -s "$REPO/.ci/requirements.txt" "$VENV/.requirements"; then
    echo "== python venv $VENV"
    /usr/bin/python3 -m venv "$VENV"
    # One install; its exit status decides (pipefail), the local-index warnings are dropped.
    "$VENV/bin/pip" install -q -r "$REPO/.ci/requirements.txt" 2>&1 | { grep -v "is ignored" || true; }
    cp "$REPO/.ci/requirements.txt" "$VENV/.requirements"
  fi
  # The collection under test, found by FQCN from the work tree itself.
  mkdir -p "$REPO/.cache/collections/ansible_collections/vllm_pd"
  ln -sfn "$REPO" "$REPO/.cache/collections/ansible_collections/vllm_pd/ascend"
}

setup_lab_image() {
  bash "$REPO/lab/build-image"
}

#!/bin/bash
# `make test-images`: a Debian image built from a recipe with mmdebstrap, the way
# docs/images.md's example does (bookworm; python3, numpy and pandas from Debian), then
# built again from the cache. It reaches the Debian mirror (the bootstrap from the host, the
# packages step through the egress proxy with exactly the recipe's network entry), so it is
# not part of `make test`. TAP; the time of each build is printed.
set -u
. "$(dirname "$0")/lib-run.sh"

MIRROR=${PADDOCK_TEST_MIRROR:-http://deb.debian.org/debian}
host=$(printf '%s' "$MIRROR" | sed -E 's|^[a-z]+://([^/:]+).*|\1|')
# The egress proxy refuses a name that resolves to a reserved address (a local mirror, a
# test network) unless the address itself is listed: list the mirror's address too.
addr=$(getent ahostsv4 "$host" | awk 'NR == 1 { print $1 }')
net="$host${addr:+, \"$addr:80\"}"

# pimg WHO ARGS...: paddock ARGS as root or nobody, with that identity's state directory.
pimg() {
	local PRUN
	prun_cmd "$1"
	shift
	(cd "$T/home" && exec "${PRUN[@]}" "$@")
}

R="$T/recipes"
mkdir -m 0755 "$R"
cat > "$R/datasci.yaml" <<YAML
name: python-3-datasci
description: Python 3 with numpy and pandas from Debian bookworm
debian:
  suite: bookworm
  mirror: $MIRROR
  variant: apt
network: [$net]
packages: [python3, python3-numpy, python3-pandas]
run:
  - python3 -c 'import numpy, pandas; print("numpy", numpy.__version__, "pandas", pandas.__version__)'
  - python3 -c 'import urllib.request; urllib.request.urlopen("$MIRROR/dists/bookworm/Release", timeout=30)' && echo REACHED-THE-MIRROR
  - python3 -c 'import urllib.request; urllib.request.urlopen("http://example.com/", timeout=30)' || echo REFUSED-ELSEWHERE
config:
  env: {LANG: C.UTF-8, PYTHONUNBUFFERED: "1"}
  workdir: /root
  entrypoint: [python3]
YAML

for who in root; do
	t0=$(date +%s)
	pimg "$who" image build "$R/datasci.yaml" >"$T/out" 2>"$T/err"
	rc=$?
	t1=$(date +%s)
	is $rc 0 "$who: the Debian recipe builds ($((t1 - t0)) s)" || tail -40 "$T/err" | sed 's/^/#   /'
	grep -q "^python-3-datasci sha256:" "$T/out"; ok $? "$who: the image is named: $(cat "$T/out")"
	grep -q "^paddock: step 1/5: DEBIAN bookworm" "$T/err"; ok $? "$who: step 1 bootstraps bookworm"
	grep -q "^paddock: step 2/5: PACKAGES python3 python3-numpy python3-pandas" "$T/err"
	ok $? "$who: step 2 installs the packages"
	grep -q "^    numpy [0-9.]* pandas [0-9.]*" "$T/err"
	ok $? "$who: numpy and pandas import in the image: $(grep -o 'numpy [0-9.]* pandas [0-9.]*' "$T/err")"
	grep -q "^    REACHED-THE-MIRROR$" "$T/err"; ok $? "$who: a step reaches the declared mirror through the proxy"
	grep -q "^    REFUSED-ELSEWHERE$" "$T/err"; ok $? "$who: a step cannot reach an undeclared host"
	first=$(cat "$T/out")

	t0=$(date +%s)
	pimg "$who" image build "$R/datasci.yaml" >"$T/out" 2>"$T/err"
	rc=$?
	t1=$(date +%s)
	is $rc 0 "$who: the second build ($((t1 - t0)) s)"
	is "$(cat "$T/out")" "$first" "$who: the same image from the cache"
	n=$(grep -c "^paddock: step [2-5]/5: cached" "$T/err"); is "$n" 4 "$who: every step is cached"
	grep -q "^paddock: step 1/5: cached" "$T/err"; ok $? "$who: the bootstrap is cached"
done

done_testing

#!/bin/sh
# Regenerates modfiles/1.NN.mod (+ .sum) for a kubelet release from
# k8s.io/kubernetes's own go.mod: every staging module it replaces with a
# local directory is pinned to the matching v0.NN.P tag. Maintainers run it
# when moving a release to a new patch; build.sh only reads the results.
# Usage (from conformance/referee): modfiles/gen.sh v1.37.2 (or v1.38.0-beta.0)
# Not `go mod tidy`: tidy reads every file whatever its build tags, and the
# other releases' shim files import packages this release does not have;
# `go list -tags` resolves exactly this release's imports.
set -eu
version=$1
minor=$(echo "$version" | cut -d. -f2)
# v1.37.2 -> v0.37.2; a pre-release keeps its suffix: v1.38.0-beta.0 -> v0.38.0-beta.0
staging="v0.${version#v1.}"
out=modfiles/1.$minor.mod
# The go line of a new release can be newer than the local toolchain (1.38
# needs go 1.27): fetch that toolchain unless GOTOOLCHAIN says otherwise.
if [ -z "${GOTOOLCHAIN:-}" ]; then
	export GOTOOLCHAIN=auto
fi
go mod download k8s.io/kubernetes@"$version"
src=$(go env GOMODCACHE)/k8s.io/kubernetes@$version/go.mod
{
	echo "module dpctl/conformance/referee"
	echo
	echo "go $(sed -n 's/^go \(.*\)/\1/p' "$src")"
	echo
	echo "require k8s.io/kubernetes $version"
	echo
	echo "replace ("
	sed -n '/^replace (/,/^)/p' "$src" | sed -n "s#^\t\(k8s.io/[^ ]*\) => ./staging/src/.*#\t\1 => \1 $staging#p"
	# modfiles/1.NN.pins: replace lines for dependencies the module proxy
	# does not serve at the version the release asks for (with why).
	pins=modfiles/1.$minor.pins
	[ ! -f "$pins" ] || grep -v '^#' "$pins"
	echo ")"
} >"$out"
need=go$(sed -n 's/^go \(.*\)/\1/p' "$out")
if [ "$GOTOOLCHAIN" = auto ] && [ "$(printf '%s\n%s\n' "$need" "$(go env GOVERSION)" | sort -V | head -1)" != "$need" ]; then
	export GOTOOLCHAIN=$need
fi
: >"${out%.mod}.sum"
go list -mod=mod -modfile="$out" -tags "k8s_1_$minor" -deps . >/dev/null
echo "wrote $out"
